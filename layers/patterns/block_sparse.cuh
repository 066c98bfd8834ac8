// Block-sparse attention's GPU schedule (the device side of layers/patterns/block_sparse.h): a
// query tile walks the key tiles of its list, a key tile the query tiles of its list (the
// transposed layout), both built once per layout and tile shape on the host
// (layers/patterns/block_sparse_tiles.h) and cached on the device (layers/cuda/
// block_sparse_lists.cuh, which fills Params::tiles). A list entry is tile * 2 + cut: cut = 1
// when the pattern keeps only some of the pair's (query, key) pairs, and only then does the
// kernel ask the pattern element by element (BlockSparsePattern::multiplicity, per head).
#pragma once
#include "layers/cuda/attention/masks.cuh"
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/schedule_list.cuh"
#include "layers/cuda/pattern_args.cuh"
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
    static constexpr bool kPerBlockMaps = false, kMayMerge = true, kTwoSided = true, kBlockSparse = true;
    static bool serves(const Params& p) { return p.kind == AttnKind::BlockSparse && p.sparse != nullptr; }
    __device__ static TileList key_tiles(const Params& p, const QueryTile& qt, int) {
        const int t = qt.r0 / p.tiles.BM, a = __ldg(p.tiles.q_ptr + t);
        return TileList{p.tiles.k_of_q + a, __ldg(p.tiles.q_ptr + t + 1) - a};
    }
    __device__ static TileList query_tiles(const Params& p, const KeyTile& kt, int) {
        const int t = kt.r0 / p.tiles.BN, a = __ldg(p.tiles.k_ptr + t);
        return TileList{p.tiles.q_of_k + a, __ldg(p.tiles.k_ptr + t + 1) - a};
    }
    // The longest lists first (the global rows and columns), so they run under the rest.
    __device__ static int query_tile_of_rank(const Params& p, int rank) { return __ldg(p.tiles.q_order + rank); }
    __device__ static int key_tile_of_rank(const Params& p, int rank) { return __ldg(p.tiles.k_order + rank); }
    // Does head h keep key position kp for query position qp (global positions)? The pattern's
    // multiplicity, with the block rules skipped when there are none (a window and global tokens
    // cost a few compares per element) and blocks found by a shift, not a division.
    __device__ static bool keeps(const Params& p, int h, int qp, int kp) {
        const BlockSparseRules& r = p.bs;
        const BlockSparseArgs& a = r.args;
        return BlockSparsePattern::token_rules(r.causal, a, qp, kp) ||
               (a.any_block_rules &&
                BlockSparsePattern::block_rules(r.causal, a, h, qp >> a.block_shift, kp >> a.block_shift, p.seq_len));
    }
};

template <>
struct PatternSchedules<BlockSparsePattern> {
    using type = ScheduleList<BlockSparseSchedule>;
    // The rules by value (an explicit layout's device copy) for the element mask, and the pattern,
    // from which each launcher binds the tile lists of its tile shape (bind_tiles).
    static void bind(Params& p, const AttnPattern& pattern) {
        p.sparse = &pattern;
        p.bs = BlockSparseRules{pattern.causal, pattern_args_cuda(pattern).block_sparse};
    }
};

}  // namespace flash
