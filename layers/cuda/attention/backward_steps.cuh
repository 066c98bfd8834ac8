// The pieces of a backward step that the kernels share. Every rung: the query tile's per-row
// values at a thread's columns (load_query_cols) and dS^T from P^T and dP^T (ds_t_from_probs).
// The wgmma rung and the warp-specialized one: one step of a warpgroup that owns 64 keys, on wgmma
// (bwd_wg_*): they differ only in how tiles arrive and how the two warpgroups meet.
// The bwd_wg_ step functions take a step of QB * 8 queries (QB = 8 here; the warp-specialized
// backward also runs 16 at D = 64): S^T, dP^T and dS^T are (64 keys, 8 QB) per warpgroup, dS^T's
// tile in shared memory is [8 QB / 64][BN][64] (128-byte swizzled blocks of 64 queries), and dQ
// is QB / 8 m-tiles of 64 queries.
#pragma once
#include "layers/cuda/attention/masks.cuh"
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/smem_tiles.cuh"
#include "layers/cuda/attention/softmax.cuh"
#include "layers/cuda/attention/wgmma.cuh"

namespace flash {

// A query tile's per-row values (L, delta) at this thread's columns 8 j + 2 t + e, from shared
// memory: read before a step's products are waited for, so that their latency hides under them.
template <int QB>
__device__ __forceinline__ void load_query_cols(float (&x)[QB][2], const float* src) {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int j = 0; j < QB; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) x[j][e] = src[8 * j + 2 * t + e];
}

// dS^T = P^T (dP^T - delta[query]) scale, element by element into ds (which may be P^T's or
// dP^T's own registers). Deltas: the query tile's rowsum(dO * O).
template <int MT, int QB>
__device__ __forceinline__ void ds_t_from_probs(float (&ds)[MT][QB][4], const float (&pt)[MT][QB][4],
                                                const float (&dpt)[MT][QB][4], const float* Deltas, float scale) {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int j = 0; j < QB; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const float dl = Deltas[8 * j + 2 * t + e];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) ds[mt][j][2 * r + e] = pt[mt][j][2 * r + e] * (dpt[mt][j][2 * r + e] - dl) * scale;
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
// dOs, Ls, Deltas, doc_max (the largest document start among its rows, query_rows_doc_max_warp):
// this step's query tile; dSs: the block's dS^T tile. Waits for S^T and dP^T,
// computes P^T and dS^T (into the A fragments pa and dsa, and dS^T's rows into dSs for dQ), and
// issues dV += P^T dO, dK += dS^T Q (committed, not waited for: pa, dsa, dk and dv stay in use
// until the next wait).
template <int D, class Schedule, int QB, class Queries>
__device__ __forceinline__ void bwd_wg_step_dkdv_from_sdp(float (&s)[1][QB][4], float (&dp)[1][QB][4], const Params& p,
                                                          const Queries& queries, int it, const KeyTile& kt, int kn, int b,
                                                          int h, int wg, int key_row0, int q0, int qn, uint32_t Qs,
                                                          uint32_t dOs, uint32_t dSs, const float* Ls, const float* Deltas,
                                                          int doc_max, uint32_t (&pa)[QB / 2][4], uint32_t (&dsa)[QB / 2][4],
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
    probs_t_masked<1, QB, Schedule>(s, p, Lq, q_first_pos, doc_max, kt, kn, BN, queries, it, b, key_row0, q0, qn, h);
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
                                                 int doc_max, uint32_t (&pa)[KQ][4], uint32_t (&dsa)[KQ][4],
                                                 float (&dk)[D / 8][4], float (&dv)[D / 8][4]) {
    constexpr int QB = 2 * KQ;
    float s[1][QB][4], dp[1][QB][4];
    bwd_wg_issue_sdp<D>(s, dp, wg, sK, sV, Qs, dOs);
    bwd_wg_step_dkdv_from_sdp<D, Schedule>(s, dp, p, queries, it, kt, kn, b, h, wg, key_row0, q0, qn, Qs, dOs, dSs, Ls, Deltas,
                                           doc_max, pa, dsa, dk, dv);
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

}  // namespace flash
