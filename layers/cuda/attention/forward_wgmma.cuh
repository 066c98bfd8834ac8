// Flash attention forward on Hopper's warpgroup MMA (wgmma, sm_90a): the same algorithm, masks
// and schedule as forward_mma_sync.cuh, with each warpgroup (4 warps) owning 64 query rows and
// S = Q K^T, O += P V issued as m64nNk16 wgmma instructions reading Q, K, V straight from shared
// memory (P from registers). Tiles are stored in the canonical 128-byte-swizzled K-major layout
// (rows of 64 bf16 = 128 bytes, 8-row atoms of 1024 bytes, head dims over 64 split into
// [D/64][rows][64] column blocks), which is what the wgmma descriptors describe; V is read
// through the same layout as an MN-major ("transposed") B operand.
// All warps load with cp.async (no producer warp, no TMA) and the two GEMMs of a tile run back
// to back: a first step toward FlashAttention-3, whose warp specialisation and ping-pong
// scheduling would also overlap the softmax with the tensor cores.
#pragma once
#include "layers/cuda/attention/epilogue.cuh"
#include "layers/cuda/attention/masks.cuh"
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/schedules.cuh"
#include "layers/cuda/attention/smem_tiles.cuh"
#include "layers/cuda/attention/softmax.cuh"
#include "layers/cuda/attention/tile_scheduler.cuh"
#include "layers/cuda/attention/wgmma.cuh"

namespace flash {

template <int D, int NWG, int BN>
constexpr int forward_wgmma_smem_bytes() {
    return (64 * NWG * D + 4 * BN * D) * 2 + 1024;  // + slack to align the tiles to 1024 bytes
}

// Blocks per SM the forward asks the compiler to fit: two for the small D = 64, BN = 64 tile (one
// block's softmax then overlaps the other's tensor-core work). Without it the DilatedSchedule
// instance took 137 registers, one block per SM, and ran at 125 TFLOP/s against 221 for the
// same tiles at 114 registers (notes/attention-dilated.md).
template <int D, int BN>
constexpr int forward_wgmma_min_blocks() {
    return D == 64 && BN == 64 ? 2 : 1;
}

// Block: NWG warpgroups, each owning 64 query rows (BM = 64*NWG); key tiles of BN.
template <int D, int NWG, int BN, class Schedule>
__global__ void __launch_bounds__(NWG * 128, (forward_wgmma_min_blocks<D, BN>())) attention_forward_wgmma_kernel(Params p) {
    constexpr int NT = NWG * 128, BM = 64 * NWG;
    constexpr int NB = BN / 8, DB = D / 8;
    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t base = (smem_u32(smem) + 1023) & ~1023u;
    const uint32_t sQ = base;                 // [D/64][BM][64]
    const uint32_t sK = sQ + BM * D * 2;      // 2 x [D/64][BN][64]
    const uint32_t sV = sK + 2 * BN * D * 2;  // 2 x [D/64][BN][64]

    int b, h, rank;
    resolve_block<Schedule>(p, b, h, rank);
    const int qtile = Schedule::query_tile_of_rank(p, rank, gridDim.y);
    const int warp = threadIdx.x >> 5;
    const int wg = warp >> 2;
    const int q0 = qtile * BM, qn = min(BM, p.qrows.len - q0);
    if (qn <= 0) return;  // a dilated map shorter than the grid's longest
    const int row0 = q0 + wg * 64 + (warp & 3) * 16;  // first row of the warp's 16-row slice

    const QueryTile qt = query_tile_info<NT>(p, b, q0, qn);
    const auto keys = Schedule::key_tiles(p, qt, BN);
    const int n = keys.count();
    const bf16* kbase = p.k + (size_t)b * p.kv_tokens * p.kv_stride + h * D;
    const bf16* vbase = p.v + (size_t)b * p.kv_tokens * p.kv_stride + h * D;

    float acc[DB][4] = {};
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    if (n > 0) {
        load_tile_async<Swizzle128, BM, D, NT>(sQ, p.q + (size_t)b * p.q_tokens * p.q_stride + h * D, p.q_stride, p.qrows,
                                         q0, qn);
        const int k0 = keys.tile(0) * BN;
        load_tile_async<Swizzle128, BN, D, NT>(sK, kbase, p.kv_stride, p.krows, k0, min(BN, p.krows.len - k0));
        load_tile_async<Swizzle128, BN, D, NT>(sV, vbase, p.kv_stride, p.krows, k0, min(BN, p.krows.len - k0));
        cp_async_commit();
    }
    for (int it = 0; it < n; it++) {
        cp_async_wait_all();
        fence_proxy_async();
        __syncthreads();
        if (it + 1 < n) {
            const int k0 = keys.tile(it + 1) * BN, st = (it + 1) & 1;
            load_tile_async<Swizzle128, BN, D, NT>(sK + st * BN * D * 2, kbase, p.kv_stride, p.krows, k0,
                                             min(BN, p.krows.len - k0));
            load_tile_async<Swizzle128, BN, D, NT>(sV + st * BN * D * 2, vbase, p.kv_stride, p.krows, k0,
                                             min(BN, p.krows.len - k0));
            cp_async_commit();
        }
        const uint32_t Ks = sK + (it & 1) * BN * D * 2, Vs = sV + (it & 1) * BN * D * 2;
        const int k0 = keys.tile(it) * BN;
        const KeyTile kt = key_tile_info(p, k0, min(BN, p.krows.len - k0));

        // S = Q K^T: (64, BN) per warpgroup, k-steps of 16 along D (32 bytes inside a 128-byte row,
        // then the next 64-column block).
        float s[1][NB][4];
        pin<NB>(s[0]);
        wgmma_fence();
#pragma unroll
        for (int kc = 0; kc < D / 16; kc++) {
            const uint32_t koff = (kc & 3) * 32;
            const uint64_t da = sw128_desc(sQ + (kc >> 2) * BM * 128 + wg * 64 * 128 + koff, 16, 1024);
            const uint64_t db = sw128_desc(Ks + (kc >> 2) * BN * 128 + koff, 16, 1024);
            wgmma_ss<BN>(s[0], da, db, kc > 0);
        }
        wgmma_commit();
        wgmma_wait_all();
        pin<NB>(s[0]);
        mask_scores_where_needed<1, NB, Schedule>(s, p, qt, kt, BN, keys.cut(it), b, row0, h);
        online_softmax_update<NB, DB>(s[0], m, l, acc, p.scale_log2);

        // O += P V: k-steps of 16 keys (16 rows of 128 bytes); the D columns span D/64 blocks
        // BN*128 bytes apart (the leading byte offset of the MN-major operand).
        uint32_t pa[BN / 16][4];
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) scores_to_a<NB>(pa[kk], s[0], kk);
        pin<BN / 16>(pa);
        pin<DB>(acc);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) wgmma_rs<D>(acc, pa[kk], sw128_desc(Vs + kk * 16 * 128, BN * 128, 1024), 1);
        wgmma_commit();
        wgmma_wait_all();
        pin<DB>(acc);
        pin<BN / 16>(pa);
    }

    store_output<D, Schedule::kMayMerge, Schedule::kTwoSided>(p, b, h, row0, acc, m, l);
}

}  // namespace flash
