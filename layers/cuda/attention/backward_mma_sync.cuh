// Flash attention backward on tensor cores (FlashAttention-2 structure), in up to four kernels:
//  1. attention_backward_preprocess_kernel: delta = rowsum(dO * O), L in the log2 domain, and
//     (atomic variant) the fp32 dQ accumulator zeroed;
//  2. attention_backward_dkdv_kernel: one block per (key tile, b, h) walks its query tiles,
//     recomputes P^T from L, and accumulates dK, dV in registers; in the atomic variant it also
//     adds dS K into the fp32 dQ accumulator;
//  3a. (atomic) attention_backward_dq_convert_kernel: dQ accumulator -> bf16 dq;
//  3b. (deterministic) attention_backward_dq_kernel: one block per (query tile, b, h) recomputes
//     P and dS and accumulates dQ in registers: two more matrix products per tile, no atomics,
//     bit-identical results run to run (written to dq, or added into the fp32 accumulator).
// With dS = P * (dP - delta) * scale:  dV = P^T dO,  dK = dS^T Q,  dQ = dS K. Kernels 1 and 3a are
// backward_pre_post.cuh's (every rung runs them); 2 and 3b are this file's.
#pragma once
#include "layers/cuda/attention/backward_steps.cuh"
#include "layers/cuda/attention/epilogue.cuh"
#include "layers/cuda/attention/masks.cuh"
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/ptx.cuh"
#include "layers/cuda/attention/schedules.cuh"
#include "layers/cuda/attention/smem_tiles.cuh"
#include "layers/cuda/attention/softmax.cuh"
#include "layers/cuda/attention/tile_scheduler.cuh"

namespace flash {

template <int D, int MT, int NW, int BM, bool DQ_ATOMIC>
constexpr int backward_dkdv_smem_bytes() {
    // K, V (BN, D); 2 stages of Q, dO (BM, D); 2 stages of L, delta (BM) fp32; dS^T (BN, BM).
    return (2 * 16 * MT * NW * D + 4 * BM * D) * 2 + 4 * BM * 4 + (DQ_ATOMIC ? 16 * MT * NW * BM * 2 : 0);
}

// Issue the cp.async loads of one query tile (Q, dO, L, delta) into stage buffers.
template <int D, int BM, int NT>
__device__ __forceinline__ void load_query_side(const Params& p, int b, int h, int q0, uint32_t sQ,
                                                uint32_t sdO, uint32_t sL, uint32_t sDelta) {
    const int qn = min(BM, p.qrows.len - q0);
    load_tile_async<SwizzleMma, BM, D, NT>(sQ, p.q + (size_t)b * p.q_tokens * p.q_stride + h * D, p.q_stride, p.qrows, q0, qn);
    load_tile_async<SwizzleMma, BM, D, NT>(sdO, p.dout + (size_t)b * p.q_tokens * p.H * D + h * D, p.H * D, p.qrows, q0, qn);
    const size_t rowbase = ((size_t)b * p.H + h) * p.q_tokens;
    for (int i = threadIdx.x; i < BM; i += NT) {
        const bool ok = i < qn;  // past the end: L = delta = 0, harmless since Q = dO = 0 there
        const size_t at = rowbase + p.qrows.token(ok ? q0 + i : q0);
        cp_async_4(sL + i * 4, p.lse_log2 + at, ok);
        cp_async_4(sDelta + i * 4, p.delta + at, ok);
    }
}

// The atomic variant's dQ for one query tile: dS^T (in s) to shared memory, then dQ (BM, D) = dS K
// split over the warps, added into the fp32 accumulator.
template <int D, int MT, int NW, int BM>
__device__ __forceinline__ void dkdv_add_dq_atomic(const Params& p, int b, int h, int q0, int qn, const float (&s)[MT][BM / 8][4],
                                                   uint32_t sdS, uint32_t sK) {
    constexpr int BN = 16 * MT * NW, QB = BM / 8;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int j = 0; j < QB; j++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = warp * 16 * MT + mt * 16 + g + 8 * r, col = 8 * j + 2 * t;
                const uint32_t v = pack_bf16(s[mt][j][2 * r], s[mt][j][2 * r + 1]);
                asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sdS + swz<BM>(row, col >> 3) + (col & 7) * 2),
                             "r"(v)
                             : "memory");
            }
    __syncthreads();
    constexpr int QM = BM / 16;                         // m-tiles of dQ
    constexpr int WM = QM >= NW ? QM / NW : 1;          // m-tiles per warp
    constexpr int WARPS_M = QM / WM, DSPLIT = NW / WARPS_M, DW = D / DSPLIT;
    static_assert(WARPS_M * DSPLIT == NW && DW % 16 == 0, "dQ warp split");
    const int wm = warp % WARPS_M, wd = warp / WARPS_M;
    float dq[WM][DW / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
        uint32_t a[WM][4];
#pragma unroll
        for (int mt = 0; mt < WM; mt++) ld_a_t<BM>(a[mt], sdS, (wm * WM + mt) * 16, kk * 16);
#pragma unroll
        for (int np = 0; np < DW / 16; np++) {
            uint32_t bb[4];
            ld_b_kn<D>(bb, sK, kk * 16, wd * DW + np * 16);
#pragma unroll
            for (int mt = 0; mt < WM; mt++) {
                mma_16816(dq[mt][2 * np], a[mt], bb[0], bb[1]);
                mma_16816(dq[mt][2 * np + 1], a[mt], bb[2], bb[3]);
            }
        }
    }
#pragma unroll
    for (int mt = 0; mt < WM; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = (wm * WM + mt) * 16 + g + 8 * r;
            if (row >= qn) continue;
            float* dst = dq_accum_row(p, b, p.qrows.token(q0 + row), h, D) + wd * DW + 2 * t;
#pragma unroll
            for (int db = 0; db < DW / 8; db++)
                atomicAdd(reinterpret_cast<float2*>(dst + db * 8),
                          make_float2(dq[mt][db][2 * r], dq[mt][db][2 * r + 1]));
        }
}

// Epilogue of the dK, dV kernel: dK, dV overwrite (or add into) their slices of the dQKV buffer:
// every key row belongs to one block of the launch. key_row0: the warp's first key row.
template <int D, int MT, class Schedule>
__device__ __forceinline__ void dkdv_store(const Params& p, int b, int h, int key_row0, const float (&dk)[MT][D / 8][4],
                                           const float (&dv)[MT][D / 8][4]) {
    constexpr int DB = D / 8;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = key_row0 + mt * 16 + g + 8 * r;
            if (row >= p.krows.len) continue;
            const size_t at = ((size_t)b * p.kv_tokens + p.krows.token(row)) * p.kv_stride + h * D + 2 * t;
#pragma unroll
            for (int db = 0; db < DB; db++) {
                store_grad2(p.dk + at + db * 8, dk[mt][db][2 * r], dk[mt][db][2 * r + 1], Schedule::kMayMerge && p.accumulate);
                store_grad2(p.dv + at + db * 8, dv[mt][db][2 * r], dv[mt][db][2 * r + 1], Schedule::kMayMerge && p.accumulate);
            }
        }
}

// Block: NW warps, each owning MT m-tiles of 16 KEYS (BN = 16*MT*NW keys), walking query tiles
// of BM rows. The warp computes the transposed products (keys as rows) so that P^T and dS^T
// come out of the MMAs already in the A-operand layout of dV += P^T dO and dK += dS^T Q.
template <int D, int MT, int NW, int BM, bool DQ_ATOMIC, class Schedule>
__global__ void __launch_bounds__(NW * 32, 1) attention_backward_dkdv_kernel(Params p) {
    constexpr int NT = NW * 32, BN = 16 * MT * NW;
    constexpr int QB = BM / 8;  // 8-column blocks (queries) of the transposed score tile
    constexpr int DB = D / 8;
    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t sK = smem_u32(smem);          // (BN, D)
    const uint32_t sV = sK + BN * D * 2;         // (BN, D)
    const uint32_t sQ = sV + BN * D * 2;         // 2 x (BM, D)
    const uint32_t sdO = sQ + 2 * BM * D * 2;    // 2 x (BM, D)
    const uint32_t sL = sdO + 2 * BM * D * 2;    // 2 x (BM) fp32, log2 domain
    const uint32_t sDelta = sL + 2 * BM * 4;     // 2 x (BM) fp32
    const uint32_t sdS = sDelta + 2 * BM * 4;    // (BN, BM) bf16: dS^T, atomic variant only
    const float* fL = reinterpret_cast<const float*>(smem + (sL - sK));
    const float* fDelta = reinterpret_cast<const float*>(smem + (sDelta - sK));

    int b, h, rank;
    resolve_block<Schedule>(p, b, h, rank);
    const int ktile = Schedule::key_tile_of_rank(p, rank);  // the longest query lists start first
    const int warp = threadIdx.x >> 5;
    const int k0 = ktile * BN, kn = min(BN, p.krows.len - k0);
    if (kn <= 0) return;  // a dilated map shorter than the grid's longest
    const KeyTile kt = key_tile_info(p, k0, kn);
    const auto queries = Schedule::query_tiles(p, kt, BM);
    const int n = queries.count();
    const bf16* kbase = p.k + (size_t)b * p.kv_tokens * p.kv_stride + h * D;
    const bf16* vbase = p.v + (size_t)b * p.kv_tokens * p.kv_stride + h * D;

    float dk[MT][DB][4] = {}, dv[MT][DB][4] = {};
    // Prologue: K, V and the first query tile on their way.
    if (n > 0) {
        load_tile_async<SwizzleMma, BN, D, NT>(sK, kbase, p.kv_stride, p.krows, k0, kn);
        load_tile_async<SwizzleMma, BN, D, NT>(sV, vbase, p.kv_stride, p.krows, k0, kn);
        load_query_side<D, BM, NT>(p, b, h, queries.tile(0) * BM, sQ, sdO, sL, sDelta);
        cp_async_commit();
    }
    // Main loop: one query tile a step, the next one loading meanwhile.
    for (int it = 0; it < n; it++) {
        cp_async_wait_all();
        __syncthreads();  // tile `it` landed; every warp is done with the other stage and with dS^T
        if (it + 1 < n) {
            const int st = (it + 1) & 1;
            load_query_side<D, BM, NT>(p, b, h, queries.tile(it + 1) * BM, sQ + st * BM * D * 2,
                                       sdO + st * BM * D * 2, sL + st * BM * 4, sDelta + st * BM * 4);
            cp_async_commit();
        }
        const int st = it & 1;
        const uint32_t Qs = sQ + st * BM * D * 2, dOs = sdO + st * BM * D * 2;
        const float* Ls = fL + st * BM;
        const float* Deltas = fDelta + st * BM;
        const int q0 = queries.tile(it) * BM, qn = min(BM, p.qrows.len - q0);

        // S^T = K Q^T, (16*MT keys, BM queries) per warp.
        float s[MT][QB][4] = {};
        mma_rows_times_tile_t<MT, QB, D>(s, sK, warp * 16 * MT, Qs);
        // dP^T = V dO^T, issued before the exponentials so the tensor cores have independent work.
        float dp[MT][QB][4] = {};
        mma_rows_times_tile_t<MT, QB, D>(dp, sV, warp * 16 * MT, dOs);
        // P^T = 2^(S^T scale_log2 - L_log2[query]); masked pairs 0.
        float Lq[QB][2];
        load_query_cols<QB>(Lq, Ls);
        probs_t_masked<MT, QB, Schedule>(s, p, Lq, query_first_pos(p, q0), query_rows_doc_max_warp(p, b, q0, qn), kt, kn,
                                         BN, queries, it, b, k0 + warp * 16 * MT, q0, qn, h);
        // dV += P^T dO
        mma_probs_times_tile<MT, QB, DB, D>(dv, s, dOs);
        // dS^T = P^T (dP^T - delta[query]) scale, kept in s.
        ds_t_from_probs<MT, QB>(s, s, dp, Deltas, p.scale);
        // dK += dS^T Q
        mma_probs_times_tile<MT, QB, DB, D>(dk, s, Qs);
        if constexpr (DQ_ATOMIC) dkdv_add_dq_atomic<D, MT, NW, BM>(p, b, h, q0, qn, s, sdS, sK);
    }

    // Epilogue: dK, dV into their slices.
    dkdv_store<D, MT, Schedule>(p, b, h, k0 + warp * 16 * MT, dk, dv);
}

template <int D, int MT, int NW, int BN>
constexpr int backward_dq_smem_bytes() {
    return (2 * 16 * MT * NW * D + 4 * BN * D) * 2;  // Q, dO (BM, D); 2 stages of K, V (BN, D)
}

// Deterministic dQ: the forward's structure (query tile walks key tiles), with P recomputed
// from L and dS = P (dO V^T - delta) scale; dQ accumulates in registers.
template <int D, int MT, int NW, int BN, class Schedule>
__global__ void __launch_bounds__(NW * 32, 1) attention_backward_dq_kernel(Params p) {
    constexpr int NT = NW * 32, BM = 16 * MT * NW;
    constexpr int NB = BN / 8, DB = D / 8;
    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t sQ = smem_u32(smem);          // (BM, D)
    const uint32_t sdO = sQ + BM * D * 2;        // (BM, D)
    const uint32_t sK = sdO + BM * D * 2;        // 2 x (BN, D)
    const uint32_t sV = sK + 2 * BN * D * 2;     // 2 x (BN, D)

    int b, h, rank;
    resolve_block<Schedule>(p, b, h, rank);
    const int qtile = Schedule::query_tile_of_rank(p, rank, gridDim.y);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int q0 = qtile * BM, qn = min(BM, p.qrows.len - q0);
    if (qn <= 0) return;  // a dilated map shorter than the grid's longest
    const QueryTile qt = query_tile_info<NT>(p, b, q0, qn);
    const auto keys = Schedule::key_tiles(p, qt, BN);
    const int n = keys.count();
    const bf16* kbase = p.k + (size_t)b * p.kv_tokens * p.kv_stride + h * D;
    const bf16* vbase = p.v + (size_t)b * p.kv_tokens * p.kv_stride + h * D;

    // Prologue: the rows' L and delta in registers; Q, dO and the first K, V tile on their way.
    float Lr[MT][2], dl[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = q0 + warp * 16 * MT + mt * 16 + g + 8 * r;
            const bool ok = row < p.qrows.len;
            const size_t li = ((size_t)b * p.H + h) * p.q_tokens + p.qrows.token(ok ? row : q0);
            Lr[mt][r] = ok ? p.lse_log2[li] : INFINITY;
            dl[mt][r] = ok ? p.delta[li] : 0.f;
        }

    float dq[MT][DB][4] = {};
    if (n > 0) {
        load_tile_async<SwizzleMma, BM, D, NT>(sQ, p.q + (size_t)b * p.q_tokens * p.q_stride + h * D, p.q_stride, p.qrows, q0, qn);
        load_tile_async<SwizzleMma, BM, D, NT>(sdO, p.dout + (size_t)b * p.q_tokens * p.H * D + h * D, p.H * D, p.qrows, q0, qn);
        load_kv_tile_async<BN, D, NT>(sK, sV, kbase, vbase, p, keys.tile(0) * BN);
        cp_async_commit();
    }
    // Main loop: one key tile a step, the next one loading meanwhile.
    for (int it = 0; it < n; it++) {
        cp_async_wait_all();
        __syncthreads();
        if (it + 1 < n) {
            const int st = (it + 1) & 1;
            load_kv_tile_async<BN, D, NT>(sK + st * BN * D * 2, sV + st * BN * D * 2, kbase, vbase, p, keys.tile(it + 1) * BN);
            cp_async_commit();
        }
        const uint32_t Ks = sK + (it & 1) * BN * D * 2, Vs = sV + (it & 1) * BN * D * 2;
        const int k0 = keys.tile(it) * BN;
        const KeyTile kt = key_tile_info(p, k0, min(BN, p.krows.len - k0));

        // S = Q K^T and dP = dO V^T, (16*MT, BN) each.
        float s[MT][NB][4] = {}, dp[MT][NB][4] = {};
        mma_rows_times_tile_t2<MT, NB, D>(s, sQ, Ks, dp, sdO, Vs, warp * 16 * MT);
        mask_scores_where_needed<MT, NB, Schedule>(s, p, qt, kt, BN, keys.cut(it), b, q0 + warp * 16 * MT, h);
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int j = 0; j < NB; j++)
#pragma unroll
                for (int r = 0; r < 2; r++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const float pr = ex2(fmaf(s[mt][j][2 * r + e], p.scale_log2, -Lr[mt][r]));
                        s[mt][j][2 * r + e] = pr * (dp[mt][j][2 * r + e] - dl[mt][r]) * p.scale;
                    }
        // dQ += dS K
        mma_probs_times_tile<MT, NB, DB, D>(dq, s, Ks);
    }

    // Epilogue: into dq (bf16), or, when dq is null (the two-sided pieces: a ring adds several key blocks'
    // dQ before rounding once), added into the fp32 accumulator: a plain read-add-write, since
    // every query row belongs to one block of the launch and launches are ordered.
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = q0 + warp * 16 * MT + mt * 16 + g + 8 * r;
            if (row >= p.qrows.len) continue;
            if (p.dq == nullptr) {
                float* acc = dq_accum_row(p, b, p.qrows.token(row), h, D) + 2 * t;
#pragma unroll
                for (int db = 0; db < DB; db++) {
                    float2* at = reinterpret_cast<float2*>(acc + db * 8);
                    const float2 o = *at;
                    *at = make_float2(o.x + dq[mt][db][2 * r], o.y + dq[mt][db][2 * r + 1]);
                }
                continue;
            }
            bf16* dst = p.dq + ((size_t)b * p.q_tokens + p.qrows.token(row)) * p.q_stride + h * D + 2 * t;
#pragma unroll
            for (int db = 0; db < DB; db++) store_grad2(dst + db * 8, dq[mt][db][2 * r], dq[mt][db][2 * r + 1], Schedule::kMayMerge && p.accumulate);
        }
}

}  // namespace flash
