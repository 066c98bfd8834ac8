// Attention as the spec writes it, branch by branch: each branch of the pattern
// (pattern_branches: one for dense, one per (segment, dilation) for dilated) is a softmax of its
// own, and the branches mix by their log-sum-exp. Every stored intermediate goes through
// `round`:
//   - float with bf16 rounding: "a plain bf16 implementation" (P rounded before it meets V, each
//     branch's o and the mixed O rounded; backward: dS and P rounded, each branch's dQ, dK, dV
//     rounded, summed, rounded). Its error against the float64 reference is the budget of the GPU
//     tests (a kernel passes within 3x of it: flash-attention's rule);
//   - double with no rounding: the spec itself, which must equal the one-softmax-over-the-key-
//     multiset reference (layers/attention.h); tests/test_attention_cpu.cpp and the GPU harness
//     check that, so the budget is the error of an implementation that computes the right thing.
// The pair walk asks key_multiplicity of each branch, so a new pattern needs nothing here.
// O(N^2) pair checks per (row, head, branch): test sizes only.
#pragma once
#include <cmath>
#include <limits>
#include <vector>
#include "layers/attention.h"

template <typename T>
inline T branchwise_dot(const T* a, const T* b, int D) {
    T s = 0;
    for (int d = 0; d < D; d++) s += a[d] * b[d];
    return s;
}

// out (B, N, H, D), lse (B, H, N); q, k, v (B, N, H, D) with row stride s.stride.
template <typename T, typename Round>
void branchwise_forward(T* out, T* lse, const T* q, const T* k, const T* v, const int* pos, const int* doc_start,
                        const AttnPattern& pattern, const AttnShape& s, T scale, Round round) {
    const int B = s.B, N = s.N, H = s.H, D = s.D;
    const std::vector<AttnPattern> branches = pattern_branches(pattern);
    const int nb = (int)branches.size();
    const T neg_inf = -std::numeric_limits<T>::infinity();
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) {
            std::vector<T> sc(N), o_br((size_t)nb * D), l_br(nb), acc(D);
            std::vector<int> mult(N);
            for (int h = 0; h < H; h++) {
                const T* qi = q + ((size_t)b * N + i) * s.stride + (size_t)h * D;
                for (int br = 0; br < nb; br++) {
                    T mx = neg_inf;
                    for (int j = 0; j < N; j++) {
                        mult[j] = attn_multiplicity(branches[br], s, pos, doc_start, b, h, i, j);
                        if (!mult[j]) continue;
                        sc[j] = branchwise_dot(qi, k + ((size_t)b * N + j) * s.stride + (size_t)h * D, D) * scale;
                        mx = std::max(mx, sc[j]);
                    }
                    T* ob = &o_br[(size_t)br * D];
                    for (int d = 0; d < D; d++) ob[d] = 0;
                    l_br[br] = neg_inf;
                    if (mx == neg_inf) continue;
                    T l = 0;
                    for (int j = 0; j < N; j++)
                        if (mult[j]) l += mult[j] * std::exp(sc[j] - mx);
                    for (int d = 0; d < D; d++) acc[d] = 0;
                    for (int j = 0; j < N; j++) {
                        if (!mult[j]) continue;
                        const T p = round(mult[j] * std::exp(sc[j] - mx) / l);
                        const T* vj = v + ((size_t)b * N + j) * s.stride + (size_t)h * D;
                        for (int d = 0; d < D; d++) acc[d] += p * vj[d];
                    }
                    for (int d = 0; d < D; d++) ob[d] = round(acc[d]);
                    l_br[br] = mx + std::log(l);
                }
                // Mix the branches by their log-sum-exp; a row no branch reaches gets O = 0, L = -inf.
                T mx = neg_inf;
                for (T x : l_br) mx = std::max(mx, x);
                T* oi = out + (((size_t)b * N + i) * H + h) * D;
                T& L = lse[((size_t)b * H + h) * N + i];
                for (int d = 0; d < D; d++) oi[d] = 0;
                L = neg_inf;
                if (mx == neg_inf) continue;
                T sum = 0;
                for (T x : l_br) sum += std::exp(x - mx);
                L = mx + std::log(sum);
                for (int d = 0; d < D; d++) acc[d] = 0;
                for (int br = 0; br < nb; br++) {
                    const T w = std::exp(l_br[br] - L);
                    for (int d = 0; d < D; d++) acc[d] += w * o_br[(size_t)br * D + d];
                }
                for (int d = 0; d < D; d++) oi[d] = round(acc[d]);
            }
        }
}

// dq, dk, dv (B, N, H, D) contiguous, OVERWRITTEN, from dout, the forward's out (B, N, H, D) and
// lse (B, H, N): P = m exp(s q.k - L) with the final L, dS = P (dO.v - rowsum(dO*O)).
template <typename T, typename Round>
void branchwise_backward(T* dq, T* dk, T* dv, const T* dout, const T* out, const T* lse, const T* q, const T* k,
                         const T* v, const int* pos, const int* doc_start, const AttnPattern& pattern,
                         const AttnShape& s, T scale, Round round) {
    const int B = s.B, N = s.N, H = s.H, D = s.D;
    const std::vector<AttnPattern> branches = pattern_branches(pattern);
    const int nb = (int)branches.size();
    const T neg_inf = -std::numeric_limits<T>::infinity();
    auto qrow = [&](int b, int i, int h) { return q + ((size_t)b * N + i) * s.stride + (size_t)h * D; };
    auto krow = [&](int b, int j, int h) { return k + ((size_t)b * N + j) * s.stride + (size_t)h * D; };
    auto vrow = [&](int b, int j, int h) { return v + ((size_t)b * N + j) * s.stride + (size_t)h * D; };
    auto grow = [&](int b, int i, int h) { return dout + (((size_t)b * N + i) * H + h) * D; };
    std::vector<T> delta((size_t)B * H * N);  // rowsum(dO * O), (B, H, N)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < N; i++)
                delta[((size_t)b * H + h) * N + i] = branchwise_dot(grow(b, i, h), out + (((size_t)b * N + i) * H + h) * D, D);
    // P and dS of pair (i, j) in one branch; false when the pair is not kept or row i has no key.
    auto pair = [&](const AttnPattern& br, int b, int h, int i, int j, T& p, T& ds) {
        const int m = attn_multiplicity(br, s, pos, doc_start, b, h, i, j);
        const T L = lse[((size_t)b * H + h) * N + i];
        if (!m || L == neg_inf) return false;
        p = m * std::exp(branchwise_dot(qrow(b, i, h), krow(b, j, h), D) * scale - L);
        ds = round(p * (branchwise_dot(grow(b, i, h), vrow(b, j, h), D) - delta[((size_t)b * H + h) * N + i]) * scale);
        return true;
    };
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) {
            std::vector<T> sq(D), sk(D), sv(D), aq(D), ak(D), av(D);
            for (int h = 0; h < H; h++) {
                for (int d = 0; d < D; d++) sq[d] = sk[d] = sv[d] = 0;
                for (int br = 0; br < nb; br++) {
                    for (int d = 0; d < D; d++) aq[d] = ak[d] = av[d] = 0;
                    T p, ds;
                    for (int j = 0; j < N; j++)  // row n as a query: dQ
                        if (pair(branches[br], b, h, n, j, p, ds)) {
                            const T* kj = krow(b, j, h);
                            for (int d = 0; d < D; d++) aq[d] += ds * kj[d];
                        }
                    for (int i = 0; i < N; i++)  // row n as a key: dK, dV
                        if (pair(branches[br], b, h, i, n, p, ds)) {
                            const T pr = round(p);
                            const T *qi = qrow(b, i, h), *gi = grow(b, i, h);
                            for (int d = 0; d < D; d++) ak[d] += ds * qi[d], av[d] += pr * gi[d];
                        }
                    for (int d = 0; d < D; d++) sq[d] += round(aq[d]), sk[d] += round(ak[d]), sv[d] += round(av[d]);
                }
                const size_t o = (((size_t)b * N + n) * H + h) * D;
                for (int d = 0; d < D; d++) dq[o + d] = round(sq[d]), dk[o + d] = round(sk[d]), dv[o + d] = round(sv[d]);
            }
        }
}
