// Attention, CPU, tiled the way the flash kernels are (the second rung of the ladder in
// README "How to read the code", between the plain reference layers/attention.h and the CUDA
// kernels): a tile of BQ query rows walks the key tiles of BK rows that its pattern's schedule
// gives, keeping for each row a running max m, a running sum l and an unnormalized output acc,
// rescaled whenever m grows (the online softmax). Nothing of size nq x nk is ever stored.
//
// The same interface as the plain reference (two sides, global positions, Write or Merge), and
// the same pattern schedule the GPU kernels follow: pattern_tiles_meet skips a tile pair that no
// query of the one can attend a key of the other in; pattern_tiles_full marks pairs that need
// no per-element pattern test. Positions must not decrease along the rows of either side (so a
// tile's positions are the range from its first to its last row).
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>
#include "layers/attention.h"

template <typename T, int BQ = 16, int BK = 32>
void attention_forward_tiled(T* out,  // (B, nq, H, D)
                             T* lse,  // (B, H, nq)
                             const AttnQueries<T>& qs, const AttnKeys<T>& ks, const AttnPattern& pattern,
                             AttnDims dm, T scale, AttnOutput mode = AttnOutput::Write) {
    const int B = dm.B, H = dm.H, D = dm.D, NQ = qs.n, NK = ks.n;
    for (int i = 1; i < NQ; i++)
        if (qs.pos[i] < qs.pos[i - 1]) fatal("attention_forward_tiled: query positions decrease at row %d", i);
    for (int j = 1; j < NK; j++)
        if (ks.pos[j] < ks.pos[j - 1]) fatal("attention_forward_tiled: key positions decrease at row %d", j);
    const T neg_inf = -std::numeric_limits<T>::infinity();
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            std::vector<T> acc((size_t)BQ * D), s(BK), o(D);
            for (int i0 = 0; i0 < NQ; i0 += BQ) {
                const int nq = std::min(BQ, NQ - i0);
                const int q_lo = qs.pos[i0], q_hi = qs.pos[i0 + nq - 1];
                int doc_lo = std::numeric_limits<int>::max(), doc_hi = std::numeric_limits<int>::min();
                if (qs.doc_start)
                    for (int i = i0; i < i0 + nq; i++) {
                        doc_lo = std::min(doc_lo, qs.doc_start[(size_t)b * NQ + i]);
                        doc_hi = std::max(doc_hi, qs.doc_start[(size_t)b * NQ + i]);
                    }
                T m[BQ], l[BQ];
                std::fill(m, m + BQ, neg_inf);
                std::fill(l, l + BQ, T(0));
                std::fill(acc.begin(), acc.end(), T(0));
                for (int j0 = 0; j0 < NK; j0 += BK) {
                    const int nk = std::min(BK, NK - j0);
                    const int k_lo = ks.pos[j0], k_hi = ks.pos[j0 + nk - 1];
                    // The schedule: skip tiles no query here can see; test elements only where needed.
                    if (!pattern_tiles_meet(pattern, q_lo, q_hi, k_lo, k_hi, dm.seq_len)) continue;
                    if (qs.doc_start && k_hi < doc_lo) continue;
                    const bool plain = pattern_tiles_full(pattern, q_lo, q_hi, k_lo, k_hi, dm.seq_len) &&
                                       !(pattern.causal && k_hi > q_lo) && !(qs.doc_start && k_lo < doc_hi);
                    for (int r = 0; r < nq; r++) {
                        const int i = i0 + r;
                        const T* qi = qs.q + ((size_t)b * NQ + i) * qs.stride + (size_t)h * D;
                        T mx = m[r];
                        for (int c = 0; c < nk; c++) {
                            const int j = j0 + c;
                            const int mult = plain ? 1 : attn_pair_multiplicity(pattern, qs, ks, dm.seq_len, b, h, i, j);
                            if (!mult) {
                                s[c] = neg_inf;
                                continue;
                            }
                            const T* kj = ks.k + ((size_t)b * NK + j) * ks.stride + (size_t)h * D;
                            T dot = 0;
                            for (int d = 0; d < D; d++) dot += qi[d] * kj[d];
                            // A key counted m times is m copies of one score: log m added to it.
                            s[c] = scale * dot + (mult > 1 ? std::log((T)mult) : T(0));
                            mx = std::max(mx, s[c]);
                        }
                        if (mx == neg_inf) continue;  // nothing kept in this row so far
                        const T alpha = std::exp(m[r] - mx);  // m[r] = -inf: 0
                        T* a = acc.data() + (size_t)r * D;
                        for (int d = 0; d < D; d++) a[d] *= alpha;
                        l[r] *= alpha;
                        for (int c = 0; c < nk; c++) {
                            if (s[c] == neg_inf) continue;
                            const T p = std::exp(s[c] - mx);
                            l[r] += p;
                            const T* vj = ks.v + ((size_t)b * NK + j0 + c) * ks.stride + (size_t)h * D;
                            for (int d = 0; d < D; d++) a[d] += p * vj[d];
                        }
                        m[r] = mx;
                    }
                }
                for (int r = 0; r < nq; r++) {
                    const int i = i0 + r;
                    const T lr = l[r] > 0 ? m[r] + std::log(l[r]) : neg_inf;
                    for (int d = 0; d < D; d++) o[d] = l[r] > 0 ? acc[(size_t)r * D + d] / l[r] : T(0);
                    store_attention_row(out, lse, dm, NQ, b, h, i, o.data(), lr, mode);
                }
            }
        }
    }
}
