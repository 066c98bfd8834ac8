// The host half of block-sparse attention's GPU schedule: for kernel tiles of BM query rows and
// BN key rows (not the layout's block size: a tile may hold several blocks, or part of one),
// which key tiles each query tile must visit (the forward and dQ), and which query tiles each
// key tile must visit (dK, dV: the transposed lists), as CSR, one list for all heads (a tile pair
// some head needs is visited, and the kernel's element mask asks the pattern per head). Built
// from the rules directly, in O(tiles x blocks per row x heads), so it stays fast at 1M tokens.
// Exact: a listed pair holds at least one kept (query, key) pair for some head, and every kept
// pair's tiles are listed (tests/test_attention_cpu.cpp checks both by brute force).
#pragma once
#include <algorithm>
#include <vector>
#include "layers/patterns/block_sparse.h"

struct TileLists {
    int BM = 0, BN = 0, n_q_tiles = 0, n_k_tiles = 0;
    std::vector<int> q_ptr, k_of_q;  // key tiles of query tile t: k_of_q[q_ptr[t] .. q_ptr[t+1])
    std::vector<int> k_ptr, q_of_k;  // query tiles of key tile t: q_of_k[k_ptr[t] .. k_ptr[t+1])
    // Listed tile pairs over all pairs the causal mask allows (1 for dense).
    double density() const {
        long long allowed = 0;
        for (int t = 0; t < n_q_tiles; t++) allowed += std::min<long long>(n_k_tiles, ((long long)(t + 1) * BM + BN - 1) / BN);
        return allowed ? (double)k_of_q.size() / allowed : 0;
    }
};

inline TileLists block_sparse_tile_lists(const AttnPattern& p, int N, int H, int BM, int BN) {
    TileLists t;
    t.BM = BM, t.BN = BN, t.n_q_tiles = (N + BM - 1) / BM, t.n_k_tiles = (N + BN - 1) / BN;
    const int b = p.block;
    const bool per_head = p.random_count || (p.layout && p.layout->heads > 1);
    std::vector<char> mark(t.n_k_tiles);
    std::vector<std::vector<int>> of_q(t.n_q_tiles);
    for (int qt = 0; qt < t.n_q_tiles; qt++) {
        std::fill(mark.begin(), mark.end(), 0);
        const int q_lo = qt * BM, q_hi = std::min(N, q_lo + BM) - 1;
        const int k_max = p.causal ? q_hi : N - 1;  // no key tile past the tile's last query, causal
        auto mark_keys = [&](int lo, int hi) {          // key rows [lo, hi], clipped
            lo = std::max(lo, 0), hi = std::min(hi, k_max);
            for (int kt = lo / BN; lo <= hi && kt <= hi / BN; kt++) mark[kt] = 1;
        };
        if (p.global && q_lo < p.global)                           // global rows see every key (before them, causal)
            mark_keys(0, p.causal ? std::min(q_hi, p.global - 1) : k_max);
        if (p.global) mark_keys(0, p.global - 1);                  // every row sees the global keys
        if (p.window) mark_keys(q_lo - p.window + 1, p.causal ? q_hi : q_hi + p.window - 1);
        for (int h = 0; h < (per_head ? H : 1); h++)
            for (int qb = q_lo / b; qb <= q_hi / b; qb++)
                for (int kb : BlockSparsePattern::active_blocks(p, h, qb, N))
                    mark_keys(kb * b, kb * b + b - 1);  // causal: the diagonal block only up to the last query
        for (int kt = 0; kt < t.n_k_tiles; kt++)
            if (mark[kt]) of_q[qt].push_back(kt);
    }
    t.q_ptr.push_back(0);
    std::vector<std::vector<int>> of_k(t.n_k_tiles);
    for (int qt = 0; qt < t.n_q_tiles; qt++) {
        for (int kt : of_q[qt]) t.k_of_q.push_back(kt), of_k[kt].push_back(qt);
        t.q_ptr.push_back((int)t.k_of_q.size());
    }
    t.k_ptr.push_back(0);
    for (int kt = 0; kt < t.n_k_tiles; kt++) {
        t.q_of_k.insert(t.q_of_k.end(), of_k[kt].begin(), of_k[kt].end());
        t.k_ptr.push_back((int)t.q_of_k.size());
    }
    return t;
}
