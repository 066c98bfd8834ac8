// Attention, CPU reference: one softmax per query row over the multiset of keys its pattern
// gives (layers/attention_pattern.h), written plainly, O(N^2) per head. The CUDA kernels are
// checked against this.
//
// Q, K, V are (B, N, H, D) read in place with a row stride, so the rotated QKV buffer
// (B, N, 3, H, D) is used as it is: element (b, n, h, d) of Q is q[(b*N + n)*stride + h*D + d]
// with stride = 3*H*D, and K, V start H*D and 2*H*D further on. O is (B, N, H, D) contiguous.
// L (the log-sum-exp of each row, kept for backward) is (B, H, N); a row with no key gets
// O = 0 and L = -inf.
//
// doc_start (B, N), optional: the global position where the document of each query starts.
// Keys before it are masked, so windows that pack several documents keep attention inside
// each document.
#pragma once
#include <limits>
#include <vector>
#include "layers/attention_pattern.h"
#include "layers/common.h"

struct AttnShape {
    int B, N, H, D;
    int stride;  // elements between consecutive tokens of Q, K, V (3*H*D for a QKV buffer)
};

// m(p, k) for query index i and key index j of batch row b: the pattern, then the document mask.
inline int attn_multiplicity(const AttnPattern& pattern, const AttnShape& s, const int* pos,
                             const int* doc_start, int b, int h, int i, int j) {
    if (doc_start && pos[j] < doc_start[(size_t)b * s.N + i]) return 0;
    return key_multiplicity(pattern, h, pos[i], pos[j], s.N);
}

template <typename T>
void attention_forward(T* out,            // (B, N, H, D)
                       T* lse,            // (B, H, N)
                       const T* q, const T* k, const T* v,  // (B, N, H, D), row stride s.stride
                       const int* pos,    // (N) global positions
                       const int* doc_start,  // (B, N) or nullptr
                       const AttnPattern& pattern, AttnShape s, T scale) {
    const int B = s.B, N = s.N, H = s.H, D = s.D;
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            std::vector<T> score(N);
            std::vector<int> mult(N);
            for (int i = 0; i < N; i++) {
                const T* qi = q + ((size_t)b * N + i) * s.stride + (size_t)h * D;
                T* oi = out + ((size_t)b * N + i) * H * D + (size_t)h * D;
                T mx = -std::numeric_limits<T>::infinity();
                for (int j = 0; j < N; j++) {
                    mult[j] = attn_multiplicity(pattern, s, pos, doc_start, b, h, i, j);
                    if (!mult[j]) continue;
                    const T* kj = k + ((size_t)b * N + j) * s.stride + (size_t)h * D;
                    T dot = 0;
#pragma omp simd reduction(+ : dot)
                    for (int d = 0; d < D; d++) dot += qi[d] * kj[d];
                    score[j] = scale * dot;
                    if (score[j] > mx) mx = score[j];
                }
                for (int d = 0; d < D; d++) oi[d] = 0;
                T* li = lse + ((size_t)b * H + h) * N + i;
                if (mx == -std::numeric_limits<T>::infinity()) {  // no key at all
                    *li = mx;
                    continue;
                }
                T sum = 0;
                for (int j = 0; j < N; j++) {
                    if (!mult[j]) continue;
                    const T p = mult[j] * std::exp(score[j] - mx);
                    sum += p;
                    const T* vj = v + ((size_t)b * N + j) * s.stride + (size_t)h * D;
#pragma omp simd
                    for (int d = 0; d < D; d++) oi[d] += p * vj[d];
                }
                for (int d = 0; d < D; d++) oi[d] /= sum;
                *li = mx + std::log(sum);
            }
        }
    }
}

// The flash backward, valid for every pattern: P = m exp(s q.k - L) recomputed from L,
// dV += P^T dO, dS = P * (dO.V^T - rowsum(dO * O)), dQ += s dS K, dK += s dS^T Q.
// Adds into dq, dk, dv (same strided layout as q, k, v). Parallel over (b, h): the keys of one
// head are only touched by its own queries, so no two threads write the same dK/dV row.
template <typename T>
void attention_backward(T* dq, T* dk, T* dv,  // (B, N, H, D), row stride s.stride
                        const T* dout,        // (B, N, H, D)
                        const T* out,         // (B, N, H, D)
                        const T* lse,         // (B, H, N)
                        const T* q, const T* k, const T* v,
                        const int* pos, const int* doc_start,
                        const AttnPattern& pattern, AttnShape s, T scale) {
    const int B = s.B, N = s.N, H = s.H, D = s.D;
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            for (int i = 0; i < N; i++) {
                const T li = lse[((size_t)b * H + h) * N + i];
                if (li == -std::numeric_limits<T>::infinity()) continue;
                const size_t qrow = ((size_t)b * N + i) * s.stride + (size_t)h * D;
                const size_t orow = ((size_t)b * N + i) * H * D + (size_t)h * D;
                T delta = 0;  // rowsum(dO * O)
                for (int d = 0; d < D; d++) delta += dout[orow + d] * out[orow + d];
                for (int j = 0; j < N; j++) {
                    const int m = attn_multiplicity(pattern, s, pos, doc_start, b, h, i, j);
                    if (!m) continue;
                    const size_t krow = ((size_t)b * N + j) * s.stride + (size_t)h * D;
                    T dot = 0, dp = 0;
#pragma omp simd reduction(+ : dot, dp)
                    for (int d = 0; d < D; d++) {
                        dot += q[qrow + d] * k[krow + d];
                        dp += dout[orow + d] * v[krow + d];
                    }
                    const T p = m * std::exp(scale * dot - li);
                    const T ds = p * (dp - delta);
#pragma omp simd
                    for (int d = 0; d < D; d++) {
                        dv[krow + d] += p * dout[orow + d];
                        dq[qrow + d] += scale * ds * k[krow + d];
                        dk[krow + d] += scale * ds * q[qrow + d];
                    }
                }
            }
        }
    }
}
