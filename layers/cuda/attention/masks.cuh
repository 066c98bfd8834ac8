// Masks of the flash kernels: which keys a query may see (causal, documents), and what a schedule
// knows of a query tile and a key tile (positions, document bounds) to skip or mask tile pairs.
#pragma once
#include <climits>
#include "layers/cuda/attention/params.cuh"

namespace flash {

// Is key position kp allowed for a query at position qp whose document starts at doc?
__device__ __forceinline__ bool key_allowed(bool causal, bool has_doc, int qp, int doc, int kp) {
    return (!causal || kp <= qp) && (!has_doc || kp >= doc);
}

// Number of rows i in [0, map.len) with pos[token(i)] <= x (pos increasing along the map).
__device__ __forceinline__ int rows_with_pos_le(const int* pos, RowMap map, int x) {
    int lo = 0, hi = map.len;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (__ldg(pos + map.token(mid)) <= x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// Two-sided launches hold contiguous positions on each side, row token t at pos0 + t (the
// launchers' contract, launch_two_sided.cuh, which their dilated segments and block-sparse lists
// rely on too): their positions are computed, with no loads, and so are the rows at or before a
// position (a division where the position array needs a binary search of dependent loads, paid
// before each query tile's first product). One-sided rows read the array: positions may repeat.
__device__ __forceinline__ int query_pos(const Params& p, int row) {
    return p.two_sided ? p.q_pos0 + p.qrows.token(row) : __ldg(p.qpos + p.qrows.token(row));
}
__device__ __forceinline__ int key_pos(const Params& p, int row) {
    return p.two_sided ? p.k_pos0 + p.krows.token(row) : __ldg(p.kpos + p.krows.token(row));
}
// Rows i in [0, map.len) at positions pos0 + token(i) <= x. (32-bit: a 64-bit division is a call,
// whose saved registers spilled in the one-sided kernels that carry this path unused.)
__device__ __forceinline__ int contiguous_rows_le(int pos0, RowMap map, int x) {
    const int first = pos0 + map.base;  // the position of row 0
    if (x < first) return 0;
    const int d = x - first;
    return min(map.len, (map.step == 1 ? d : d / map.step) + 1);
}
__device__ __forceinline__ int key_rows_with_pos_le(const Params& p, int x) {
    return p.two_sided ? contiguous_rows_le(p.k_pos0, p.krows, x) : rows_with_pos_le(p.kpos, p.krows, x);
}
__device__ __forceinline__ int query_rows_with_pos_le(const Params& p, int x) {
    return p.two_sided ? contiguous_rows_le(p.q_pos0, p.qrows, x) : rows_with_pos_le(p.qpos, p.qrows, x);
}

// Do both sides read the same rows at the same positions (a one-sided launch)? Then a tile's
// causal bounds on the other side sit next to its own rows (causal_key_end, causal_query_begin).
__device__ __forceinline__ bool same_rows(const Params& p) {
    return p.kpos == p.qpos && p.krows.base == p.qrows.base && p.krows.step == p.qrows.step;
}

// What a schedule needs to know of a query tile (rows r0 .. r0+n-1 of the query map).
struct QueryTile {
    int r0, n;
    int first_pos, last_pos;  // positions of the first and last row
    int doc_min, doc_max;     // over the rows' doc_start (INT_MIN, INT_MIN when there is no mask)
};
// Of a key tile.
struct KeyTile {
    int r0, n;
    int first_pos, last_pos;
};

struct TileRange {
    int begin, end;
    __device__ int count() const { return end > begin ? end - begin : 0; }
    __device__ int tile(int it) const { return begin + it; }
    __device__ constexpr bool cut(int) const { return false; }  // a range's pattern keeps whole tiles
};

// Reads a query tile's positions and document bounds. Every thread of the block must call it
// (block-wide reduction through shared memory).
template <int NT>
__device__ QueryTile query_tile_info(const Params& p, int b, int r0, int n) {
    __shared__ int s_doc[2];
    QueryTile t;
    t.r0 = r0;
    t.n = n;
    t.first_pos = query_pos(p, r0);
    t.last_pos = query_pos(p, r0 + n - 1);
    t.doc_min = t.doc_max = INT_MIN;
    if (p.doc_start) {
        if (threadIdx.x == 0) {
            s_doc[0] = INT_MAX;
            s_doc[1] = INT_MIN;
        }
        __syncthreads();
        int lo = INT_MAX, hi = INT_MIN;
        for (int i = threadIdx.x; i < n; i += NT) {
            const int d = __ldg(p.doc_start + (size_t)b * p.q_tokens + p.qrows.token(r0 + i));
            lo = min(lo, d);
            hi = max(hi, d);
        }
        atomicMin(&s_doc[0], lo);
        atomicMax(&s_doc[1], hi);
        __syncthreads();
        t.doc_min = s_doc[0];
        t.doc_max = s_doc[1];
    }
    return t;
}

// The same from one warp alone (warp shuffles, no block barrier): for kernels whose warps do
// different work and must not wait for one another (forward_ws.cuh). All 32 lanes call it.
__device__ __forceinline__ QueryTile query_tile_info_warp(const Params& p, int b, int r0, int n) {
    QueryTile t;
    t.r0 = r0;
    t.n = n;
    t.first_pos = query_pos(p, r0);
    t.last_pos = query_pos(p, r0 + n - 1);
    t.doc_min = t.doc_max = INT_MIN;
    if (p.doc_start) {
        int lo = INT_MAX, hi = INT_MIN;
        for (int i = threadIdx.x & 31; i < n; i += 32) {
            const int d = __ldg(p.doc_start + (size_t)b * p.q_tokens + p.qrows.token(r0 + i));
            lo = min(lo, d);
            hi = max(hi, d);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, o));
            hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, o));
        }
        t.doc_min = lo;
        t.doc_max = hi;
    }
    return t;
}

__device__ __forceinline__ KeyTile key_tile_info(const Params& p, int r0, int n) {
    KeyTile t;
    t.r0 = r0;
    t.n = n;
    t.first_pos = key_pos(p, r0);
    t.last_pos = key_pos(p, r0 + n - 1);
    return t;
}

// Key rows at or before the query tile's last position: key_rows_with_pos_le, found in one load
// when both sides read the same rows. Positions never decrease along a map, so key rows [0, e) (the
// query rows up to the tile's last) are all at or before it, and if row e is after it, so is
// every later row; only when row e shares the position does the search run. The search is 11
// dependent loads at 2048 rows, paid before a query tile's first product.
__device__ __forceinline__ int causal_key_end(const Params& p, const QueryTile& qt) {
    if (same_rows(p)) {
        const int e = qt.r0 + qt.n;
        if (e >= p.krows.len) return p.krows.len;
        if (__ldg(p.kpos + p.krows.token(e)) > qt.last_pos) return e;
    }
    return key_rows_with_pos_le(p, qt.last_pos);
}
// Query rows before the key tile's first position (the rows a causal key tile skips), likewise:
// query rows [0, r0) when the row before the tile is at an earlier position.
__device__ __forceinline__ int causal_query_begin(const Params& p, const KeyTile& kt) {
    if (same_rows(p) && kt.r0 <= p.qrows.len) {
        if (kt.r0 == 0) return 0;
        if (__ldg(p.qpos + p.qrows.token(kt.r0 - 1)) < kt.first_pos) return kt.r0;
    }
    return query_rows_with_pos_le(p, kt.first_pos - 1);
}

// The causal diagonal in row space, for one-sided launches without documents (rows_mask_ok):
// positions never decrease along a map, so the key rows up to a query row are at or before its
// position, and if the next row is at a later one, so is every row after it. A query row then
// sees key rows [0, row + 1) and a key row is seen by query rows [row, len): two loads per row
// where comparing positions loads one per element (a 128-key tile: 32 per thread). -1 when the
// neighbour shares the row's position (repeated positions): the caller compares positions.
// Two-sided launches without documents take the same path, each row's bound computed from the
// contiguous positions (contiguous_rows_le).
__device__ __forceinline__ bool rows_mask_ok(const Params& p) {
    return !p.doc_start && (!p.causal || same_rows(p));
}
__device__ __forceinline__ int causal_key_end_of_row(const Params& p, int row) {
    if (row + 1 >= p.krows.len) return p.krows.len;
    const int qp = __ldg(p.qpos + p.qrows.token(row));
    return __ldg(p.kpos + p.krows.token(row + 1)) > qp ? row + 1 : -1;
}
__device__ __forceinline__ int causal_query_begin_of_row(const Params& p, int row, int kp) {
    if (row == 0) return 0;
    return __ldg(p.qpos + p.qrows.token(row - 1)) < kp ? row : -1;
}

// Must the (query tile, key tile) pair be masked element by element? Only pairs on the causal
// diagonal, at the end of the key sequence or straddling a document start are; the rest run
// the plain path.
__device__ __forceinline__ bool pair_needs_mask(const Params& p, const QueryTile& qt, const KeyTile& kt, int BN) {
    return kt.n < BN || (p.causal && kt.last_pos > qt.first_pos) || (p.doc_start && kt.first_pos < qt.doc_max);
}

}  // namespace flash
