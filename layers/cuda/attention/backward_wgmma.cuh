// Flash attention backward, dK/dV (+ atomic dQ) on Hopper's warpgroup MMA (wgmma, sm_90a): the
// algorithm of attention_backward_dkdv_kernel (backward_mma_sync.cuh) with each of the two
// warpgroups owning 64 keys (BN = 128) and every product a wgmma:
//   S^T = K Q^T, dP^T = V dO^T      A = K, V rows (smem, K-major), B = Q, dO (smem, K-major)
//   dV += P^T dO, dK += dS^T Q      A = P^T, dS^T from registers, B = dO, Q (smem, MN-major)
//   dQ (+)= dS K                    A = dS^T tile (smem, MN-major), B = K (smem, MN-major);
//                                   warpgroup w computes dQ columns [w*D/2, (w+1)*D/2) over all
//                                   128 keys and adds them to the fp32 accumulator.
// Tiles use the 128-byte-swizzled layout of forward_wgmma.cuh. The preprocess and dQ
// convert kernels are those of backward_mma_sync.cuh.
#pragma once
#include "layers/cuda/attention/backward_mma_sync.cuh"
#include "layers/cuda/attention/forward_wgmma.cuh"

namespace flash {

constexpr int kBwdWgBM = 64;  // queries per step: one 128-byte swizzle row of the dS^T tile

// The step functions below take a step of QB * 8 queries (QB = 8 here; the warp-specialized
// backward also runs 16 at D = 64): S^T, dP^T and dS^T are (64 keys, 8 QB) per warpgroup, dS^T's
// tile in shared memory is [8 QB / 64][BN][64] (128-byte swizzled blocks of 64 queries), and dQ
// is QB / 8 m-tiles of 64 queries.

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
    load_tile_sw128_async<BM, D, NT>(sQ, p.q + (size_t)b * p.q_tokens * p.q_stride + h * D, p.q_stride, p.qrows, q0, qn);
    load_tile_sw128_async<BM, D, NT>(sdO, p.dout + (size_t)b * p.q_tokens * p.H * D + h * D, p.H * D, p.qrows, q0, qn);
    const size_t rowbase = ((size_t)b * p.H + h) * p.q_tokens;
    for (int i = threadIdx.x; i < BM; i += NT) {
        const bool ok = i < qn;  // past the end: L = delta = 0, harmless since Q = dO = 0 there
        const size_t at = rowbase + p.qrows.token(ok ? q0 + i : q0);
        cp_async_4(sL + i * 4, p.lse_log2 + at, ok);
        cp_async_4(sDelta + i * 4, p.delta + at, ok);
    }
}

// S^T = K Q^T and dP^T = V dO^T for the warpgroup that owns keys [wg*64, wg*64 + 64) of a
// block's 128: (64 keys, BM = 8 QB queries) from this step's Q and dO tiles, issued and committed
// as one group, not waited for (bwd_wg_step_dkdv_from_sdp waits).
template <int D, int QB>
__device__ __forceinline__ void bwd_wg_issue_sdp(float (&s)[1][QB][4], float (&dp)[1][QB][4], int wg, uint32_t sK, uint32_t sV,
                                                 uint32_t Qs, uint32_t dOs) {
    constexpr int BN = 128, BM = 8 * QB;
    pin<QB>(s[0]);
    pin<QB>(dp[0]);
    wgmma_fence();
#pragma unroll
    for (int kc = 0; kc < D / 16; kc++) {
        const uint32_t off = (kc & 3) * 32;
        const uint32_t arow = (kc >> 2) * BN * 128 + wg * 64 * 128 + off, brow = (kc >> 2) * BM * 128 + off;
        wgmma_ss<BM>(s[0], sw128_desc(sK + arow, 16, 1024), sw128_desc(Qs + brow, 16, 1024), kc > 0);
        wgmma_ss<BM>(dp[0], sw128_desc(sV + arow, 16, 1024), sw128_desc(dOs + brow, 16, 1024), kc > 0);
    }
    wgmma_commit();
}

// The rest of one backward step of that warpgroup (the wgmma kernel below and the
// warp-specialized one, backward_ws.cuh, run the same step; they differ in how tiles arrive and
// how the two warpgroups meet), once bwd_wg_issue_sdp issued S^T and dP^T into s and dp (the
// only products still pending). key_row0: the first key of the calling warp's 16-row slice; Qs,
// dOs, Ls, Deltas: this step's query tile; dSs: the block's dS^T tile. Waits for S^T and dP^T,
// computes P^T and dS^T (into the A fragments pa and dsa, and dS^T's rows into dSs for dQ), and
// issues dV += P^T dO, dK += dS^T Q (committed, not waited for: pa, dsa, dk and dv stay in use
// until the next wait).
template <int D, class Schedule, int QB, class Queries>
__device__ __forceinline__ void bwd_wg_step_dkdv_from_sdp(float (&s)[1][QB][4], float (&dp)[1][QB][4], const Params& p,
                                                          const Queries& queries, int it, const KeyTile& kt, int kn, int b,
                                                          int h, int wg, int key_row0, int q0, int qn, uint32_t Qs,
                                                          uint32_t dOs, uint32_t dSs, const float* Ls, const float* Deltas,
                                                          uint32_t (&pa)[QB / 2][4], uint32_t (&dsa)[QB / 2][4],
                                                          float (&dk)[D / 8][4], float (&dv)[D / 8][4]) {
    constexpr int BN = 128, BM = 8 * QB, DB = D / 8;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    // The query tile's L and first position, read while the products run (after the wait, their
    // latency stood between the products and the exponentials). A 128-query step's L (32
    // registers) would not fit beside S^T, dP^T, dK and dV: it is read after the wait.
    constexpr bool kEarlyL = QB <= 8;
    float Lq[QB][2];
    if constexpr (kEarlyL) load_query_cols<QB>(Lq, Ls);
    const int q_first_pos = query_first_pos(p, q0);
    wgmma_wait_all();
    pin<QB>(s[0]);
    pin<QB>(dp[0]);
    if constexpr (!kEarlyL) load_query_cols<QB>(Lq, Ls);

    // P^T = 2^(S^T scale_log2 - L_log2[query]) (masked: 0); dS^T = P^T (dP^T - delta) scale, in dp.
    probs_t_masked<1, QB, Schedule>(s, p, Lq, q_first_pos, kt, kn, BN, queries, it, b, key_row0, q0, qn, h);
    ds_t_from_probs<1, QB>(dp, s, dp, Deltas, p.scale);
#pragma unroll
    for (int kk = 0; kk < BM / 16; kk++) {
        scores_to_a<QB>(pa[kk], s[0], kk);
        scores_to_a<QB>(dsa[kk], dp[0], kk);
    }
    // dS^T to shared memory for dQ: rows = keys, 128-byte rows of 64 queries (chunk j of 8
    // queries in block j / 8).
#pragma unroll
    for (int j = 0; j < QB; j++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = wg * 64 + (warp & 3) * 16 + g + 8 * r;
            const uint32_t v = r == 0 ? dsa[j >> 1][(j & 1) * 2] : dsa[j >> 1][(j & 1) * 2 + 1];
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(dSs + sw128_offset<BN>(row, j) + 4 * t), "r"(v)
                         : "memory");
        }

    // dV += P^T dO, dK += dS^T Q (k over the BM queries, 16 at a time).
    pin<BM / 16>(pa);
    pin<BM / 16>(dsa);
    pin<DB>(dv);
    pin<DB>(dk);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BM / 16; kk++) {
        wgmma_rs<D>(dv, pa[kk], sw128_desc(dOs + kk * 16 * 128, BM * 128, 1024), 1);
        wgmma_rs<D>(dk, dsa[kk], sw128_desc(Qs + kk * 16 * 128, BM * 128, 1024), 1);
    }
    wgmma_commit();
}

// The whole step: S^T and dP^T issued, then the rest.
template <int D, class Schedule, int KQ, class Queries>
__device__ __forceinline__ void bwd_wg_step_dkdv(const Params& p, const Queries& queries, int it, const KeyTile& kt, int kn,
                                                 int b, int h, int wg, int key_row0, int q0, int qn, uint32_t sK, uint32_t sV,
                                                 uint32_t Qs, uint32_t dOs, uint32_t dSs, const float* Ls, const float* Deltas,
                                                 uint32_t (&pa)[KQ][4], uint32_t (&dsa)[KQ][4], float (&dk)[D / 8][4],
                                                 float (&dv)[D / 8][4]) {
    constexpr int QB = 2 * KQ;
    float s[1][QB][4], dp[1][QB][4];
    bwd_wg_issue_sdp<D>(s, dp, wg, sK, sV, Qs, dOs);
    bwd_wg_step_dkdv_from_sdp<D, Schedule>(s, dp, p, queries, it, kt, kn, b, h, wg, key_row0, q0, qn, Qs, dOs, dSs, Ls, Deltas,
                                           pa, dsa, dk, dv);
}

// dQ[:, wg*D/2 ..] = dS K over all 128 keys (both warpgroups' dS^T must be in dSs), issued and
// committed, not waited for: MQ m-tiles of 64 queries, m-tile mq from dS^T's block mq.
template <int D, int MQ>
__device__ __forceinline__ void bwd_wg_issue_dq(int wg, uint32_t sK, uint32_t dSs, float (&dq)[MQ][D / 16][4]) {
    constexpr int BN = 128, DQN = D / 2;
#pragma unroll
    for (int mq = 0; mq < MQ; mq++) pin<DQN / 8>(dq[mq]);
    wgmma_fence();
    // Column offset of this warpgroup's half of K: a whole 64-column block (D = 128) or the
    // upper 64 bytes of each 128-byte row (D = 64).
    const uint32_t kcol = D == 128 ? wg * BN * 128 : wg * 64;
#pragma unroll
    for (int mq = 0; mq < MQ; mq++)
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
            wgmma_ss_tt<DQN>(dq[mq], sw128_desc(dSs + mq * BN * 128 + kk * 16 * 128, BN * 128, 1024),
                             sw128_desc(sK + kcol + kk * 16 * 128, BN * 128, 1024), kk > 0);
    wgmma_commit();
}
// After the wait for dQ (and so for every product of the step before it): its registers and those
// dV, dK read or wrote are the compiler's again.
template <int D, int MQ, int KQ>
__device__ __forceinline__ void bwd_wg_pin_step(float (&dq)[MQ][D / 16][4], uint32_t (&pa)[KQ][4], uint32_t (&dsa)[KQ][4],
                                                float (&dk)[D / 8][4], float (&dv)[D / 8][4]) {
#pragma unroll
    for (int mq = 0; mq < MQ; mq++) pin<D / 16>(dq[mq]);
    pin<KQ>(pa);
    pin<KQ>(dsa);
    pin<D / 8>(dv);
    pin<D / 8>(dk);
}
// dQ issued and waited for; then every product of the step is done and pa, dsa, dk, dv are free.
template <int D, int MQ, int KQ>
__device__ __forceinline__ void bwd_wg_step_dq(int wg, uint32_t sK, uint32_t dSs, float (&dq)[MQ][D / 16][4],
                                               uint32_t (&pa)[KQ][4], uint32_t (&dsa)[KQ][4], float (&dk)[D / 8][4],
                                               float (&dv)[D / 8][4]) {
    bwd_wg_issue_dq<D>(wg, sK, dSs, dq);
    wgmma_wait_all();
    bwd_wg_pin_step<D>(dq, pa, dsa, dk, dv);
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
        load_tile_sw128_async<BN, D, NT>(sK, p.k + (size_t)b * p.kv_tokens * p.kv_stride + h * D, p.kv_stride,
                                         p.krows, k0, kn);
        load_tile_sw128_async<BN, D, NT>(sV, p.v + (size_t)b * p.kv_tokens * p.kv_stride + h * D, p.kv_stride,
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
        bwd_wg_step_dkdv<D, Schedule>(p, queries, it, kt, kn, b, h, wg, key_row0, q0, qn, sK, sV, Qs, dOs, sdS, Ls, Deltas, pa,
                                      dsa, dk, dv);

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
