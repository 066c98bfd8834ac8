// Masks of the flash kernels: which keys a query may see (causal, documents), what a schedule
// knows of a query tile and a key tile (positions, document bounds) to skip or mask tile pairs,
// and the element masks every kernel applies to the fragments of a pair that needs one
// (mask_tile, with queries or keys as rows). The pattern modules' schedules (layers/patterns/*.cuh) use the
// rules above them; the element masks take a schedule as a template parameter.
#pragma once
#include <climits>
#include <type_traits>
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/ptx.cuh"

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

// The largest document start among query rows [q0, q0 + n) of sequence b (INT_MIN without
// documents), from one warp: all 32 lanes call it. The backward steps read it per query tile
// (docs_cut); a tile inside one document then skips the element masks.
__device__ __forceinline__ int query_rows_doc_max_warp(const Params& p, int b, int q0, int n) {
    if (!p.doc_start) return INT_MIN;
    int hi = INT_MIN;
    for (int i = threadIdx.x & 31; i < n; i += 32)
        hi = max(hi, __ldg(p.doc_start + (size_t)b * p.q_tokens + p.qrows.token(q0 + i)));
    return __reduce_max_sync(0xffffffffu, hi);
}

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

// The causal diagonal in row space, for one-sided launches whose pair no document cuts
// (rows_mask_ok; docs: docs_cut's answer for the pair):
// positions never decrease along a map, so the key rows up to a query row are at or before its
// position, and if the next row is at a later one, so is every row after it. A query row then
// sees key rows [0, row + 1) and a key row is seen by query rows [row, len): two loads per row
// where comparing positions loads one per element (a 128-key tile: 32 per thread). -1 when the
// neighbour shares the row's position (repeated positions): the caller compares positions.
// Two-sided launches without documents take the same path, each row's bound computed from the
// contiguous positions (contiguous_rows_le).
__device__ __forceinline__ bool rows_mask_ok(const Params& p, bool docs) {
    return !docs && (!p.causal || same_rows(p));
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

// Does the document mask cut the (query tile, key tile) pair: does a query's document start
// after the tile's first key? doc_max: the largest document start among the query tile's rows
// (query_tile_info, query_rows_doc_max_warp). Keys sit at or after their tile's first position,
// so an uncut pair's document rule keeps every element and its mask is the causal one alone (by
// rows, two loads a row, where documents compare every element).
__device__ __forceinline__ bool docs_cut(const Params& p, int doc_max, const KeyTile& kt) {
    return p.doc_start && kt.first_pos < doc_max;
}

// Must the (query tile, key tile) pair be masked element by element? Only pairs on the causal
// diagonal, at the end of the key sequence or straddling a document start are; the rest run
// the plain path.
__device__ __forceinline__ bool pair_needs_mask(const Params& p, const QueryTile& qt, const KeyTile& kt, int BN) {
    return kt.n < BN || (p.causal && kt.last_pos > qt.first_pos) || docs_cut(p, qt.doc_max, kt);
}

// ---- The element masks every kernel applies to a tile pair that needs them: to its score
// fragments (forward, and the deterministic backward's dQ kernel) and to its probability
// fragments with keys as rows (the backward's dK, dV step).

// The pattern's per-row element rule (Schedule::row_rule, dense.cuh) where the schedule masks
// elements itself; a rule that keeps every key for the others.
template <class Schedule, bool = Schedule::kOwnElementMask>
struct RowRuleOf {
    struct type {
        __device__ bool keeps(int) const { return true; }
    };
    __device__ static type make(const Params&, int) { return {}; }
};

template <class Schedule>
struct RowRuleOf<Schedule, true> {
    using type = typename Schedule::RowRule;
    __device__ static type make(const Params& p, int qp) { return Schedule::row_rule(p, qp); }
};

// ---- The element mask of one fragment tile, in either orientation. KEY_ROWS false: scores with
// queries as rows (from row0) and keys as columns (col0, ncols of them), masked elements set to
// -inf (the forward, the deterministic backward's dQ kernel). KEY_ROWS true: probabilities P^T
// with keys as rows and queries as columns, masked elements set to 0 (the backward's dK, dV
// step). An element is masked where the pair is not allowed (causal, documents), where its row
// or column lies past the rows, and (cut) where head h's pattern drops it. docs: does the
// document mask cut the pair (docs_cut)? Only then are document starts compared. Positions are
// re-read here rather than kept in registers: few tiles need a mask.
// The fragment's key rows (KEY_ROWS): their positions, and whether each is a row (rows past the
// keys read row 0's position and keep nothing). Two-sided and block-sparse sides hold contiguous
// positions (pos0 + token): no loads (a block-sparse list's many cut tiles, a two-sided launch's
// diagonals).
template <int MT, class Schedule>
__device__ __forceinline__ void key_rows_of_fragment(int (&kp)[MT][2], bool (&kok)[MT][2], const Params& p, int key_row0) {
    const int g = (threadIdx.x & 31) >> 2;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = key_row0 + mt * 16 + g + 8 * r;
            kok[mt][r] = row < p.krows.len;
            const int tok = p.krows.token(kok[mt][r] ? row : 0);
            kp[mt][r] = Schedule::kTwoSided ? p.k_pos0 + tok : __ldg(p.kpos + tok);
        }
}

// Dense and dilated rows, where no document cuts the pair: a column range per row, from the
// causal bound of the row (causal_key_end_of_row, causal_query_begin_of_row one-sided;
// contiguous_rows_le two-sided). Returns false, masking nothing, where a row's neighbour shares
// its position (the elements' positions must then be compared).
template <bool KEY_ROWS, int MT, int NB, class Schedule>
__device__ __forceinline__ bool mask_by_rows(float (&s)[MT][NB][4], const Params& p, int row0, int col0, int ncols,
                                             const int (&kp)[MT][2], const bool (&kok)[MT][2]) {
    constexpr float masked = KEY_ROWS ? 0.f : -INFINITY;
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    int bound[MT][2];  // query rows keep columns 2t + c with c < bound; key rows with bound <= c < hi
    const int hi = ncols - 2 * t;
    bool by_rows = true;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            if constexpr (KEY_ROWS) {
                int begin = kok[mt][r] ? 0 : INT_MAX / 2;
                if (p.causal && kok[mt][r]) {
                    const int qb = Schedule::kTwoSided ? contiguous_rows_le(p.q_pos0, p.qrows, kp[mt][r] - 1)
                                                       : causal_query_begin_of_row(p, row0 + mt * 16 + g + 8 * r, kp[mt][r]);
                    by_rows = by_rows && qb >= 0;
                    begin = max(0, qb - col0);
                }
                bound[mt][r] = begin - 2 * t;
            } else {
                int end = ncols;
                if (p.causal) {
                    const int row = min(row0 + mt * 16 + g + 8 * r, p.qrows.len - 1);
                    const int e = Schedule::kTwoSided ? contiguous_rows_le(p.k_pos0, p.krows, p.q_pos0 + p.qrows.token(row))
                                                      : causal_key_end_of_row(p, row);
                    by_rows = by_rows && e >= 0;
                    end = min(end, e - col0);
                }
                bound[mt][r] = end - 2 * t;
            }
        }
    if (!by_rows) return false;
#pragma unroll
    for (int j = 0; j < NB; j++)
#pragma unroll
        for (int e = 0; e < 2; e++)
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int c = 8 * j + e;
                    if (KEY_ROWS ? c < bound[mt][r] || c >= hi : c >= bound[mt][r]) s[mt][j][2 * r + e] = masked;
                }
    return true;
}

// Element by element: each pair's positions (and documents) compared, and, on cut pairs, the
// pattern's per-row rule (Schedule::row_rule, of the query) and the rules of head h not tested
// per element (Schedule::kept_bits) as a bit per column: column c at the first column's
// position + 8 (c / 2) + c % 2 (key sides and block-sparse query sides are unit-step there).
template <bool KEY_ROWS, int MT, int NB, class Schedule>
__device__ __forceinline__ void mask_by_elements(float (&s)[MT][NB][4], const Params& p, int b, int row0, int col0, int ncols,
                                                 int h, bool cut, bool docs, const int (&kp)[MT][2], const bool (&kok)[MT][2]) {
    constexpr float masked = KEY_ROWS ? 0.f : -INFINITY;
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    int qp[MT][2], qd[MT][2];  // query rows: positions and document starts (rows past the end: any)
    if constexpr (!KEY_ROWS) {
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int tok = p.qrows.token(min(row0 + mt * 16 + g + 8 * r, p.qrows.len - 1));
                qp[mt][r] = Schedule::kTwoSided ? p.q_pos0 + tok : __ldg(p.qpos + tok);
                qd[mt][r] = docs ? __ldg(p.doc_start + (size_t)b * p.q_tokens + tok) : INT_MIN;
            }
    }
    uint32_t block_bits[MT][2] = {};
    typename RowRuleOf<Schedule>::type rule[MT][2];  // query rows' rules (key rows: the column's)
    if constexpr (Schedule::kOwnElementMask) {
        if (cut) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    if constexpr (KEY_ROWS) {
                        block_bits[mt][r] = Schedule::template kept_bits<2 * NB, false>(p, h, kp[mt][r], p.q_pos0 + p.qrows.token(col0) + 2 * t);
                    } else {
                        rule[mt][r] = RowRuleOf<Schedule>::make(p, qp[mt][r]);
                        block_bits[mt][r] = Schedule::template kept_bits<2 * NB, true>(p, h, qp[mt][r], p.k_pos0 + col0 + 2 * t);
                    }
                }
        }
    }
#pragma unroll
    for (int j = 0; j < NB; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int col = 8 * j + 2 * t + e;
            const bool cok = col < ncols;
            int cpos, cdoc;  // the column's position; a query column's document start
            if constexpr (KEY_ROWS) {
                const int tok = p.qrows.token(cok ? col0 + col : col0);
                cpos = Schedule::kTwoSided ? p.q_pos0 + tok : __ldg(p.qpos + tok);
                cdoc = docs ? __ldg(p.doc_start + (size_t)b * p.q_tokens + tok) : INT_MIN;
            } else {
                cpos = Schedule::kTwoSided ? p.k_pos0 + p.krows.token(col0 + col) : cok ? __ldg(p.kpos + p.krows.token(col0 + col)) : 0;
            }
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    bool drop;
                    if constexpr (KEY_ROWS) {
                        drop = !(cok && kok[mt][r] && key_allowed(p.causal, docs, cpos, cdoc, kp[mt][r]));
                        if constexpr (Schedule::kOwnElementMask)  // the query's rule: cut pairs only
                            drop = drop || (cut && !(RowRuleOf<Schedule>::make(p, cpos).keeps(kp[mt][r]) ||
                                                     ((block_bits[mt][r] >> (2 * j + e)) & 1u)));
                    } else {
                        drop = !cok || !key_allowed(p.causal, docs, qp[mt][r], qd[mt][r], cpos);
                        if constexpr (Schedule::kOwnElementMask)
                            drop = drop || (cut && !(rule[mt][r].keeps(cpos) || ((block_bits[mt][r] >> (2 * j + e)) & 1u)));
                    }
                    if (drop) s[mt][j][2 * r + e] = masked;
                }
        }
}

// Rows whose pattern keeps at most two intervals of positions on the other side
// (Schedule::kIntervalRule, with no block rules), over a column side of unit step: each row's kept
// columns, its rule's intervals cut by the causal bound, the row's document start and the tile's
// columns, become two column ranges once per row, so that an element costs two or four compares
// with constants where mask_by_elements works out each element's position and rule. Rows are
// queries (row_rule of the query: the forward's S) or keys (col_rule of the key: the backward's
// P^T, without documents, whose starts belong to the columns there). It keeps exactly the
// elements mask_by_elements keeps.
template <bool KEY_ROWS, int MT, int NB, class Schedule>
__device__ __forceinline__ void mask_by_intervals(float (&s)[MT][NB][4], const Params& p, int b, int row0, int col0, int ncols,
                                                  bool cut, bool docs, const int (&kp)[MT][2], const bool (&kok)[MT][2]) {
    constexpr float masked = KEY_ROWS ? 0.f : -INFINITY;
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    const RowMap& cols = KEY_ROWS ? p.qrows : p.krows;
    const int first = (KEY_ROWS ? p.q_pos0 : p.k_pos0) + cols.token(col0), last = first + ncols - 1;  // the columns' positions
    // Column c of the thread's fragment (c = 8 j + e, at tile column 2 t + c) is kept in row (mt, r)
    // when lo <= c <= hi for one of the row's two ranges, both empty or inside the tile.
    int lo[MT][2][2], hi[MT][2][2];
    bool second = false;  // does any of the thread's rows keep a second range?
    auto range = [&](int x, int y, int& l, int& u) {  // positions [x, y] within the tile, as columns less 2t
        x = max(x, first);
        y = min(y, last);
        l = x > y ? 1 : x - first - 2 * t;
        u = x > y ? 0 : y - first - 2 * t;
    };
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            int rp, x, y;  // the row's position; the other side's allowed positions [x, y]
            if constexpr (KEY_ROWS) {
                rp = kp[mt][r];
                x = kok[mt][r] ? (p.causal ? rp : INT_MIN) : INT_MAX;  // a row past the keys keeps nothing
                y = kok[mt][r] ? INT_MAX : INT_MIN;
            } else {
                const int tok = p.qrows.token(min(row0 + mt * 16 + g + 8 * r, p.qrows.len - 1));
                rp = p.q_pos0 + tok;
                x = docs ? __ldg(p.doc_start + (size_t)b * p.q_tokens + tok) : INT_MIN;
                y = p.causal ? rp : INT_MAX;
            }
            if (!cut) {
                range(x, y, lo[mt][r][0], hi[mt][r][0]);
                range(1, 0, lo[mt][r][1], hi[mt][r][1]);
                continue;
            }
            const typename Schedule::RowRule rule = KEY_ROWS ? Schedule::col_rule(p, rp) : Schedule::row_rule(p, rp);
            range(max(x, rule.lo), min(y, rule.hi), lo[mt][r][0], hi[mt][r][0]);
            const int gx = max(x, first);  // below the rule's global bound: [gx, global - 1], when global > gx
            if (rule.global > gx) range(gx, min(y, rule.global - 1), lo[mt][r][1], hi[mt][r][1]);
            else range(1, 0, lo[mt][r][1], hi[mt][r][1]);
            second = second || lo[mt][r][1] <= hi[mt][r][1];
        }
    auto apply = [&](auto two) {
#pragma unroll
        for (int j = 0; j < NB; j++)
#pragma unroll
            for (int e = 0; e < 2; e++)
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        const int c = 8 * j + e;
                        bool keep = c >= lo[mt][r][0] && c <= hi[mt][r][0];
                        if constexpr (decltype(two)::value) keep = keep || (c >= lo[mt][r][1] && c <= hi[mt][r][1]);
                        if (!keep) s[mt][j][2 * r + e] = masked;
                    }
    };
    if (second) apply(std::true_type{});
    else apply(std::false_type{});
}

// The element mask of one tile (above): rows by their column ranges where the pattern and the
// documents allow, element by element otherwise.
template <bool KEY_ROWS, int MT, int NB, class Schedule>
__device__ __forceinline__ void mask_tile(float (&s)[MT][NB][4], const Params& p, int b, int row0, int col0, int ncols, int h,
                                          bool cut, bool docs) {
    int kp[MT][2];
    bool kok[MT][2];
    if constexpr (KEY_ROWS) key_rows_of_fragment<MT, Schedule>(kp, kok, p, row0);
    if constexpr (Schedule::kIntervalRule) {
        if ((KEY_ROWS ? p.qrows.step == 1 && !docs : p.krows.step == 1) && !Schedule::block_rules(p)) {
            mask_by_intervals<KEY_ROWS, MT, NB, Schedule>(s, p, b, row0, col0, ncols, cut, docs, kp, kok);
            return;
        }
    }
    if constexpr (!Schedule::kOwnElementMask) {
        if (Schedule::kTwoSided ? !docs : rows_mask_ok(p, docs))
            if (mask_by_rows<KEY_ROWS, MT, NB, Schedule>(s, p, row0, col0, ncols, kp, kok)) return;
    }
    mask_by_elements<KEY_ROWS, MT, NB, Schedule>(s, p, b, row0, col0, ncols, h, cut, docs, kp, kok);
}

// The scores of a (query tile, key tile) pair masked where the pair needs it (pair_needs_mask, or
// the pattern cuts it): the forward's and the dQ kernel's step. row0: the fragment's first query row.
template <int MT, int NB, class Schedule>
__device__ __forceinline__ void mask_scores_where_needed(float (&s)[MT][NB][4], const Params& p, const QueryTile& qt,
                                                         const KeyTile& kt, int BN, bool cut, int b, int row0, int h) {
    if (cut || pair_needs_mask(p, qt, kt, BN))
        mask_tile<false, MT, NB, Schedule>(s, p, b, row0, kt.r0, kt.n, h, cut, docs_cut(p, qt.doc_max, kt));
}

// The part of a backward step every rung shares (backward_mma_sync.cuh's kernels with MT m-tiles
// of 16 keys per warp, backward_steps.cuh's wgmma step with one): S^T into P^T = 2^(S^T scale_log2 -
// L_log2[query]), masked element by element where the (key tile, query tile) pair needs it (the
// pattern cuts it, the key tile is partial, there are documents, or the causal diagonal crosses
// it). Lq: the query tile's L in log2 at this thread's columns (load_query_cols); q_first_pos:
// the position of its first row (read only when causal); doc_max: the largest document start
// among its rows (query_rows_doc_max_warp; read only with documents); kt, kn: the key tile; queries.cut(it):
// does the pattern cut the pair (read after the exponentials, where the step read it before it
// was shared).
template <int MT, int QB, class Schedule, class Queries>
__device__ __forceinline__ void probs_t_masked(float (&s)[MT][QB][4], const Params& p, const float (&Lq)[QB][2],
                                               int q_first_pos, int doc_max, const KeyTile& kt, int kn, int BN,
                                               const Queries& queries, int it, int b, int key_row0, int q0, int qn, int h) {
#pragma unroll
    for (int j = 0; j < QB; j++)
#pragma unroll
        for (int e = 0; e < 2; e++)
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) s[mt][j][2 * r + e] = ex2(fmaf(s[mt][j][2 * r + e], p.scale_log2, -Lq[j][e]));
    const bool cut = queries.cut(it);
    const bool docs = docs_cut(p, doc_max, kt);
    bool need_mask = cut || kn < BN || docs;
    if (p.causal && !need_mask) need_mask = kt.last_pos > q_first_pos;
    if (need_mask) mask_tile<true, MT, QB, Schedule>(s, p, b, key_row0, q0, qn, h, cut, docs);
}

// The position of a query tile's first row, for probs_t_masked (causal launches only).
__device__ __forceinline__ int query_first_pos(const Params& p, int q0) {
    return p.causal ? query_pos(p, q0) : 0;
}

}  // namespace flash
