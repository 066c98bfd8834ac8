// Dilated attention (LongNet) written exactly as docs/attention-spec.md#dilated defines it: each
// branch i splits the sequence into segments of w_i' = min(w_i, N), keeps in each segment the
// positions whose offset is congruent to the head's class mod r_i, runs ordinary attention inside
// each kept set, and the branches mix by their log-sum-exp. A plain O(N * sum w_i / r_i) loop,
// the second, independent reference that the generic multiplicity form (layers/attention.h +
// key_multiplicity) and the CUDA kernels are checked against.
#pragma once
#include <limits>
#include <vector>
#include "layers/attention.h"

template <typename T>
void dilated_attention_forward(T* out,            // (B, N, H, D)
                               T* lse,            // (B, H, N)
                               const T* q, const T* k, const T* v,  // (B, N, H, D), row stride s.stride
                               const AttnPattern& pattern, AttnShape s, T scale) {
    const int B = s.B, N = s.N, H = s.H, D = s.D;
    const T neg_inf = -std::numeric_limits<T>::infinity();
    const size_t nb = pattern.dilated.segments.size();
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            // Per branch: o_i(p) (N, D) and lse_i(p) (N), -inf where p is not kept.
            std::vector<T> o_br(nb * (size_t)N * D, T(0)), lse_br(nb * (size_t)N, neg_inf);
            std::vector<T> score;
            for (size_t i = 0; i < nb; i++) {
                const int w = std::min(pattern.dilated.segments[i], N), r = pattern.dilated.dilations[i];
                for (int start = 0; start < N; start += w) {
                    const int end = std::min(start + w, N);
                    const int first = start + dilated_class(h, r);  // the kept set: first, first + r, ...
                    for (int p = first; p < end; p += r) {
                        const T* qp = q + ((size_t)b * N + p) * s.stride + (size_t)h * D;
                        score.clear();
                        T mx = neg_inf;
                        for (int key = first; key < end && (!pattern.causal || key <= p); key += r) {
                            const T* kk = k + ((size_t)b * N + key) * s.stride + (size_t)h * D;
                            T dot = 0;
                            for (int d = 0; d < D; d++) dot += qp[d] * kk[d];
                            score.push_back(scale * dot);
                            mx = std::max(mx, score.back());
                        }
                        T sum = 0;
                        T* o = o_br.data() + (i * N + p) * D;
                        for (size_t n = 0; n < score.size(); n++) {
                            const T e = std::exp(score[n] - mx);
                            sum += e;
                            const T* vk = v + ((size_t)b * N + first + (int)n * r) * s.stride + (size_t)h * D;
                            for (int d = 0; d < D; d++) o[d] += e * vk[d];
                        }
                        for (int d = 0; d < D; d++) o[d] /= sum;
                        lse_br[i * N + p] = mx + std::log(sum);
                    }
                }
            }
            // Mix: L = logsumexp_i lse_i, O = sum_i exp(lse_i - L) o_i.
            for (int p = 0; p < N; p++) {
                T mx = neg_inf;
                for (size_t i = 0; i < nb; i++) mx = std::max(mx, lse_br[i * N + p]);
                T* op = out + ((size_t)b * N + p) * H * D + (size_t)h * D;
                T& L = lse[((size_t)b * H + h) * N + p];
                for (int d = 0; d < D; d++) op[d] = 0;
                if (mx == neg_inf) {
                    L = neg_inf;
                    continue;
                }
                T sum = 0;
                for (size_t i = 0; i < nb; i++) sum += std::exp(lse_br[i * N + p] - mx);
                L = mx + std::log(sum);
                for (size_t i = 0; i < nb; i++) {
                    const T wgt = std::exp(lse_br[i * N + p] - L);
                    if (wgt == 0) continue;
                    for (int d = 0; d < D; d++) op[d] += wgt * o_br[(i * N + p) * D + d];
                }
            }
        }
    }
}
