// What the warp-specialized kernels read through the TMA: which launches they serve (rows at
// unit step, or a dilated branch's rows at its step, folded past 8), how many rows a box takes,
// and the loads of a row map's rows into a 128-byte-swizzled tile.
#pragma once
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/tma.cuh"

namespace flash {

constexpr int kWsMaxStep = 8;        // the TMA's largest element stride: dilations up to 8

// Rows per TMA box for rows read at element stride `step` (a box spans at most 256 of the
// tensor's rows): the 128 rows of a Q, K or V tile in 1, 2 or 4 boxes.
__host__ __device__ constexpr int ws_box_rows(int step) { return step <= 2 ? 128 : step <= 4 ? 64 : 32; }

// Rows at a step over 8 (a dilated branch with r > 8, the 91M model's (32768, 12)): the TMA reads
// them through a 4-D view of the tensor, token t at (t % a, t / a) for a fold a that divides the
// step, where rows `step` apart are step / a apart, an element stride it takes when at most 8
// (make_row_tensor_map). The fold must divide both sides' token counts, so that rows past the
// end still read as zeros rather than as the next sequence's. Of the folds that do, the one
// whose boxes take the most rows (r = 12 over 2^k tokens: a = 4, boxes of 64 rows at stride 3).
// 1: no fold (step <= 8); 0: none fits (the caller's kernel without TMA). The forward only: the
// backward's folded walk is slower than its kernel without TMA (backward_ws.cuh).
__host__ __device__ inline int ws_fold(int step, int q_tokens, int kv_tokens) {
    if (step <= kWsMaxStep) return 1;
    int best = 0;
    for (int a = 2; a <= step; a++) {
        if (step % a || step / a > kWsMaxStep || q_tokens % a || kv_tokens % a) continue;
        if (best == 0 || ws_box_rows(step / a) > ws_box_rows(step / best)) best = a;
    }
    return best;
}

// A launch's fold (unit-step maps are never folded).
__host__ __device__ inline int ws_fold_of(const Params& p) {
    return p.seqs.len == 0 ? 1 : ws_fold(p.seqs.step, p.q_tokens, p.kv_tokens);
}

// The launches both warp-specialized kernels (this file and backward_ws.cuh) serve: any pattern,
// one-sided or two-sided, whose rows the TMA reads by coordinate: unit-step maps from token
// `base` on, or a dilated branch's virtual sequences at its step r (the TMA's element stride
// r <= 8, or r / a through a fold a, ws_fold). The buffers' alignment is the tensor maps' to
// check (make_row_tensor_map).
inline bool ws_serves(const Params& p) {
    return p.seqs.len > 0 ? ws_fold_of(p) > 0 : p.qrows.step == 1 && p.krows.step == 1;
}

// TMA loads of `rows` rows of a map from its row r0, head h of sequence b, into dst ([D/64][rows]
// [64], 128 bytes per row), counted on `bar`. Unit-step maps: one box per 64 columns. STRIDED
// (a dilated branch, step r): boxes of R rows (R = rows unless the element stride r / fold
// needs smaller boxes, ws_box_rows), each at the token of its first row, in the 4-D map's
// coordinates when folded (ws_fold: the launch's fold, the one its maps were made with).
template <int D, bool STRIDED>
__device__ __forceinline__ void ws_load_rows(uint32_t dst, const CUtensorMap* tm, const RowMap& map, int r0, int rows, int h,
                                             int b, uint32_t bar, int fold = 1) {
    if constexpr (!STRIDED) {
#pragma unroll
        for (int c = 0; c < D / 64; c++) tma_load_3d(dst + c * rows * 128, tm, h * D + 64 * c, map.base + r0, b, bar);
    } else {
        const int R = min(ws_box_rows(map.step / fold), rows);
#pragma unroll
        for (int c = 0; c < D / 64; c++)
            for (int rb = 0; rb < rows; rb += R) {
                const int tok = map.token(r0 + rb);
                if (fold == 1) tma_load_3d(dst + c * rows * 128 + rb * 128, tm, h * D + 64 * c, tok, b, bar);
                else tma_load_4d(dst + c * rows * 128 + rb * 128, tm, h * D + 64 * c, tok % fold, tok / fold, b, bar);
            }
    }
}

}  // namespace flash
