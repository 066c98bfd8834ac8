// Attention, CPU reference: one softmax per query row over the multiset of keys its pattern
// gives (layers/attention_pattern.h), written plainly, O(Nq * Nk) per head. The CUDA kernels and
// the tiled CPU kernel (layers/attention_tiled.h) are checked against this.
//
// Two-sided: a query side (rows of Q) and a key/value side (rows of K and V) may be different
// pieces of one longer sequence (a ring step: these queries against that remote block of keys;
// a KV cache: one new query against the cached keys). Each side carries the GLOBAL positions of
// its rows, and AttnDims::seq_len is the GLOBAL sequence length; every mask and pattern decision
// uses only those, never a row index.
//
// Layout: element (b, i, h, d) of a side is x[(b*n + i)*stride + h*D + d]: (B, n, H, D) read in
// place with a row stride, so the rotated QKV buffer (B, N, 3, H, D) is used as it is (stride
// 3*H*D, K and V start H*D and 2*H*D further on). O is (B, nq, H, D) contiguous; L (the
// log-sum-exp of each row, kept for backward) is (B, H, nq); a row with no key gets O = 0 and
// L = -inf.
//
// Output modes. Write: O and L of this call. Merge: O and L hold a partial result over other
// keys (start from attention_partial_init: O = 0, L = -inf) and this call's keys are merged in by
// log-sum-exp, L' = log(e^L + e^l), O' = e^(L - L') O + e^(l - L') o; calling Merge once per key
// block gives the result of one call over all blocks (up to rounding).
//
// Backward, in pieces (the same for every pattern, docs/attention-spec.md#common):
//   attention_backward_preprocess   delta = rowsum(dO * O), once, from the FINAL O
//   attention_backward_block        per key/value block: P = m exp(s q.k - L) from the FINAL L,
//                                   dV += P^T dO, dS = P (dO.V^T - delta), dQ += s dS K,
//                                   dK += s dS^T Q; adds into dq and into this block's dk, dv
// (on the CPU there is nothing to finish). attention_backward runs both for one block.
//
// The one-sided forms at the end (Q, K, V from one buffer of N tokens, pos, doc_start) are what
// the model calls; they build the two sides over the same rows.
#pragma once
#include <cmath>
#include <limits>
#include <vector>
#include "layers/attention_pattern.h"
#include "layers/common.h"

// The query side: rows of Q for B batch rows.
template <typename T>
struct AttnQueries {
    const T* q;            // (B, n, H, D), row stride `stride`
    int stride, n;
    const int* pos;        // (n) global positions
    const int* doc_start;  // (B, n) or nullptr: global position where each query's document starts;
                           // keys before it are masked, so packed documents attend only themselves
    int pos0 = -1;         // pos[0] when pos[i] = pos0 + i (the GPU launchers need it on the host)
};

// The key/value side.
template <typename T>
struct AttnKeys {
    const T* k;      // (B, n, H, D), row stride `stride`
    const T* v;      // (B, n, H, D), row stride `stride`
    int stride, n;
    const int* pos;  // (n) global positions
    int pos0 = -1;   // pos[0] when pos[i] = pos0 + i (the GPU launchers need it on the host)
};

struct AttnDims {
    int B, H, D;
    int seq_len;  // the GLOBAL sequence length (dilated segments are cut from it)
};

enum class AttnOutput { Write, Merge };

// m(p, k) for query row i and key row j of batch row b, head h: the pattern, then the document.
template <typename T>
inline int attn_pair_multiplicity(const AttnPattern& pattern, const AttnQueries<T>& qs, const AttnKeys<T>& ks,
                                  int seq_len, int b, int h, int i, int j) {
    if (qs.doc_start && ks.pos[j] < qs.doc_start[(size_t)b * qs.n + i]) return 0;
    return key_multiplicity(pattern, h, qs.pos[i], ks.pos[j], seq_len);
}

// O = 0, L = -inf: the partial result over no keys, where Merge calls start.
template <typename T>
void attention_partial_init(T* out, T* lse, AttnDims dm, int nq) {
    const size_t no = (size_t)dm.B * nq * dm.H * dm.D, nl = (size_t)dm.B * dm.H * nq;
    for (size_t i = 0; i < no; i++) out[i] = 0;
    for (size_t i = 0; i < nl; i++) lse[i] = -std::numeric_limits<T>::infinity();
}

// Merges one row's result (o, l) over some keys into the partial (O, L) over others.
template <typename T>
inline void merge_partial_row(T* O, T& L, const T* o, T l, int D) {
    const T neg_inf = -std::numeric_limits<T>::infinity();
    if (l == neg_inf) return;  // no key in this block: nothing to add
    const T mx = std::max(L, l);
    const T L_new = mx + std::log(std::exp(L - mx) + std::exp(l - mx));
    const T a = std::exp(L - L_new), c = std::exp(l - L_new);  // L = -inf: a = 0
    for (int d = 0; d < D; d++) O[d] = a * O[d] + c * o[d];
    L = L_new;
}

// Row i (batch b, head h) of this call's result, (o, l), into out and lse by the output mode.
template <typename T>
inline void store_attention_row(T* out, T* lse, AttnDims dm, int nq, int b, int h, int i, const T* o, T l,
                                AttnOutput mode) {
    T* oi = out + ((size_t)b * nq + i) * dm.H * dm.D + (size_t)h * dm.D;
    T& li = lse[((size_t)b * dm.H + h) * nq + i];
    if (mode == AttnOutput::Merge) {
        merge_partial_row(oi, li, o, l, dm.D);
    } else {
        for (int d = 0; d < dm.D; d++) oi[d] = o[d];
        li = l;
    }
}

template <typename T>
void attention_forward(T* out,  // (B, nq, H, D)
                       T* lse,  // (B, H, nq)
                       const AttnQueries<T>& qs, const AttnKeys<T>& ks, const AttnPattern& pattern, AttnDims dm,
                       T scale, AttnOutput mode = AttnOutput::Write) {
    const int B = dm.B, H = dm.H, D = dm.D, NQ = qs.n, NK = ks.n;
    const T neg_inf = -std::numeric_limits<T>::infinity();
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            std::vector<T> score(NK), o(D);
            std::vector<int> mult(NK);
            for (int i = 0; i < NQ; i++) {
                const T* qi = qs.q + ((size_t)b * NQ + i) * qs.stride + (size_t)h * D;
                T mx = neg_inf;
                for (int j = 0; j < NK; j++) {
                    mult[j] = attn_pair_multiplicity(pattern, qs, ks, dm.seq_len, b, h, i, j);
                    if (!mult[j]) continue;
                    const T* kj = ks.k + ((size_t)b * NK + j) * ks.stride + (size_t)h * D;
                    T dot = 0;
#pragma omp simd reduction(+ : dot)
                    for (int d = 0; d < D; d++) dot += qi[d] * kj[d];
                    score[j] = scale * dot;
                    if (score[j] > mx) mx = score[j];
                }
                // This block's row: o (normalized) and l, -inf with O = 0 when no key is kept.
                for (int d = 0; d < D; d++) o[d] = 0;
                T l = neg_inf;
                if (mx != neg_inf) {
                    T sum = 0;
                    for (int j = 0; j < NK; j++) {
                        if (!mult[j]) continue;
                        const T p = mult[j] * std::exp(score[j] - mx);
                        sum += p;
                        const T* vj = ks.v + ((size_t)b * NK + j) * ks.stride + (size_t)h * D;
#pragma omp simd
                        for (int d = 0; d < D; d++) o[d] += p * vj[d];
                    }
                    for (int d = 0; d < D; d++) o[d] /= sum;
                    l = mx + std::log(sum);
                }
                store_attention_row(out, lse, dm, NQ, b, h, i, o.data(), l, mode);
            }
        }
    }
}

// delta (B, H, nq) = rowsum(dO * O) over each head's D values, from the final O.
template <typename T>
void attention_backward_preprocess(T* delta,      // (B, H, nq)
                                   const T* dout,  // (B, nq, H, D)
                                   const T* out,   // (B, nq, H, D)
                                   AttnDims dm, int nq) {
    const int B = dm.B, H = dm.H, D = dm.D;
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            for (int i = 0; i < nq; i++) {
                const size_t row = ((size_t)b * nq + i) * H * D + (size_t)h * D;
                T s = 0;
                for (int d = 0; d < D; d++) s += dout[row + d] * out[row + d];
                delta[((size_t)b * H + h) * nq + i] = s;
            }
        }
    }
}

// One key/value block of the flash backward, valid for every pattern. Adds into dq (the query
// side's layout) and dk, dv (the key side's layout). Parallel over (b, h): the keys of one head
// are only touched by its own queries, so no two threads write the same row.
template <typename T>
void attention_backward_block(T* dq,         // (B, nq, H, D), row stride qs.stride
                              T* dk, T* dv,  // (B, nk, H, D), row stride ks.stride
                              const T* dout,   // (B, nq, H, D)
                              const T* lse,    // (B, H, nq): the FINAL L over all blocks
                              const T* delta,  // (B, H, nq): attention_backward_preprocess
                              const AttnQueries<T>& qs, const AttnKeys<T>& ks, const AttnPattern& pattern,
                              AttnDims dm, T scale) {
    const int B = dm.B, H = dm.H, D = dm.D, NQ = qs.n, NK = ks.n;
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            for (int i = 0; i < NQ; i++) {
                const T li = lse[((size_t)b * H + h) * NQ + i];
                if (li == -std::numeric_limits<T>::infinity()) continue;
                const T di = delta[((size_t)b * H + h) * NQ + i];
                const size_t qrow = ((size_t)b * NQ + i) * qs.stride + (size_t)h * D;
                const size_t orow = ((size_t)b * NQ + i) * H * D + (size_t)h * D;
                for (int j = 0; j < NK; j++) {
                    const int m = attn_pair_multiplicity(pattern, qs, ks, dm.seq_len, b, h, i, j);
                    if (!m) continue;
                    const size_t krow = ((size_t)b * NK + j) * ks.stride + (size_t)h * D;
                    T dot = 0, dp = 0;
#pragma omp simd reduction(+ : dot, dp)
                    for (int d = 0; d < D; d++) {
                        dot += qs.q[qrow + d] * ks.k[krow + d];
                        dp += dout[orow + d] * ks.v[krow + d];
                    }
                    const T p = m * std::exp(scale * dot - li);
                    const T ds = p * (dp - di);
#pragma omp simd
                    for (int d = 0; d < D; d++) {
                        dv[krow + d] += p * dout[orow + d];
                        dq[qrow + d] += scale * ds * ks.k[krow + d];
                        dk[krow + d] += scale * ds * qs.q[qrow + d];
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// One-sided forms: queries and keys are the same N rows of one sequence (the model's call).

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
    attention_forward(out, lse, AttnQueries<T>{q, s.stride, s.N, pos, doc_start}, AttnKeys<T>{k, v, s.stride, s.N, pos},
                      pattern, AttnDims{s.B, s.H, s.D, s.N}, scale);
}

// Adds into dq, dk, dv (same strided layout as q, k, v).
template <typename T>
void attention_backward(T* dq, T* dk, T* dv,  // (B, N, H, D), row stride s.stride
                        const T* dout,        // (B, N, H, D)
                        const T* out,         // (B, N, H, D)
                        const T* lse,         // (B, H, N)
                        const T* q, const T* k, const T* v,
                        const int* pos, const int* doc_start,
                        const AttnPattern& pattern, AttnShape s, T scale) {
    const AttnDims dm{s.B, s.H, s.D, s.N};
    std::vector<T> delta((size_t)s.B * s.H * s.N);
    attention_backward_preprocess(delta.data(), dout, out, dm, s.N);
    attention_backward_block(dq, dk, dv, dout, lse, delta.data(), AttnQueries<T>{q, s.stride, s.N, pos, doc_start},
                             AttnKeys<T>{k, v, s.stride, s.N, pos}, pattern, dm, scale);
}
