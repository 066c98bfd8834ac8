// Flash attention forward on tensor cores (FlashAttention-2 structure): one block per
// (query tile, b, h) walks the key tiles its schedule gives, keeping O, the row max and the row
// sum in registers; K/V tiles stream through a 2-stage cp.async pipeline. See
// params.cuh for the descriptors, launch_template.cuh for the launcher.
#pragma once
#include "layers/cuda/attention/epilogue.cuh"
#include "layers/cuda/attention/masks.cuh"
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/ptx.cuh"
#include "layers/cuda/attention/schedules.cuh"
#include "layers/cuda/attention/smem_tiles.cuh"
#include "layers/cuda/attention/softmax.cuh"
#include "layers/cuda/attention/tile_scheduler.cuh"

namespace flash {

// Shared memory of the forward kernel: Q (BM, D) and two stages of K and V (BN, D), bf16.
template <int D, int MT, int NW, int BN>
constexpr int forward_smem_bytes() {
    return (16 * MT * NW * D + 4 * BN * D) * 2;
}

// Block: NW warps, each owning MT m-tiles of 16 query rows (BM = 16*MT*NW rows); key tiles of BN.
template <int D, int MT, int NW, int BN, class Schedule>
__global__ void __launch_bounds__(NW * 32, 1) attention_forward_kernel(Params p) {
    constexpr int NT = NW * 32, BM = 16 * MT * NW;
    constexpr int NB = BN / 8;  // 8-column blocks of a score tile
    constexpr int DB = D / 8;   // 8-column blocks of O
    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t sQ = smem_u32(smem);                 // (BM, D)
    const uint32_t sK = sQ + BM * D * 2;                // 2 x (BN, D)
    const uint32_t sV = sK + 2 * BN * D * 2;            // 2 x (BN, D)

    int b, h, rank;
    resolve_block<Schedule>(p, b, h, rank);
    const int qtile = Schedule::query_tile_of_rank(p, rank, gridDim.y);  // the longest rows start first
    const int warp = threadIdx.x >> 5;
    const int q0 = qtile * BM, qn = min(BM, p.qrows.len - q0);
    if (qn <= 0) return;  // a dilated map shorter than the grid's longest

    const QueryTile qt = query_tile_info<NT>(p, b, q0, qn);
    const auto keys = Schedule::key_tiles(p, qt, BN);
    const int n = keys.count();

    const bf16* qbase = p.q + (size_t)b * p.q_tokens * p.q_stride + h * D;
    const bf16* kbase = p.k + (size_t)b * p.kv_tokens * p.kv_stride + h * D;
    const bf16* vbase = p.v + (size_t)b * p.kv_tokens * p.kv_stride + h * D;

    float acc[MT][DB][4] = {};
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;

    // Prologue: Q and the first K, V tile on their way.
    if (n > 0) {
        load_tile_async<SwizzleMma, BM, D, NT>(sQ, qbase, p.q_stride, p.qrows, q0, qn);
        load_kv_tile_async<BN, D, NT>(sK, sV, kbase, vbase, p, keys.tile(0) * BN);
        cp_async_commit();
    }
    // Main loop: one key tile a step, the next one loading meanwhile.
    for (int it = 0; it < n; it++) {
        cp_async_wait_all();
        __syncthreads();  // tile `it` landed, and every warp is done with the stage we refill next
        if (it + 1 < n) {
            const int st = (it + 1) & 1;
            load_kv_tile_async<BN, D, NT>(sK + st * BN * D * 2, sV + st * BN * D * 2, kbase, vbase, p, keys.tile(it + 1) * BN);
            cp_async_commit();
        }
        const uint32_t Ks = sK + (it & 1) * BN * D * 2, Vs = sV + (it & 1) * BN * D * 2;
        const int k0 = keys.tile(it) * BN;
        const KeyTile kt = key_tile_info(p, k0, min(BN, p.krows.len - k0));

        // S = Q K^T for the warp's 16*MT rows, (16*MT, BN).
        float s[MT][NB][4] = {};
        mma_rows_times_tile_t<MT, NB, D>(s, sQ, warp * 16 * MT, Ks);
        mask_scores_where_needed<MT, NB, Schedule>(s, p, qt, kt, BN, keys.cut(it), b, q0 + warp * 16 * MT, h);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) online_softmax_update<NB, DB>(s[mt], m[mt], l[mt], acc[mt], p.scale_log2);

        // O += P V, P rounded to bf16 (its row sums l stay fp32).
        mma_probs_times_tile<MT, NB, DB, D>(acc, s, Vs);
    }

    // Epilogue: O = acc / l (or merged into an earlier branch's); a row with no key gets O = 0, L = -inf.
#pragma unroll
    for (int mt = 0; mt < MT; mt++) store_output<D, Schedule::kMayMerge, Schedule::kTwoSided>(p, b, h, q0 + warp * 16 * MT + mt * 16, acc[mt], m[mt], l[mt]);
}

}  // namespace flash
