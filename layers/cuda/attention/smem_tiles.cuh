// Shared-memory tiles of the flash kernels: the two swizzled layouts (the mma.sync kernels' and
// the wgmma descriptors' 128-byte one), the one asynchronous tile loader that fills either, and
// the fragment loads and MMAs of the mma.sync kernels that read the first.
#pragma once
#include <cstdint>
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/ptx.cuh"

namespace flash {

// Shared-memory tiles: row-major (ROWS, COLS) bf16, 16-byte chunks XOR-swizzled so that the 8
// consecutive rows one ldmatrix phase reads (same logical chunk) fall in 8 different 16-byte bank
// groups: rows of 128+ bytes XOR the chunk with row & 7; rows of 64 bytes (two rows per 128-byte
// bank line) with (row >> 1) & 3.
template <int COLS>
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
    static_assert(COLS % 64 == 0 || COLS == 32, "tile rows of 32 or a multiple of 64 elements");
    const int x = COLS >= 64 ? (row & 7) : ((row >> 1) & 3);
    return (uint32_t)(row * COLS * 2 + ((chunk ^ x) << 4));
}

// Byte offset of 16-byte chunk c of row r in a (ROWS, D) tile stored as [D/64][ROWS][64] with the
// 128-byte swizzle (the hardware XORs address bits 4-6 with bits 7-9; tiles are 1024-byte aligned).
template <int ROWS>
__device__ __forceinline__ uint32_t sw128_offset(int r, int c) {
    return (uint32_t)((c >> 3) * ROWS * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// The two layouts a tile is stored in: swz (the mma.sync kernels' ldmatrix reads) and the 128-byte
// swizzle of the wgmma descriptors (sw128_offset).
struct SwizzleMma {
    template <int ROWS, int COLS>
    __device__ __forceinline__ static uint32_t offset(int r, int c) { return swz<COLS>(r, c); }
};
struct Swizzle128 {
    template <int ROWS, int COLS>
    __device__ __forceinline__ static uint32_t offset(int r, int c) { return sw128_offset<ROWS>(r, c); }
};

// Load `nvalid` rows (row r of the tile is map row row0 + r) of D bf16 from `base` (the (b, h)
// slice, token stride `stride` elements) into a tile of layout Layout; rows past nvalid become zeros.
template <class Layout, int ROWS, int D, int NT>
__device__ __forceinline__ void load_tile_async(uint32_t dst, const bf16* base, int stride, RowMap map,
                                                int row0, int nvalid) {
    constexpr int CH = D / 8;
    for (int c = threadIdx.x; c < ROWS * CH; c += NT) {
        const int r = c / CH, ch = c % CH;
        const bool ok = r < nvalid;
        const bf16* src = ok ? base + (size_t)map.token(row0 + r) * stride + ch * 8 : base;
        cp_async_16(dst + Layout::template offset<ROWS, D>(r, ch), src, ok);
    }
}

// Fragments (PTX ISA "Matrix fragments for mma.m16n8k16"): lane = 4*g + t holds A rows g, g+8 and
// C rows g, g+8 at columns 2t, 2t+1; B column g at rows 2t, 2t+1 (+8).

// A (16x16) from a [m][k] tile: rows m0.., columns k0...
template <int COLS>
__device__ __forceinline__ void ld_a(uint32_t (&a)[4], uint32_t tile, int m0, int k0) {
    const int lane = threadIdx.x & 31;
    ldmatrix_x4(a, tile + swz<COLS>(m0 + (lane & 15), (k0 >> 3) + (lane >> 4)));
}
// A (16x16) from a [k][m] tile (the transpose is stored): rows m0.. of A are columns of the tile.
template <int COLS>
__device__ __forceinline__ void ld_a_t(uint32_t (&a)[4], uint32_t tile, int m0, int k0) {
    const int lane = threadIdx.x & 31;
    const int mi = lane >> 3;
    ldmatrix_x4_trans(a, tile + swz<COLS>(k0 + (lane & 7) + ((mi >> 1) << 3), (m0 >> 3) + (mi & 1)));
}
// B for two 8-column blocks n0.., n0+8.. over k0..k0+15 from a [n][k] tile (K in Q K^T):
// b[0], b[1] for block n0; b[2], b[3] for block n0+8.
template <int COLS>
__device__ __forceinline__ void ld_b_nk(uint32_t (&b)[4], uint32_t tile, int n0, int k0) {
    const int lane = threadIdx.x & 31;
    ldmatrix_x4(b, tile + swz<COLS>(n0 + (lane & 7) + ((lane >> 4) << 3), (k0 >> 3) + ((lane >> 3) & 1)));
}
// The same from a [k][n] tile (V in P V).
template <int COLS>
__device__ __forceinline__ void ld_b_kn(uint32_t (&b)[4], uint32_t tile, int k0, int n0) {
    const int lane = threadIdx.x & 31;
    ldmatrix_x4_trans(b, tile + swz<COLS>(k0 + (lane & 7) + (((lane >> 3) & 1) << 3), (n0 >> 3) + (lane >> 4)));
}

// acc[MT][NB][4] += A[MT] (16x16 each) * B, B the k-chunk k0 of a tile, for all NB column blocks.
// One B load feeds MT*2 MMAs: more rows per warp means fewer shared-memory bytes per FLOP.
template <int MT, int NB, int COLS, bool B_IS_NK>
__device__ __forceinline__ void mma_rows_times_tile(float (&acc)[MT][NB][4], const uint32_t (&a)[MT][4],
                                                    uint32_t tile, int k0) {
#pragma unroll
    for (int np = 0; np < NB / 2; np++) {
        uint32_t b[4];
        if (B_IS_NK) ld_b_nk<COLS>(b, tile, np * 16, k0);
        else ld_b_kn<COLS>(b, tile, k0, np * 16);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            mma_16816(acc[mt][2 * np], a[mt], b[0], b[1]);
            mma_16816(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
        }
    }
}

// acc (the warp's 16*MT rows, NB column blocks) += A B^T over all D columns, A rows row0.. of
// a_tile and B an [n][k] tile, both (., D) in the mma.sync layout: the mma.sync kernels' S = Q K^T,
// S^T = K Q^T and dP^T = V dO^T.
template <int MT, int NB, int D>
__device__ __forceinline__ void mma_rows_times_tile_chunk(float (&acc)[MT][NB][4], uint32_t a_tile, int row0, uint32_t b_tile, int k0) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) ld_a<D>(a[mt], a_tile, row0 + mt * 16, k0);
    mma_rows_times_tile<MT, NB, D, true>(acc, a, b_tile, k0);
}
template <int MT, int NB, int D>
__device__ __forceinline__ void mma_rows_times_tile_t(float (&acc)[MT][NB][4], uint32_t a_tile, int row0, uint32_t b_tile) {
#pragma unroll
    for (int kc = 0; kc < D / 16; kc++) mma_rows_times_tile_chunk<MT, NB, D>(acc, a_tile, row0, b_tile, kc * 16);
}
// Two such products over the same rows, their k-chunks interleaved (the dQ kernel's S = Q K^T and
// dP = dO V^T).
template <int MT, int NB, int D>
__device__ __forceinline__ void mma_rows_times_tile_t2(float (&acc)[MT][NB][4], uint32_t a_tile, uint32_t b_tile,
                                                       float (&acc2)[MT][NB][4], uint32_t a_tile2, uint32_t b_tile2, int row0) {
#pragma unroll
    for (int kc = 0; kc < D / 16; kc++) {
        mma_rows_times_tile_chunk<MT, NB, D>(acc, a_tile, row0, b_tile, kc * 16);
        mma_rows_times_tile_chunk<MT, NB, D>(acc2, a_tile2, row0, b_tile2, kc * 16);
    }
}

// K and V of the key tile at k0 (rows past the keys zero) into one stage of the mma.sync kernels.
template <int BN, int D, int NT>
__device__ __forceinline__ void load_kv_tile_async(uint32_t sK, uint32_t sV, const bf16* kbase, const bf16* vbase,
                                                   const Params& p, int k0) {
    load_tile_async<SwizzleMma, BN, D, NT>(sK, kbase, p.kv_stride, p.krows, k0, min(BN, p.krows.len - k0));
    load_tile_async<SwizzleMma, BN, D, NT>(sV, vbase, p.kv_stride, p.krows, k0, min(BN, p.krows.len - k0));
}

// The C fragments of columns 16*kk.. of a score tile, rounded to bf16, as an A fragment.
template <int NB>
__device__ __forceinline__ void scores_to_a(uint32_t (&a)[4], const float (&s)[NB][4], int kk) {
    a[0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
    a[1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
    a[2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    a[3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// acc (16*MT rows, DB column blocks) += P B, P the warp's score rows (C fragments, NB column
// blocks, rounded to bf16) and B a [k][n] tile in the mma.sync layout: O += P V, dV += P^T dO,
// dK += dS^T Q, dQ += dS K.
template <int MT, int NB, int DB, int D>
__device__ __forceinline__ void mma_probs_times_tile(float (&acc)[MT][DB][4], const float (&s)[MT][NB][4], uint32_t tile) {
#pragma unroll
    for (int kk = 0; kk < NB / 2; kk++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) scores_to_a<NB>(a[mt], s[mt], kk);
        mma_rows_times_tile<MT, DB, D, false>(acc, a, tile, kk * 16);
    }
}

}  // namespace flash
