// The tile scheduler of the flash kernels: which (b, h, tile) each thread block runs (a block per
// tile: resolve_block), or each tile of a persistent block's walk (persistent_query_tile).
#pragma once
#include "layers/cuda/attention/params.cuh"

namespace flash {

// A schedule that serves only one-sided launches says so in its kernels' copy of p, so that the
// paths of two-sided launches (computed positions, masks.cuh) fold away in its instances, which
// keep their registers (a runtime flag alone made the one-sided dense backward spill).
template <class Schedule>
__device__ __forceinline__ void one_sided_by_schedule(Params& p) {
    if constexpr (!Schedule::kTwoSided) p.two_sided = false;
}

// The tile scheduler: which (b, h, tile rank) a block runs (rank 0 = the heaviest tile: the
// kernels turn it into their query or key tile), in an order chosen for the L2, apart from what
// any pattern computes. Grids are x = sequence, y = rank: a sequence is a (b, h) row, or for
// schedules whose blocks each run their own virtual sequence (Schedule::kPerBlockMaps: a dilated
// branch) a (b, h, segment), whose maps Schedule::block_maps sets in p. Dense rows leave p
// untouched, so their maps remain kernel-parameter constants (no registers held for them).
// With p.group > 0 the grid is renumbered in launch order (x fastest): all ranks of `group`
// sequences, heaviest first across the group, then the next group; the last group is 2-3x
// larger (a tail of light blocks, as in plain grid order). Why: in plain grid order the blocks
// resident together are one rank of ~132-264 different sequences, each reading its own K/V, so
// the L2 holds none of them and every tile re-reads K/V from HBM. Dilated branches: a group of
// 16 keeps the live K/V at ~16 MiB (notes/attention-dilated.md, the launch-order groups). Dense rows: as many
// sequences as fit the L2 budget (dense_l2_group, launch_template.cuh); in plain order the
// forward re-reads most of K/V from HBM (see notes/fa3-speed.md, the L2 launch-order groups).
// GROUPED: the kernel may be given groups (the ws kernels, and every kernel on a dilated branch);
// the others keep the plain order without the remap's registers.
template <class Schedule, bool GROUPED = Schedule::kPerBlockMaps>
__device__ __forceinline__ void resolve_block(Params& p, int& b, int& h, int& rank) {
    one_sided_by_schedule<Schedule>(p);
    int seq = blockIdx.x;
    rank = blockIdx.y;
    if (GROUPED && p.group > 0) {
        // The last group takes the rest, 2 to 3 groups' worth (when there are that many): its
        // ~2 waves run heaviest first over all of it, so the launch's tail is light blocks.
        const long long id = blockIdx.x + (long long)blockIdx.y * gridDim.x;
        const long long per = (long long)p.group * gridDim.y;  // blocks of a full group
        const int ng = max(1, (int)gridDim.x / p.group - 1);
        const int g = (int)min((long long)ng - 1, id / per);
        const int first = g * p.group, gn = g == ng - 1 ? (int)gridDim.x - first : p.group;
        const int r = (int)(id - g * per);
        rank = r / gn;
        seq = first + r % gn;
    }
    if constexpr (!Schedule::kPerBlockMaps) {
        b = seq / p.H;
        h = seq % p.H;
    } else {
        Schedule::block_maps(p, seq, b, h);
    }
}

// The persistent walk's scheduler (forward_ws.cuh: a grid of at most one block per SM, block i
// running tiles i, i + gridDim.x, ...): query tile t of the launch as (b, h, first row, rows) in
// tiles of BM rows; for schedules of virtual sequences (a dilated branch) it also sets p's maps.
// There are nseq sequences ((b, h) rows, or a branch's (b, h, segment)s) of up to ny tiles each.
// The order is rank-major, rank r of every sequence before rank r + 1, heaviest first (the
// schedule's order of rank: the last tile, with the most keys when causal; block-sparse, the
// longest list), so the walk's tail is light tiles. With p.group > 0 (dilated branches, dense
// rows), all ranks of `group` sequences come before the next group's, so that the K and V the
// resident blocks read are a few sequences' and stay in the L2 (resolve_block says why).
struct PersistentTile {
    int b, h, q0, qn;
};
template <class Schedule, int BM>
__device__ __forceinline__ PersistentTile persistent_query_tile(Params& p, int t, int ny, int nseq) {
    one_sided_by_schedule<Schedule>(p);
    int rank = t / nseq, seq = t % nseq;
    if (p.group > 0) {
        const int per = p.group * ny, first = t / per * p.group, gn = min(p.group, nseq - first), r = t % per;
        rank = r / gn;
        seq = first + r % gn;
    }
    int b = seq / p.H, h = seq % p.H;
    if constexpr (Schedule::kPerBlockMaps) Schedule::block_maps(p, seq, b, h);
    const int q0 = Schedule::query_tile_of_rank(p, rank, ny) * BM;
    return PersistentTile{b, h, q0, min(BM, p.qrows.len - q0)};
}

}  // namespace flash
