// Dilated attention's GPU schedule (the device side of layers/patterns/dilated.h). A branch
// (w', r) is ordinary attention over many short virtual sequences: segment s, head h keeps the
// global positions s*w' + c, s*w' + c + r, ... (c = h mod r). Each block runs one of them
// (Params::seqs, a SequenceGrid of the branch's segments, set per branch by dilated_launch.cuh;
// the tile scheduler, layers/cuda/attention/tile_scheduler.cuh, picks which), walking its rows
// with the dense tile ranges.
#pragma once
#include "layers/cuda/attention/masks.cuh"
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/schedule_list.cuh"
#include "layers/patterns/dense.cuh"
#include "layers/patterns/dilated.h"

namespace flash {

// Rows of one side (buffer row i at global position pos0 + i, n rows) at the global positions
// first, first + r, ... below end: a dilated virtual sequence cut to what this side holds.
__device__ __forceinline__ RowMap dilated_rows(int first, int end, int r, int pos0, int n) {
    const int lo = pos0 > first ? first + (pos0 - first + r - 1) / r * r : first;
    const int hi = min(end, pos0 + n);
    return RowMap{lo - pos0, r, lo < hi ? (hi - 1 - lo) / r + 1 : 0};
}

struct DilatedSchedule : DenseSchedule {
    static constexpr bool kPerBlockMaps = true, kMayMerge = true;
    static bool serves(const Params& p) { return p.pattern->kind == AttnKind::Dilated && !p.two_sided && p.seqs.len != 0; }

    // Virtual sequence `seq` of the launch: (b, h) and segment first + seq % count, of w' = len
    // positions with dilation r = step, cut from the global positions and the global length; one
    // map serves both sides unless kTwoSided.
    template <bool TWO_SIDED = false>
    __device__ __forceinline__ static void maps(Params& p, int seq, int& b, int& h) {
        const int bh = seq / p.seqs.count;
        b = bh / p.H;
        h = bh % p.H;
        const int start = (p.seqs.first + seq % p.seqs.count) * p.seqs.len;  // the segment's first global position
        const int end = min(start + p.seqs.len, p.seq_len), first = start + h % p.seqs.step;
        p.qrows = dilated_rows(first, end, p.seqs.step, p.q_pos0, p.q_tokens);
        if constexpr (TWO_SIDED) p.krows = dilated_rows(first, end, p.seqs.step, p.k_pos0, p.kv_tokens);
        else p.krows = p.qrows;
    }
    __device__ __forceinline__ static void block_maps(Params& p, int seq, int& b, int& h) { maps<false>(p, seq, b, h); }
};

// The two-sided launchers' instance (Params::two_sided): a query map and a key map per block.
struct DilatedTwoSidedSchedule : DilatedSchedule {
    static constexpr bool kTwoSided = true;
    static bool serves(const Params& p) { return p.pattern->kind == AttnKind::Dilated && p.two_sided && p.seqs.len != 0; }
    __device__ __forceinline__ static void block_maps(Params& p, int seq, int& b, int& h) { maps<true>(p, seq, b, h); }
};

template <>
struct PatternSchedules<DilatedPattern> : PatternScheduleDefaults {
    using type = ScheduleList<DilatedSchedule, DilatedTwoSidedSchedule>;
    static void bind(Params&, const AttnPattern&) {}  // each branch's launch sets its segments (dilated_launch.cuh)
};

}  // namespace flash
