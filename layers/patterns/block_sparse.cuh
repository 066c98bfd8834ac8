// Block-sparse attention's GPU schedule (the device side of layers/patterns/block_sparse.h): a
// query tile walks the key tiles of its list, a key tile the query tiles of its list (the
// transposed layout), both built once per layout and tile shape on the host
// (layers/patterns/block_sparse_tiles.h) and cached on the device (block_sparse_lists.cuh,
// which bind_tiles puts in Params::args). A list entry is tile * 2 + cut: cut = 1
// when the pattern keeps only some of the pair's (query, key) pairs, and only then does the
// kernel ask the pattern element by element (BlockSparsePattern::multiplicity, per head).
#pragma once
#include <climits>
#include <cstdint>
#include "layers/cuda/attention/masks.cuh"
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/schedule_list.cuh"
#include "layers/patterns/block_sparse_lists.cuh"
#include "layers/patterns/block_sparse.h"

namespace flash {

struct TileList {
    const int* entry;
    int n;
    __device__ int count() const { return n; }
    __device__ int tile(int it) const { return __ldg(entry + it) >> 1; }
    __device__ bool cut(int it) const { return __ldg(entry + it) & 1; }
};

// One instance for one-sided and two-sided launches (it may merge, into bf16 or fp32 O): the
// lists already carry each launch's sides, so nothing else differs.
struct BlockSparseSchedule {
    static constexpr bool kPerBlockMaps = false, kMayMerge = true, kTwoSided = true, kOwnElementMask = true;
    static constexpr bool kIntervalRule = true;  // the token rules: a window and the global keys
    __device__ static bool block_rules(const Params& p) { return p.args.block_sparse.rules.args.any_block_rules; }
    static bool serves(const Params& p) { return p.pattern->kind == AttnKind::BlockSparse; }
    __device__ static TileList key_tiles(const Params& p, const QueryTile& qt, int) {
        const int t = qt.r0 / p.args.block_sparse.tiles.BM, a = __ldg(p.args.block_sparse.tiles.q_ptr + t);
        return TileList{p.args.block_sparse.tiles.k_of_q + a, __ldg(p.args.block_sparse.tiles.q_ptr + t + 1) - a};
    }
    __device__ static TileList query_tiles(const Params& p, const KeyTile& kt, int) {
        const int t = kt.r0 / p.args.block_sparse.tiles.BN, a = __ldg(p.args.block_sparse.tiles.k_ptr + t);
        return TileList{p.args.block_sparse.tiles.q_of_k + a, __ldg(p.args.block_sparse.tiles.k_ptr + t + 1) - a};
    }
    // The longest lists first (the global rows and columns), so they run under the rest.
    __device__ static int query_tile_of_rank(const Params& p, int rank, int) { return __ldg(p.args.block_sparse.tiles.q_order + rank); }
    __device__ static int key_tile_of_rank(const Params& p, int rank) { return __ldg(p.args.block_sparse.tiles.k_order + rank); }
    // The element mask's two halves (the schedule interface, dense.cuh): the token rules (window,
    // global) worked out once per query row as a key interval and the global keys, so that an
    // element costs a few compares with no parameter loads; the block rules once per row as bits.
    // Equal to token_rules: a global row keeps every key; else keys below `global`, and the
    // window's keys, qp - k < W when causal (later keys are the causal mask's), |qp - k| < W if not.
    struct RowRule {
        int lo, hi, global;
        __device__ bool keeps(int kp) const { return kp < global || (kp >= lo && kp <= hi); }
    };
    __device__ static RowRule row_rule(const Params& p, int qp) {
        const int W = p.args.block_sparse.rules.args.window, G = p.args.block_sparse.rules.args.global;
        if (G && qp < G) return RowRule{INT_MIN, INT_MAX, INT_MIN};
        if (!W) return RowRule{INT_MAX, INT_MIN, G};
        return RowRule{qp - W + 1, p.args.block_sparse.rules.causal || qp > INT_MAX - W ? INT_MAX : qp + W - 1, G};
    }
    // The token rules from a key's side (the backward's P^T masks): the queries whose rule keeps
    // key kp, as a RowRule over query positions. A global key is every query's; else the global
    // rows (qp < global) and the queries whose window holds kp: kp <= qp + W - 1 when causal (the
    // earlier queries are the causal mask's), |qp - kp| < W if not.
    __device__ static RowRule col_rule(const Params& p, int kp) {
        const int W = p.args.block_sparse.rules.args.window, G = p.args.block_sparse.rules.args.global;
        if (G && kp < G) return RowRule{INT_MIN, INT_MAX, INT_MIN};
        if (!W) return RowRule{INT_MAX, INT_MIN, G};
        return RowRule{p.args.block_sparse.rules.causal ? INT_MIN : kp - W + 1, kp > INT_MAX - W ? INT_MAX : kp + W - 1, G};
    }
    // The block rules (dilated, random, explicit blocks) for one row of a thread's element mask:
    // bit c is set when head h keeps the pair of the row at position rp and the column at position
    // c0 + 8 (c / 2) + c % 2 (c < NC: a thread's columns in the mma fragment layout, c = 2 j + e).
    // Q_ROWS: the rows are queries (the forward's S), else keys (the backward's S^T). Zero when the
    // pattern has no block rules. One loop, not unrolled, asking each block pair once: inlined in
    // every element of the unrolled masks, the rules (a hash loop, a 64-bit remainder, a layout
    // lookup) make the block-sparse forward kernel several times the dense one's code, and its warps
    // wait on instruction fetches (see notes/fa3-speed.md, the block-sparse masks).
    template <int NC, bool Q_ROWS>
    __device__ static uint32_t kept_bits(const Params& p, int h, int rp, int c0) {
        static_assert(NC <= 32, "one bit per column of a 32-bit word");
        if (!p.args.block_sparse.rules.args.any_block_rules) return 0u;
        const int shift = p.args.block_sparse.rules.args.block_shift, rb = rp >> shift;
        uint32_t bits = 0;
        int last = INT_MIN;
        bool keep = false;
#pragma unroll 1
        for (int c = 0; c < NC; c++) {
            const int cb = (c0 + 8 * (c >> 1) + (c & 1)) >> shift;
            if (cb != last) {
                keep = Q_ROWS ? BlockSparsePattern::block_rules(p.args.block_sparse.rules.causal, p.args.block_sparse.rules.args,
                                                                h, rb, cb, p.seq_len)
                              : BlockSparsePattern::block_rules(p.args.block_sparse.rules.causal, p.args.block_sparse.rules.args,
                                                                h, cb, rb, p.seq_len);
                last = cb;
            }
            bits |= (uint32_t)keep << c;
        }
        return bits;
    }
};

template <>
struct PatternSchedules<BlockSparsePattern> : PatternScheduleDefaults {
    using type = ScheduleList<BlockSparseSchedule>;
    // The rules by value (an explicit layout's device copy) for the element mask; each launcher
    // then binds the tile lists of its tile shape from the pattern (bind_tiles).
    static void bind(Params& p, const AttnPattern& pattern) {
        p.args.block_sparse.rules = BlockSparseRules{pattern.causal, device_args(pattern.block_sparse)};
    }
    static void bind_tiles(Params& p, int BM, int BN) { p.args.block_sparse.tiles = block_sparse_tiles_cuda(*p.pattern, p, BM, BN); }
    static BlockSparseArgs device_args(const BlockSparseParams& s) { return block_sparse_args_cuda(s); }
    // Persistent at any length: a window's list is a few key tiles, too little work to pay for a
    // block per tile (see notes/fa3-speed.md, the persistent walk).
    static constexpr bool kAlwaysPersistent = true;
};

}  // namespace flash
