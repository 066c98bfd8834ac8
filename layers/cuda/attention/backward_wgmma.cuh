// Flash attention backward, dK/dV (+ atomic dQ) on Hopper's warpgroup MMA (wgmma, sm_90a): the
// algorithm of attention_backward_dkdv_kernel (backward_mma_sync.cuh) with each of the two
// warpgroups owning 64 keys (BN = 128) and every product a wgmma:
//   S^T = K Q^T, dP^T = V dO^T      A = K, V rows (smem, K-major), B = Q, dO (smem, K-major)
//   dV += P^T dO, dK += dS^T Q      A = P^T, dS^T from registers, B = dO, Q (smem, MN-major)
//   dQ (+)= dS K                    A = dS^T tile (smem, MN-major), B = K (smem, MN-major);
//                                   warpgroup w computes dQ columns [w*D/2, (w+1)*D/2) over all
//                                   128 keys and adds them to the fp32 accumulator.
// Tiles use the 128-byte-swizzled layout (smem_tiles.cuh, wgmma.cuh); the step is
// backward_steps.cuh's, the preprocess and dQ convert kernels backward_pre_post.cuh's.
#pragma once
#include "layers/cuda/attention/backward_steps.cuh"
#include "layers/cuda/attention/epilogue.cuh"
#include "layers/cuda/attention/masks.cuh"
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/schedules.cuh"
#include "layers/cuda/attention/smem_tiles.cuh"
#include "layers/cuda/attention/softmax.cuh"
#include "layers/cuda/attention/tile_scheduler.cuh"
#include "layers/cuda/attention/wgmma.cuh"

namespace flash {

constexpr int kBwdWgBM = 64;  // queries per step: one 128-byte swizzle row of the dS^T tile

template <int D>
constexpr int backward_dkdv_wgmma_smem_bytes() {
    constexpr int BN = 128, BM = kBwdWgBM;
    // K, V (BN, D); 2 stages of Q, dO (BM, D); dS^T (BN, BM); 2 stages of L, delta (BM) fp32.
    return (2 * BN * D + 4 * BM * D + BN * BM) * 2 + 4 * BM * 4 + 1024;
}

template <int D, int NT>
__device__ __forceinline__ void load_query_side_sw128(const Params& p, int b, int h, int q0, uint32_t sQ,
                                                      uint32_t sdO, uint32_t sL, uint32_t sDelta) {
    constexpr int BM = kBwdWgBM;
    const int qn = min(BM, p.qrows.len - q0);
    load_tile_async<Swizzle128, BM, D, NT>(sQ, p.q + (size_t)b * p.q_tokens * p.q_stride + h * D, p.q_stride, p.qrows, q0, qn);
    load_tile_async<Swizzle128, BM, D, NT>(sdO, p.dout + (size_t)b * p.q_tokens * p.H * D + h * D, p.H * D, p.qrows, q0, qn);
    const size_t rowbase = ((size_t)b * p.H + h) * p.q_tokens;
    for (int i = threadIdx.x; i < BM; i += NT) {
        const bool ok = i < qn;  // past the end: L = delta = 0, harmless since Q = dO = 0 there
        const size_t at = rowbase + p.qrows.token(ok ? q0 + i : q0);
        cp_async_4(sL + i * 4, p.lse_log2 + at, ok);
        cp_async_4(sDelta + i * 4, p.delta + at, ok);
    }
}

template <int D, class Schedule>
__global__ void __launch_bounds__(256, 1) attention_backward_dkdv_wgmma_kernel(Params p) {
    constexpr int NT = 256, BN = 128, BM = kBwdWgBM;
    constexpr int DB = D / 8;
    constexpr int DQN = D / 2;  // dQ columns per warpgroup
    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t base = (smem_u32(smem) + 1023) & ~1023u;
    const uint32_t sK = base;                    // [D/64][BN][64]
    const uint32_t sV = sK + BN * D * 2;         // [D/64][BN][64]
    const uint32_t sQ = sV + BN * D * 2;         // 2 x [D/64][BM][64]
    const uint32_t sdO = sQ + 2 * BM * D * 2;    // 2 x [D/64][BM][64]
    const uint32_t sdS = sdO + 2 * BM * D * 2;   // [BN][BM]: dS^T, keys as rows
    const uint32_t sL = sdS + BN * BM * 2;       // 2 x (BM) fp32, log2 domain
    const uint32_t sDelta = sL + 2 * BM * 4;     // 2 x (BM) fp32
    const float* fL = reinterpret_cast<const float*>(smem + (sL - smem_u32(smem)));
    const float* fDelta = reinterpret_cast<const float*>(smem + (sDelta - smem_u32(smem)));

    int b, h, rank;
    resolve_block<Schedule>(p, b, h, rank);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int wg = warp >> 2;
    const int k0 = Schedule::key_tile_of_rank(p, rank) * BN, kn = min(BN, p.krows.len - k0);
    if (kn <= 0) return;  // a dilated map shorter than the grid's longest
    const int key_row0 = k0 + wg * 64 + (warp & 3) * 16;  // first key of the warp's 16-row slice
    const KeyTile kt = key_tile_info(p, k0, kn);
    const auto queries = Schedule::query_tiles(p, kt, BM);
    const int n = queries.count();

    float dk[DB][4] = {}, dv[DB][4] = {};
    if (n > 0) {
        load_tile_async<Swizzle128, BN, D, NT>(sK, p.k + (size_t)b * p.kv_tokens * p.kv_stride + h * D, p.kv_stride,
                                         p.krows, k0, kn);
        load_tile_async<Swizzle128, BN, D, NT>(sV, p.v + (size_t)b * p.kv_tokens * p.kv_stride + h * D, p.kv_stride,
                                         p.krows, k0, kn);
        load_query_side_sw128<D, NT>(p, b, h, queries.tile(0) * BM, sQ, sdO, sL, sDelta);
        cp_async_commit();
    }
    for (int it = 0; it < n; it++) {
        cp_async_wait_all();
        fence_proxy_async();
        __syncthreads();  // tile `it` landed; the other stage and dS^T are free (all wgmmas waited)
        if (it + 1 < n) {
            const int st = (it + 1) & 1;
            load_query_side_sw128<D, NT>(p, b, h, queries.tile(it + 1) * BM, sQ + st * BM * D * 2,
                                         sdO + st * BM * D * 2, sL + st * BM * 4, sDelta + st * BM * 4);
            cp_async_commit();
        }
        const int st = it & 1;
        const uint32_t Qs = sQ + st * BM * D * 2, dOs = sdO + st * BM * D * 2;
        const float* Ls = fL + st * BM;
        const float* Deltas = fDelta + st * BM;
        const int q0 = queries.tile(it) * BM, qn = min(BM, p.qrows.len - q0);

        uint32_t pa[BM / 16][4], dsa[BM / 16][4];
        const int doc_max = query_rows_doc_max_warp(p, b, q0, qn);
        bwd_wg_step_dkdv<D, Schedule>(p, queries, it, kt, kn, b, h, wg, key_row0, q0, qn, sK, sV, Qs, dOs, sdS, Ls, Deltas,
                                      doc_max, pa, dsa, dk, dv);

        // dQ[:, wg*D/2 ..] = dS K over all BN keys: dS^T of both warpgroups must be in place.
        fence_proxy_async();
        __syncthreads();
        float dq[1][DQN / 8][4];
        bwd_wg_step_dq<D>(wg, sK, sdS, dq, pa, dsa, dk, dv);
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = (warp & 3) * 16 + g + 8 * r;
            if (row >= qn) continue;
            float* dst = dq_accum_row(p, b, p.qrows.token(q0 + row), h, D) + wg * DQN + 2 * t;
#pragma unroll
            for (int j = 0; j < DQN / 8; j++)
                atomicAdd(reinterpret_cast<float2*>(dst + j * 8), make_float2(dq[0][j][2 * r], dq[0][j][2 * r + 1]));
        }
    }

#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = key_row0 + g + 8 * r;
        if (row >= p.krows.len) continue;
        const size_t at = ((size_t)b * p.kv_tokens + p.krows.token(row)) * p.kv_stride + h * D + 2 * t;
#pragma unroll
        for (int db = 0; db < DB; db++) {
            store_grad2(p.dk + at + db * 8, dk[db][2 * r], dk[db][2 * r + 1], Schedule::kMayMerge && p.accumulate);
            store_grad2(p.dv + at + db * 8, dv[db][2 * r], dv[db][2 * r + 1], Schedule::kMayMerge && p.accumulate);
        }
    }
}

}  // namespace flash
