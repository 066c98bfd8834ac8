// The fixed pattern's GPU schedule (the device side of layers/patterns/fixed.h): a query tile
// visits the summary tiles of every earlier block, then the key tiles of its own block(s); a key
// tile is visited by the query tiles of its own block and, when it holds summary keys, by every
// later query tile. Both are computed, not listed: with blocks of l = stride tokens a multiple
// of the key tile and a key side starting on a block, block j's summary (its last c keys) lies
// in the same m tiles of every block, so the k-th summary tile is a division away. Any other
// shape walks every key tile up to the diagonal with the element mask (correct, dense-cost).
// Sides are contiguous global positions (pos0 + row), as the two-sided launchers require.
#pragma once
#include <cstdint>
#include "layers/cuda/attention/masks.cuh"
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/schedule_list.cuh"
#include "layers/patterns/fixed.h"

namespace flash {

// Key tiles of a query tile: n_summary summary tiles (m per earlier block, `block_tiles` tiles
// apart, the first at `first` in its block), then own_begin, own_begin + 1, ...
struct FixedKeyTiles {
    int n, n_summary, m, block_tiles, first, own_begin;
    bool first_cut, own_cut, all_cut;
    __device__ int count() const { return n; }
    __device__ int tile(int it) const {
        return it < n_summary ? (it / m) * block_tiles + first + it % m : own_begin + it - n_summary;
    }
    // A summary tile's first tile may begin before the summary; own tiles are whole only when
    // the query tile lies in one block.
    __device__ bool cut(int it) const { return all_cut || (it < n_summary ? first_cut && it % m == 0 : own_cut); }
};

// Query tiles of a key tile: a range, cut unless every key of the tile is a summary key.
struct FixedQueryTiles {
    int begin, end;
    bool cut_all;
    __device__ int count() const { return end > begin ? end - begin : 0; }
    __device__ int tile(int it) const { return begin + it; }
    __device__ bool cut(int) const { return cut_all; }
};

struct FixedSchedule {
    // One instance for one-sided and two-sided launches (it may merge, into bf16 or fp32 O); the
    // pattern masks elements itself (row_rule, kept_bits) on the pairs its tiles cut.
    static constexpr bool kPerBlockMaps = false, kMayMerge = true, kTwoSided = true, kOwnElementMask = true;
    static constexpr bool kIntervalRule = false;
    static bool serves(const Params& p) { return p.pattern->kind == AttnKind::Fixed; }

    __device__ static FixedKeyTiles key_tiles(const Params& p, const QueryTile& qt, int BN) {
        const int l = p.args.fixed.stride, c = p.args.fixed.summary;
        const int end_row = min(p.krows.len, qt.last_pos - p.k_pos0 + 1);  // causal: keys up to the last query
        FixedKeyTiles t{};
        if (end_row <= 0) return t;
        const int own_lo = qt.first_pos / l * l, k_end = p.k_pos0 + p.krows.len;
        if (l % BN != 0 || p.k_pos0 % l != 0 || (k_end < own_lo && k_end % l != 0)) {  // every tile, masked
            t.n = (end_row + BN - 1) / BN, t.n_summary = 0, t.own_begin = 0, t.all_cut = true;
            return t;
        }
        const int own_begin_row = max(0, own_lo - p.k_pos0);
        t.m = (l - 1) / BN - (l - c) / BN + 1;
        t.block_tiles = l / BN;
        t.first = (l - c) / BN;
        t.first_cut = (l - c) % BN != 0;
        t.n_summary = max(0, min(own_lo, k_end) / l - p.k_pos0 / l) * t.m;
        t.own_begin = own_begin_row / BN;
        t.own_cut = qt.first_pos / l != qt.last_pos / l;
        t.n = t.n_summary + max(0, (end_row + BN - 1) / BN - t.own_begin);
        return t;
    }
    __device__ static FixedQueryTiles query_tiles(const Params& p, const KeyTile& kt, int BM) {
        const int l = p.args.fixed.stride, c = p.args.fixed.summary;
        const bool all_summary = kt.first_pos / l == kt.last_pos / l && kt.first_pos % l >= l - c;
        const bool any_summary = kt.first_pos % l >= l - c || kt.first_pos / l * l + l - c <= kt.last_pos;
        const int begin_row = max(0, kt.first_pos - p.q_pos0);  // causal
        const long long block_end = (long long)kt.last_pos / l * l + l;
        const int end_row = any_summary ? p.qrows.len : (int)min((long long)p.qrows.len, block_end - p.q_pos0);
        if (end_row <= begin_row) return FixedQueryTiles{0, 0, true};
        return FixedQueryTiles{begin_row / BM, (end_row + BM - 1) / BM, !all_summary};
    }
    // The latest query tiles have the most keys, the earliest key tiles the most queries.
    __device__ static int query_tile_of_rank(const Params&, int rank, int ntiles) { return ntiles - 1 - rank; }
    __device__ static int key_tile_of_rank(const Params&, int rank) { return rank; }
    // The element mask (dense.cuh): the whole rule per row (its block found once), no bits.
    struct RowRule {
        int qb, l, c;
        __device__ bool keeps(int kp) const { return kp / l == qb || kp % l >= l - c; }  // FixedPattern::keeps
    };
    __device__ static RowRule row_rule(const Params& p, int qp) { return RowRule{qp / p.args.fixed.stride, p.args.fixed.stride, p.args.fixed.summary}; }
    template <int NC, bool Q_ROWS>
    __device__ static uint32_t kept_bits(const Params&, int, int, int) { return 0u; }
};

template <>
struct PatternSchedules<FixedPattern> : PatternScheduleDefaults {
    using type = ScheduleList<FixedSchedule>;
    static void bind(Params& p, const AttnPattern& pattern) { p.args.fixed = FixedLaunchArgs{pattern.fixed.stride, pattern.fixed.summary}; }
};

}  // namespace flash
