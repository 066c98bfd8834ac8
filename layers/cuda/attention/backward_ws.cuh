// Flash attention backward, warp-specialized (the rung after backward_wgmma.cuh, in the manner of
// FlashAttention-3's backward): one producer warpgroup and two consumer warpgroups per block of
// 128 keys, stepping through query tiles of BM rows (128 at D = 64, 64 at D = 128, where the
// step's products would not fit the registers).
//  - The producer's first warp loads K and V once with the Tensor Memory Accelerator, then, query
//    tile by query tile, Q and dO by TMA and L, delta by its 32 lanes into a STAGES-deep ring of
//    shared-memory buffers; mbarriers say when a stage is full (the TMA bytes landed and every
//    lane stored its L, delta) and when it is empty again (all 256 consumer threads are done).
//    It gives most of its registers to the consumers (setmaxnreg).
//  - Each consumer warpgroup owns 64 of the block's keys and runs the wgmma step (backward_steps.cuh) on
//    them: S^T, dP^T, P^T, dS^T, dV += P^T dO, dK += dS^T Q, then its half of dQ's columns
//    = dS K over all 128 keys, added into the fp32 accumulator through shared memory (128-byte
//    swizzled boxes of 32 columns), one thread issuing a TMA reduce-add per box; with 64-query
//    steps at D = 64 (backward variant 4) with float2 atomics (bws_dq_by_tma says why).
//  - The consumers never wait for loads at a block barrier; the one barrier left in a step is the
//    two consumers' (dQ reads both halves of dS^T), and dS^T is double-buffered so that the next
//    step's writes need no second one.
// It serves the launches forward_ws.cuh serves (every pattern, one-sided or two-sided: ring
// steps and KV-cache blocks too), dK and dV written or merged; what TMA cannot read runs
// backward_wgmma.cuh (launch_template.cuh, launch_backward_dkdv_ws).
#pragma once
#include "layers/cuda/attention/backward_steps.cuh"
#include "layers/cuda/attention/epilogue.cuh"
#include "layers/cuda/attention/masks.cuh"
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/schedules.cuh"
#include "layers/cuda/attention/smem_tiles.cuh"
#include "layers/cuda/attention/softmax.cuh"
#include "layers/cuda/attention/tile_scheduler.cuh"
#include "layers/cuda/attention/tma.cuh"
#include "layers/cuda/attention/tma_rows.cuh"
#include "layers/cuda/attention/wgmma.cuh"

namespace flash {

constexpr int kBwsThreads = 384;       // producer warpgroup + 2 consumer warpgroups
constexpr int kBwsBN = 128;            // keys per block (64 per consumer warpgroup)
constexpr int kBwsProducerRegs = 24;   // 128 x 24 + 256 x 240 <= 65536 registers per SM
constexpr int kBwsConsumerRegs = 240;
constexpr int kBwsDsBarrier = 1;       // named barrier: both consumers' dS^T in place
constexpr int kBwsDqBarrier = 2;       // named barriers 2, 3: a consumer's dQ block in place

// dQ by TMA reduce-adds at D = 128 and with 128-query steps, by atomics at D = 64 with 64-query
// steps: the boxes beat the atomics except with 64-query steps, where a step is half as long and
// the warpgroup barrier before the adds costs more (see notes/fa3-speed.md, dQ by reduce-add).
template <int D, int BM>
constexpr bool bws_dq_by_tma() { return D == 128 || BM == 128; }

// The next step's S^T and dP^T issued before this step's dQ is waited for, at D = 64 with 64
// queries a step: they run under the dQ adds and the step's set-up. At D = 128, or with 128
// queries a step, the two live tiles would not fit the consumer's registers beside dK and dV.
template <int D, int BM>
constexpr bool bws_overlap_sdp() { return D == 64 && BM == 64; }

template <int D, int STAGES, int BM>
constexpr int backward_ws_smem_bytes() {
    constexpr int BN = kBwsBN;
    // K, V (BN, D); STAGES x Q, dO (BM, D); 2 x dS^T (BN, BM); STAGES x L, delta (BM) fp32; dQ
    // (BM, D) fp32 when added by TMA; slack to align to 1024 (twice with dQ).
    return (2 * BN * D + 2 * STAGES * BM * D + 2 * BN * BM) * 2 + 2 * STAGES * BM * 4 +
           (bws_dq_by_tma<D, BM>() ? BM * D * 4 + 1024 : 0) + 1024;
}

// The launches it serves: ws_serves's (forward_ws.cuh: every pattern, one-sided or two-sided,
// a dilated branch's rows at its step), with dQ gathered in the fp32 accumulator (reduce-add boxes
// at the rows' step, or atomics: bws_dq_by_tma) and dK, dV written or, where the schedule may
// merge and the launch asks (an earlier branch, an earlier key block), added.
// Not a branch past step 8: read through folded maps (tma_rows.cuh: ws_fold) it is slower than
// the wgmma kernel on such branches (e.g. (32768, 12)), whose short walks (11 query tiles a key
// tile) the latter's two blocks per SM hide better (see notes/training.md, the dilated backward).
inline bool backward_ws_serves(const Params& p) {
    return ws_serves(p) && (p.seqs.len == 0 || p.seqs.step <= kWsMaxStep) && p.dq_accum != nullptr;
}

template <int D, int STAGES, int BM, class Schedule>
__global__ void __launch_bounds__(kBwsThreads, 1)
    attention_backward_dkdv_ws_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                                      const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_do,
                                      const __grid_constant__ CUtensorMap tm_dq, Params p) {
    constexpr int BN = kBwsBN, DB = D / 8, DQN = D / 2, MQ = BM / 64;
    constexpr bool kDqTma = bws_dq_by_tma<D, BM>();  // a dilated branch's rows: boxes at its step
    static_assert(BM == 64 || BM == 128, "a step is one or two 64-query blocks of dS^T");
    constexpr bool kOverlap = bws_overlap_sdp<D, BM>();
    constexpr uint32_t kTileQ = BM * D * 2;  // bytes of one Q (or dO) stage
    // Prologue: shared memory's layout, the block's key tile and its query tiles, the barriers.
    // (One body rather than helpers: split into steps this kernel spilled more registers and ran
    // its dilated backward slower; notes/code-explains-itself.md.)
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) uint64_t bars[1 + 2 * STAGES];
    __shared__ int doc_max_of_stage[STAGES];  // with documents: the largest start among the tile's rows
    const uint32_t base = (smem_u32(smem) + 1023) & ~1023u;
    const uint32_t sK = base;                     // [D/64][BN][64]
    const uint32_t sV = sK + BN * D * 2;          // [D/64][BN][64]
    const uint32_t sQ = sV + BN * D * 2;          // STAGES x [D/64][BM][64]
    const uint32_t sdO = sQ + STAGES * kTileQ;    // STAGES x [D/64][BM][64]
    const uint32_t sdS = sdO + STAGES * kTileQ;   // 2 x [BN][BM]: dS^T, keys as rows
    const uint32_t sL = sdS + 2 * BN * BM * 2;    // STAGES x (BM) fp32, log2 domain
    const uint32_t sDelta = sL + STAGES * BM * 4; // STAGES x (BM) fp32
    const uint32_t sdQ = (sDelta + STAGES * BM * 4 + 1023) & ~1023u;  // 2 x [D/64][BM][32] fp32, a half per consumer
    const float* fL = reinterpret_cast<const float*>(smem + (sL - smem_u32(smem)));
    const float* fDelta = reinterpret_cast<const float*>(smem + (sDelta - smem_u32(smem)));
    const uint32_t kv_full = smem_u32(bars), q_full = kv_full + 8, q_empty = q_full + 8 * STAGES;  // stage s at + 8 s

    int b, h, rank;
    resolve_block<Schedule, true>(p, b, h, rank);
    const int k0 = Schedule::key_tile_of_rank(p, rank) * BN, kn = min(BN, p.krows.len - k0);
    if (kn <= 0) return;
    const KeyTile kt = key_tile_info(p, k0, kn);
    const auto queries = Schedule::query_tiles(p, kt, BM);
    const int n = queries.count();
    if (threadIdx.x == 0) {
        mbar_init(kv_full, 1);
        for (int s = 0; s < STAGES; s++) {
            mbar_init(q_full + 8 * s, 32);  // the producer warp's lanes (lane 0 also announces the TMA bytes)
            mbar_init(q_empty + 8 * s, 256);  // every consumer thread (each read the stage's L, delta)
        }
        mbar_fence_init();
    }
    __syncthreads();

    const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if (wg == 0) {  // producer: warp 0, its own main loop filling the stages
        regs_decrease<kBwsProducerRegs>();
        if (warp != 0 || n == 0) return;
        if (lane == 0) {
            tma_prefetch_map(&tm_q);
            tma_prefetch_map(&tm_do);
            mbar_arrive_expect_tx(kv_full, 2 * BN * D * 2);
            ws_load_rows<D, Schedule::kPerBlockMaps>(sK, &tm_k, p.krows, k0, BN, h, b, kv_full);
            ws_load_rows<D, Schedule::kPerBlockMaps>(sV, &tm_v, p.krows, k0, BN, h, b, kv_full);
        }
        const size_t rowbase = ((size_t)b * p.H + h) * p.q_tokens;
        float* Lw = reinterpret_cast<float*>(smem + (sL - smem_u32(smem)));
        float* Dw = reinterpret_cast<float*>(smem + (sDelta - smem_u32(smem)));
        for (int it = 0; it < n; it++) {
            const int s = it % STAGES, use = it / STAGES;
            const int q0 = queries.tile(it) * BM, qn = min(BM, p.qrows.len - q0);
            // L and delta of the tile's rows, loaded before the wait for the stage so that their
            // latency hides under it; past the last query L = +inf, so P = 0 there, and dS = 0
            // whatever the rows the TMA copied past it hold.
            float Lr[BM / 32], Dr[BM / 32];
#pragma unroll
            for (int i = 0; i < BM / 32; i++) {
                const int r = lane + 32 * i;
                const bool ok = r < qn;
                const size_t at = rowbase + p.qrows.token(ok ? q0 + r : q0);
                Lr[i] = ok ? __ldg(p.lse_log2 + at) : INFINITY;
                Dr[i] = ok ? __ldg(p.delta + at) : 0.f;
            }
            // With documents, the consumers skip the element masks of a step no document cuts
            // (docs_cut): the tile's largest document start, found here off their path.
            const int doc_max = query_rows_doc_max_warp(p, b, q0, qn);
            if (use > 0) mbar_wait(q_empty + 8 * s, (use - 1) & 1);
            // Q and dO first: their copies run while the lanes store L and delta.
            if (lane == 0) {
                mbar_expect_tx(q_full + 8 * s, 2 * kTileQ);
                ws_load_rows<D, Schedule::kPerBlockMaps>(sQ + s * kTileQ, &tm_q, p.qrows, q0, BM, h, b, q_full + 8 * s);
                ws_load_rows<D, Schedule::kPerBlockMaps>(sdO + s * kTileQ, &tm_do, p.qrows, q0, BM, h, b, q_full + 8 * s);
            }
#pragma unroll
            for (int i = 0; i < BM / 32; i++) {
                Lw[s * BM + lane + 32 * i] = Lr[i];
                Dw[s * BM + lane + 32 * i] = Dr[i];
            }
            if (lane == 0) doc_max_of_stage[s] = doc_max;
            mbar_arrive(q_full + 8 * s);  // every lane, releasing its L, delta (lane 0: doc_max) stores
        }
        return;
    }

    regs_increase<kBwsConsumerRegs>();
    const int cw = wg - 1;                              // keys [cw*64, cw*64 + 64) of the block
    const int key_row0 = k0 + cw * 64 + warp * 16;      // first key of the warp's 16-row slice
    float dk[DB][4] = {}, dv[DB][4] = {};
    // The step's first products, S^T and dP^T: at D = 64 the next step's are issued before this
    // step's dQ is waited for, so that they run under its adds (bws_overlap_sdp).
    auto issue_sdp = [&](float (&s)[1][BM / 8][4], float (&dp)[1][BM / 8][4], int it) {
        const int st = it % STAGES;
        mbar_wait(q_full + 8 * st, (it / STAGES) & 1);
        bwd_wg_issue_sdp<D>(s, dp, cw, sK, sV, sQ + st * kTileQ, sdO + st * kTileQ);
    };
    // The dQ atomics' addresses: the accumulator offset of query row 0 and the stride between
    // rows (dq_accum_row's layout, epilogue.cuh: change both together), in registers for
    // the whole walk: rebuilt each step from Params, their constant loads would wait for
    // registers still held by the previous row's atomics.
    const long long dq_off0 = ((long long)b * p.accum_tokens + p.qrows.base - p.accum_tok0) * p.H * D + h * D + cw * DQN + 2 * t;
    const long long dq_row_stride = (long long)p.qrows.step * p.H * D;
    float s[1][BM / 8][4], dp[1][BM / 8][4];
    if (n > 0) {
        mbar_wait(kv_full, 0);
        if constexpr (kOverlap) issue_sdp(s, dp, 0);
    }
    // The consumers' main loop: per query tile, dK and dV accumulated, dQ added into fp32.
    for (int it = 0; it < n; it++) {
        const int st = it % STAGES;
        const uint32_t Qs = sQ + st * kTileQ, dOs = sdO + st * kTileQ, dSs = sdS + (it & 1) * BN * BM * 2;
        const float* Ls = fL + st * BM;
        const float* Deltas = fDelta + st * BM;
        const int q0 = queries.tile(it) * BM, qn = min(BM, p.qrows.len - q0);

        uint32_t pa[BM / 16][4], dsa[BM / 16][4];
        if constexpr (!kOverlap) issue_sdp(s, dp, it);
        bwd_wg_step_dkdv_from_sdp<D, Schedule>(s, dp, p, queries, it, kt, kn, b, h, cw, key_row0, q0, qn, Qs, dOs, dSs, Ls,
                                               Deltas, doc_max_of_stage[st], pa, dsa, dk, dv);

        // dQ[:, cw*D/2 ..] = dS K over all BN keys: both consumers' dS^T must be in place. (The
        // other buffer, written next step, was last read by the dQ of the step before, which
        // both consumers waited for before they met here.)
        // The consumer's first thread waits until its last step's reduce-adds have read the dQ
        // block, so that nobody writes it before they have (everyone passes the barrier after).
        if (kDqTma && (threadIdx.x & 127) == 0) bulk_wait_read_all();
        fence_proxy_async();
        named_sync(kBwsDsBarrier, 256);
        float dq[MQ][DQN / 8][4];
        bwd_wg_issue_dq<D>(cw, sK, dSs, dq);
        if (kOverlap && it + 1 < n) {
            issue_sdp(s, dp, it + 1);
            wgmma_wait_one();  // dV, dK and dQ done; the next S^T, dP^T still running
        } else {
            wgmma_wait_all();
        }
        bwd_wg_pin_step<D>(dq, pa, dsa, dk, dv);
        // Every read of this stage (Q, dO by the products, L, delta) is done: hand it back. Each
        // thread arrives for its own reads of L and delta (an arrival releases only the arriving
        // thread's accesses; compute-sanitizer's racecheck flagged one arrival per warp).
        mbar_arrive(q_empty + 8 * st);
        if constexpr (kDqTma) {
            // This consumer's (BM, D/2) block of dQ to shared memory as boxes of 32 columns (128-byte
            // rows, 16-byte chunks swizzled by the row), then its first thread adds each box into the
            // accumulator with one TMA reduce-add. Rows past the last query hold dS = 0, so they add 0.
            // A 64-bit store is served a half-warp (rows g = 0..3 or 4..7) at a time; with every lane
            // on the same 8 columns, rows g and g ^ 1 land in the same 32-byte slot of the swizzle
            // (two wavefronts where one would do). So the lanes of odd rows store column group j ^ 2
            // (16 columns away, in the same box) in the instruction where the even rows store j,
            // and j in the one where they store j ^ 2: the four rows of a half-warp fill four slots.
            static_assert(DQN % 32 == 0, "j ^ 2 stays in the box: whole boxes of 32 columns");
            const uint32_t dQs = sdQ + cw * BM * DQN * 4;
            const int jx = (g & 1) << 1;
#pragma unroll
            for (int mq = 0; mq < MQ; mq++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int row = mq * 64 + warp * 16 + g + 8 * r;
#pragma unroll
                    for (int j = 0; j < DQN / 8; j++) {
                        const int jl = j ^ jx;  // this lane's column group in this store
                        const float v0 = jx ? dq[mq][j ^ 2][2 * r] : dq[mq][j][2 * r];
                        const float v1 = jx ? dq[mq][j ^ 2][2 * r + 1] : dq[mq][j][2 * r + 1];
                        const int col = jl * 8 + 2 * t, box = col / 32, chunk = (col % 32) / 4;
                        const uint32_t at = dQs + box * BM * 128 + row * 128 + ((chunk ^ (row & 7)) << 4) + (col % 4) * 4;
                        asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at), "f"(v0), "f"(v1) : "memory");
                    }
                }
            fence_proxy_async();  // the stores (generic proxy) before the TMA reads them (async proxy)
            named_sync(kBwsDqBarrier + cw, 128);
            if ((threadIdx.x & 127) == 0) {
                // A dilated branch's rows at its step: boxes of R rows (ws_box_rows), those with
                // a query row (the rest would add zeros).
                const int R = Schedule::kPerBlockMaps ? min(ws_box_rows(p.qrows.step), BM) : BM;
#pragma unroll
                for (int box = 0; box < DQN / 32; box++)
                    for (int rb = 0; rb < qn; rb += R)
                        tma_reduce_add_3d(&tm_dq, dQs + box * BM * 128 + rb * 128, h * D + cw * DQN + 32 * box,
                                          p.qrows.token(q0 + rb) - p.accum_tok0, b);
                bulk_commit();
            }
        } else {
            float* const dst0 = p.dq_accum + dq_off0 + (q0 + warp * 16 + g) * dq_row_stride;  // row mq = r = 0
#pragma unroll
            for (int mq = 0; mq < MQ; mq++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int row = mq * 64 + warp * 16 + g + 8 * r;
                    if (row >= qn) continue;
                    float* const dst = dst0 + (mq * 64 + r * 8) * dq_row_stride;
#pragma unroll
                    for (int j = 0; j < DQN / 8; j++)
                        atomicAdd(reinterpret_cast<float2*>(dst + j * 8), make_float2(dq[mq][j][2 * r], dq[mq][j][2 * r + 1]));
                }
        }
    }

    if (kDqTma && (threadIdx.x & 127) == 0) bulk_wait_all();  // the adds read shared memory, which lives until the block ends

    // Epilogue: dK, dV written, or added into the branches before (a dilated branch after the first).
    const bool merge = Schedule::kMayMerge && p.accumulate;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = key_row0 + g + 8 * r;
        if (row >= p.krows.len) continue;
        const size_t at = ((size_t)b * p.kv_tokens + p.krows.token(row)) * p.kv_stride + h * D + 2 * t;
#pragma unroll
        for (int db = 0; db < DB; db++) {
            store_grad2(p.dk + at + db * 8, dk[db][2 * r], dk[db][2 * r + 1], merge);
            store_grad2(p.dv + at + db * 8, dv[db][2 * r], dv[db][2 * r + 1], merge);
        }
    }
}

}  // namespace flash
