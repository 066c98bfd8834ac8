// Dense attention's GPU schedule (the device side of layers/patterns/dense.h): which key tiles a
// query tile visits (forward, dQ) and which query tiles a key tile visits (dK, dV). A schedule
// gives them as a TileRange (count(), tile(it)); a block-sparse one can return a CSR list through
// the same interface.
#pragma once
#include "layers/cuda/attention/masks.cuh"
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/schedule_list.cuh"
#include "layers/patterns/dense.h"

namespace flash {

struct DenseSchedule {
    // kPerBlockMaps: each block derives its own maps (block_maps), else they are as given.
    // kMayMerge: outputs may merge into what is there (Params::accumulate), else are written.
    // kTwoSided: the two-sided launchers' instance (Params::two_sided), whose sides hold
    //   contiguous positions (pos0 + token): the masks compute them (masks.cuh). The block-sparse
    //   and fixed schedules' one instance serves one-sided launches too (positions from 0).
    // kOwnElementMask: the pattern (block-sparse, fixed) masks elements itself on the pairs its lists cut: a pair is kept
    //   when row_rule(p, qp).keeps(kp) (the rules cheap enough to test in every element of an
    //   unrolled mask, worked out once per query row) or its bit of kept_bits<NC, Q_ROWS>(p, h, rp,
    //   c0) is set (the other rules, asked once per row: bit c for the column at position c0 +
    //   8 (c / 2) + c % 2; Q_ROWS: rows are queries).
    // kIntervalRule: row_rule(p, qp) keeps exactly the keys kp < rule.global and rule.lo <= kp <=
    //   rule.hi wherever block_rules(p) is false (no kept_bits), and col_rule(p, kp) the queries
    //   that keep key kp in the same form: the masks then bound each row's columns once (masks.cuh,
    //   mask_by_intervals).
    static constexpr bool kPerBlockMaps = false, kMayMerge = false, kTwoSided = false, kOwnElementMask = false;
    static constexpr bool kIntervalRule = false;
    // The launches this instance runs (every schedule says so; exactly one serves a launch).
    static bool serves(const Params& p) { return p.pattern->kind == AttnKind::Dense && !p.two_sided && p.seqs.len == 0; }
    // Key tiles of BN rows for a query tile: up to the last key at or before the tile's last
    // query (causal), from the first key at or after its earliest document start.
    __device__ static TileRange key_tiles(const Params& p, const QueryTile& qt, int BN) {
        int end_row = p.krows.len;
        if (p.causal) end_row = causal_key_end(p, qt);
        int begin_row = 0;
        if (p.doc_start && qt.doc_min != INT_MIN) begin_row = key_rows_with_pos_le(p, qt.doc_min - 1);
        return TileRange{begin_row / BN, (end_row + BN - 1) / BN};
    }
    // Query tiles of BM rows for a key tile: from the first query at or after the tile's first
    // key (causal). (Document starts need not be monotone, so they skip nothing here.)
    __device__ static TileRange query_tiles(const Params& p, const KeyTile& kt, int BM) {
        int begin_row = 0;
        if (p.causal) begin_row = causal_query_begin(p, kt);
        return TileRange{begin_row / BM, (p.qrows.len + BM - 1) / BM};
    }
    // Which tile of ntiles a block runs (the tile scheduler gives the rank, 0 = the heaviest):
    // the longest causal query rows start first; key tile = rank.
    __device__ static int query_tile_of_rank(const Params&, int rank, int ntiles) { return ntiles - 1 - rank; }
    __device__ static int key_tile_of_rank(const Params&, int rank) { return rank; }
};

// The two-sided launchers' instance (Params::two_sided): it may merge, into bf16 or fp32 O.
struct DenseTwoSidedSchedule : DenseSchedule {
    static constexpr bool kMayMerge = true, kTwoSided = true;
    static bool serves(const Params& p) { return p.pattern->kind == AttnKind::Dense && p.two_sided && p.seqs.len == 0; }
};

template <>
struct PatternSchedules<DensePattern> : PatternScheduleDefaults {
    using type = ScheduleList<DenseSchedule, DenseTwoSidedSchedule>;
    static void bind(Params&, const AttnPattern&) {}  // nothing beyond the shapes
    // Each query tile re-reads its row's K and V: rows in L2-sized groups (launch_template.cuh).
    static constexpr bool kL2RowGroups = true;
};

}  // namespace flash
