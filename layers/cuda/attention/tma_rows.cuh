// What the warp-specialized kernels read through the TMA: which launches they serve (rows at
// unit step, or a dilated branch's rows at its step up to 8), how many rows a box takes, and the
// loads of a row map's rows into a 128-byte-swizzled tile.
#pragma once
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/tma.cuh"

namespace flash {

constexpr int kWsMaxStep = 8;        // the TMA's largest element stride: dilations up to 8

// Rows per TMA box for rows read at `step` (a box spans at most 256 of the tensor's rows): the
// 128 rows of a Q, K or V tile in 1, 2 or 4 boxes.
__host__ __device__ constexpr int ws_box_rows(int step) { return step <= 2 ? 128 : step <= 4 ? 64 : 32; }

// The launches both warp-specialized kernels (this file and backward_ws.cuh) serve: any pattern,
// one-sided or two-sided, whose rows the TMA reads by coordinate: unit-step maps from token
// `base` on, or a dilated branch's virtual sequences at its step r (the TMA's element stride,
// r <= 8). The buffers' alignment is the tensor maps' to check (make_row_tensor_map).
inline bool ws_serves(const Params& p) {
    return p.seqs.len > 0 ? p.seqs.step <= kWsMaxStep : p.qrows.step == 1 && p.krows.step == 1;
}

// TMA loads of `rows` rows of a map from its row r0, head h of sequence b, into dst ([D/64][rows]
// [64], 128 bytes per row), counted on `bar`. Unit-step maps: one box per 64 columns. STRIDED
// (a dilated branch, step r): boxes of R rows (R = rows unless the step needs smaller boxes,
// ws_box_rows), each at the token of its first row.
template <int D, bool STRIDED>
__device__ __forceinline__ void ws_load_rows(uint32_t dst, const CUtensorMap* tm, const RowMap& map, int r0, int rows, int h,
                                             int b, uint32_t bar) {
    if constexpr (!STRIDED) {
#pragma unroll
        for (int c = 0; c < D / 64; c++) tma_load_3d(dst + c * rows * 128, tm, h * D + 64 * c, map.base + r0, b, bar);
    } else {
        const int R = min(ws_box_rows(map.step), rows);
#pragma unroll
        for (int c = 0; c < D / 64; c++)
            for (int rb = 0; rb < rows; rb += R)
                tma_load_3d(dst + c * rows * 128 + rb * 128, tm, h * D + 64 * c, map.token(r0 + rb), b, bar);
    }
}

}  // namespace flash
