// The host half of block-sparse attention's GPU schedule: for kernel tiles of BM query rows and
// BN key rows (not the layout's block size: a tile may hold several blocks, or part of one),
// which key tiles each query tile must visit (the forward and dQ), and which query tiles each
// key tile must visit (dK, dV: the transposed lists), as CSR, one list for all heads (a tile pair
// some head needs is visited, and the kernel's element mask asks the pattern per head). Built
// from the rules directly, in O(tiles x blocks per row x heads), so it stays fast at 1M tokens.
// Exact: a listed pair holds at least one kept (query, key) pair for some head, and every kept
// pair's tiles are listed (tests/test_attention_cpu.cpp checks both by brute force).
//
// Each listed pair also says whether the pattern CUTS it: false only when the pattern keeps every
// (query, key) of the pair for every head (causal mask aside), so that the kernel may skip the
// pattern's element mask there; a window's interior and the global columns are such pairs, and
// they are most of the work. The sides may be pieces of a longer sequence (a ring step): query
// row i is global position q_pos0 + i, key row j is k_pos0 + j, the rules use global positions
// and the global length seq_len.
#pragma once
#include <algorithm>
#include <numeric>
#include <vector>
#include "layers/patterns/block_sparse.h"

struct TileLists {
    int BM = 0, BN = 0, n_q_tiles = 0, n_k_tiles = 0;
    std::vector<int> q_ptr, k_of_q;  // key tiles of query tile t: k_of_q[q_ptr[t] .. q_ptr[t+1])
    std::vector<char> k_of_q_cut;    // per entry of k_of_q: the pattern cuts the pair
    std::vector<int> k_ptr, q_of_k;  // query tiles of key tile t: q_of_k[k_ptr[t] .. k_ptr[t+1])
    std::vector<char> q_of_k_cut;    // per entry of q_of_k
    // Tiles by the length of their list, longest first (ties by index): the launch order, so
    // that the long rows of global tokens start first and run under the rest instead of after.
    std::vector<int> q_order, k_order;
    // Listed tile pairs over all pairs the causal mask allows (1 for dense; one-sided lists).
    double density() const {
        long long allowed = 0;
        for (int t = 0; t < n_q_tiles; t++) allowed += std::min<long long>(n_k_tiles, ((long long)(t + 1) * BM + BN - 1) / BN);
        return allowed ? (double)k_of_q.size() / allowed : 0;
    }
};

// Does the pattern keep every (q, k) with q in [q_lo, q_hi], k in [k_lo, k_hi] (global positions)
// and k <= q when causal, for every head? Conservative: a pair covered only by a mix of rules
// counts as cut. `blocks[h][qb - qb_lo]` are the active key blocks of (h, query block qb), sorted.
inline bool block_sparse_tile_full(const AttnPattern& p, int q_lo, int q_hi, int k_lo, int k_hi,
                                   const std::vector<std::vector<std::vector<int>>>& blocks, int qb_lo) {
    const BlockSparseParams& s = p.block_sparse;
    if (s.window && q_hi - k_lo < s.window && (p.causal || k_hi - q_lo < s.window)) return true;
    if (s.global && (k_hi < s.global || q_hi < s.global)) return true;
    if (blocks.empty()) return false;
    const int b = s.block;
    for (const auto& per_q : blocks)
        for (int qb = q_lo / b; qb <= q_hi / b; qb++) {
            const std::vector<int>& row = per_q[qb - qb_lo];
            for (int kb = k_lo / b; kb <= k_hi / b; kb++) {
                if (p.causal && kb * b > std::min(q_hi, qb * b + b - 1)) break;  // no allowed pair left in this row
                if (!std::binary_search(row.begin(), row.end(), kb)) return false;
            }
        }
    return true;
}

inline std::vector<int> tiles_by_list_length(const std::vector<int>& ptr) {
    std::vector<int> order(ptr.size() - 1);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int c) { return ptr[a + 1] - ptr[a] > ptr[c + 1] - ptr[c]; });
    return order;
}

// Lists for q_n query rows from global position q_pos0 and k_n key rows from k_pos0, in a
// sequence of seq_len tokens.
inline TileLists block_sparse_tile_lists(const AttnPattern& p, int seq_len, int H, int BM, int BN, int q_pos0, int q_n,
                                         int k_pos0, int k_n) {
    const BlockSparseParams& s = p.block_sparse;
    TileLists t;
    t.BM = BM, t.BN = BN, t.n_q_tiles = (q_n + BM - 1) / BM, t.n_k_tiles = (k_n + BN - 1) / BN;
    const int b = s.block;
    const bool per_head = s.random_count || (s.layout && s.layout->heads > 1);
    const bool block_rules = s.any_block_rules();
    std::vector<char> mark(t.n_k_tiles);
    std::vector<std::vector<int>> of_q(t.n_q_tiles);
    std::vector<std::vector<char>> cut_of_q(t.n_q_tiles);
    std::vector<std::vector<std::vector<int>>> blocks;  // [head][query block of the tile] -> key blocks
    for (int qt = 0; qt < t.n_q_tiles; qt++) {
        std::fill(mark.begin(), mark.end(), 0);
        const int q_lo = q_pos0 + qt * BM, q_hi = q_pos0 + std::min(q_n, qt * BM + BM) - 1;  // global positions
        const int k_max = p.causal ? q_hi : seq_len - 1;  // no key past the tile's last query, causal
        auto mark_keys = [&](int lo, int hi) {             // key positions [lo, hi], clipped to this side
            lo = std::max({lo, 0, k_pos0}), hi = std::min({hi, k_max, k_pos0 + k_n - 1});
            for (int kt = (lo - k_pos0) / BN; lo <= hi && kt <= (hi - k_pos0) / BN; kt++) mark[kt] = 1;
        };
        if (s.global && q_lo < s.global)                           // global rows see every key (before them, causal)
            mark_keys(0, p.causal ? std::min(q_hi, s.global - 1) : k_max);
        if (s.global) mark_keys(0, s.global - 1);                  // every row sees the global keys
        if (s.window) mark_keys(q_lo - s.window + 1, p.causal ? q_hi : q_hi + s.window - 1);
        blocks.assign(block_rules ? (per_head ? H : 1) : 0, {});
        for (int h = 0; h < (int)blocks.size(); h++)
            for (int qb = q_lo / b; qb <= q_hi / b; qb++) {
                blocks[h].push_back(BlockSparsePattern::active_blocks(p, h, qb, seq_len));
                for (int kb : blocks[h].back()) mark_keys(kb * b, kb * b + b - 1);  // causal: the diagonal up to the last query
            }
        for (int kt = 0; kt < t.n_k_tiles; kt++)
            if (mark[kt]) {
                const int k_lo = k_pos0 + kt * BN, k_hi = k_pos0 + std::min(k_n, kt * BN + BN) - 1;
                of_q[qt].push_back(kt);
                cut_of_q[qt].push_back(!block_sparse_tile_full(p, q_lo, q_hi, k_lo, k_hi, blocks, q_lo / b));
            }
    }
    t.q_ptr.push_back(0);
    std::vector<std::vector<int>> of_k(t.n_k_tiles);
    std::vector<std::vector<char>> cut_of_k(t.n_k_tiles);
    for (int qt = 0; qt < t.n_q_tiles; qt++) {
        for (size_t i = 0; i < of_q[qt].size(); i++) {
            const int kt = of_q[qt][i];
            t.k_of_q.push_back(kt), t.k_of_q_cut.push_back(cut_of_q[qt][i]);
            of_k[kt].push_back(qt), cut_of_k[kt].push_back(cut_of_q[qt][i]);
        }
        t.q_ptr.push_back((int)t.k_of_q.size());
    }
    t.k_ptr.push_back(0);
    for (int kt = 0; kt < t.n_k_tiles; kt++) {
        t.q_of_k.insert(t.q_of_k.end(), of_k[kt].begin(), of_k[kt].end());
        t.q_of_k_cut.insert(t.q_of_k_cut.end(), cut_of_k[kt].begin(), cut_of_k[kt].end());
        t.k_ptr.push_back((int)t.q_of_k.size());
    }
    t.q_order = tiles_by_list_length(t.q_ptr);
    t.k_order = tiles_by_list_length(t.k_ptr);
    return t;
}

// One sequence of N tokens, both sides whole.
inline TileLists block_sparse_tile_lists(const AttnPattern& p, int N, int H, int BM, int BN) {
    return block_sparse_tile_lists(p, N, H, BM, BN, 0, N, 0, N);
}
