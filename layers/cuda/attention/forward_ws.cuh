// Flash attention forward, warp-specialized (the rung after forward_wgmma.cuh, in the manner of
// FlashAttention-3): one producer warpgroup and two consumer warpgroups per block.
//  - The producer (one thread) loads Q once and streams K and V tiles with the Tensor Memory
//    Accelerator into a STAGES-deep ring of shared-memory buffers; mbarriers say when a buffer is
//    full (the copy's bytes landed) and when it is empty again (all 8 consumer warps are done).
//    It gives most of its registers to the consumers (setmaxnreg).
//  - Each consumer warpgroup owns 64 of the block's 128 query rows and runs the flash loop on
//    wgmma. Inside a warpgroup, the next tile's S = Q K^T and this tile's O += P V are issued
//    together, so the softmax of the next tile runs while the tensor cores do P V.
//  - Across the two warpgroups, named barriers take turns ("ping-pong"): one issues its matrix
//    products while the other does its softmax, so the tensor cores rarely wait for exponentials.
// It serves dense rows read in place at unit step (the one-sided dense launch: DenseSchedule);
// other launches run on forward_wgmma.cuh (launch_template.cuh, fwd_ws). Masks, the softmax
// update and the epilogue are the other kernels' (masks.cuh, softmax.cuh, store_output).
#pragma once
#include "layers/cuda/attention/forward_wgmma.cuh"
#include "layers/cuda/attention/softmax.cuh"
#include "layers/cuda/attention/tma.cuh"

namespace flash {

constexpr int kWsThreads = 384;      // producer warpgroup + 2 consumer warpgroups
constexpr int kWsBM = 128;           // query rows per block (64 per consumer warpgroup)
constexpr int kWsSchedBarrier = 1;   // named barriers 1 and 2: the consumers' turns
constexpr int kWsProducerRegs = 40;  // 128 x 40 + 256 x 232 <= 65536 registers per SM
constexpr int kWsConsumerRegs = 232;

template <int D, int BN, int STAGES>
constexpr int forward_ws_smem_bytes() {
    return (kWsBM * D + 2 * STAGES * BN * D) * 2 + 1024;  // Q, K and V stages; slack to align to 1024
}

// The launches it serves: dense, one-sided, rows read at unit step from token `base` on (TMA
// addresses tokens by coordinate), results written, not merged.
inline bool forward_ws_serves(const Params& p) {
    return p.kind == AttnKind::Dense && !p.two_sided && p.seg_len == 0 && !p.accumulate && !p.o_f32 && p.qrows.step == 1 &&
           p.krows.step == 1;
}

__device__ __forceinline__ void wgmma_wait_one() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }

// S = Q K^T for one consumer warpgroup: (64, BN) from its 64 rows of sQ and the BN rows of Ks.
template <int D, int BN>
__device__ __forceinline__ void issue_qk(float (&s)[BN / 8][4], uint32_t sQ, uint32_t Ks, int cw) {
#pragma unroll
    for (int kc = 0; kc < D / 16; kc++) {
        const uint32_t koff = (kc & 3) * 32;
        const uint64_t da = sw128_desc(sQ + (kc >> 2) * kWsBM * 128 + cw * 64 * 128 + koff, 16, 1024);
        const uint64_t db = sw128_desc(Ks + (kc >> 2) * BN * 128 + koff, 16, 1024);
        wgmma_ss<BN>(s, da, db, kc > 0);
    }
}
// O += P V: P from registers (bf16 A fragments), V MN-major from shared memory.
template <int D, int BN>
__device__ __forceinline__ void issue_pv(float (&acc)[D / 8][4], const uint32_t (&pa)[BN / 16][4], uint32_t Vs) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) wgmma_rs<D>(acc, pa[kk], sw128_desc(Vs + kk * 16 * 128, BN * 128, 1024), 1);
}

template <int D, int BN, int STAGES, class Schedule>
__global__ void __launch_bounds__(kWsThreads, 1)
    attention_forward_ws_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                                const __grid_constant__ CUtensorMap tm_v, Params p) {
    constexpr int NB = BN / 8, DB = D / 8, DC = D / 64;
    constexpr uint32_t kTileK = BN * D * 2;  // bytes of one K (or V) stage
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) uint64_t bars[1 + 4 * STAGES];  // q_full, k_full[S], k_empty[S], v_full[S], v_empty[S]
    const uint32_t base = (smem_u32(smem) + 1023) & ~1023u;
    const uint32_t sQ = base;                        // [D/64][128][64]
    const uint32_t sK = sQ + kWsBM * D * 2;          // STAGES x [D/64][BN][64]
    const uint32_t sV = sK + STAGES * kTileK;        // STAGES x [D/64][BN][64]
    const uint32_t q_full = smem_u32(bars), k_full = q_full + 8, k_empty = k_full + 8 * STAGES,
                   v_full = k_empty + 8 * STAGES, v_empty = v_full + 8 * STAGES;

    int b, h, rank;
    resolve_block<Schedule>(p, b, h, rank);
    const int qtile = Schedule::query_tile_of_rank(p, rank);
    const int q0 = qtile * kWsBM, qn = min(kWsBM, p.qrows.len - q0);
    if (qn <= 0) return;
    const QueryTile qt = query_tile_info<kWsThreads>(p, b, q0, qn);  // every thread (a block reduction)
    const auto keys = Schedule::key_tiles(p, qt, BN);
    const int n = keys.count();

    if (threadIdx.x == 0) {
        mbar_init(q_full, 1);
        for (int s = 0; s < STAGES; s++) {
            mbar_init(k_full + 8 * s, 1);
            mbar_init(v_full + 8 * s, 1);
            mbar_init(k_empty + 8 * s, 8);  // one arrival per consumer warp
            mbar_init(v_empty + 8 * s, 8);
        }
        mbar_fence_init();
    }
    __syncthreads();

    const int wg = threadIdx.x >> 7;
    if (wg == 0) {
        // ---- Producer: Q once, then K and V tile by tile, each into the next free stage.
        regs_decrease<kWsProducerRegs>();
        if (threadIdx.x == 0 && n > 0) {
            tma_prefetch_map(&tm_k);
            tma_prefetch_map(&tm_v);
            mbar_arrive_expect_tx(q_full, kWsBM * D * 2);
#pragma unroll
            for (int c = 0; c < DC; c++) tma_load_3d(sQ + c * kWsBM * 128, &tm_q, h * D + 64 * c, p.qrows.base + q0, b, q_full);
            for (int it = 0; it < n; it++) {
                const int s = it % STAGES, use = it / STAGES;
                const int row = p.krows.base + keys.tile(it) * BN;
                if (use > 0) mbar_wait(k_empty + 8 * s, (use - 1) & 1);
                mbar_arrive_expect_tx(k_full + 8 * s, kTileK);
#pragma unroll
                for (int c = 0; c < DC; c++) tma_load_3d(sK + s * kTileK + c * BN * 128, &tm_k, h * D + 64 * c, row, b, k_full + 8 * s);
                if (use > 0) mbar_wait(v_empty + 8 * s, (use - 1) & 1);
                mbar_arrive_expect_tx(v_full + 8 * s, kTileK);
#pragma unroll
                for (int c = 0; c < DC; c++) tma_load_3d(sV + s * kTileK + c * BN * 128, &tm_v, h * D + 64 * c, row, b, v_full + 8 * s);
            }
        }
        return;
    }

    // ---- Consumers.
    regs_increase<kWsConsumerRegs>();
    const int cw = wg - 1;                                         // 0 or 1
    const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const int row0 = q0 + cw * 64 + warp * 16;                     // first row of the warp's 16-row slice
    float acc[DB][4] = {};
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    if (n > 0) {
        // Turns: warpgroup 0 goes first (warpgroup 1 gives it the first arrival). Each takes its
        // turn before issuing its products and hands the turn over right after, n + 1 times each;
        // warpgroup 1 skips its last hand-over, which nobody waits for.
        const int my_turn = kWsSchedBarrier + cw, other_turn = kWsSchedBarrier + 1 - cw;
        if (cw == 1) named_arrive(kWsSchedBarrier, 256);
        auto release = [&](uint32_t bar) {
            __syncwarp();
            if (lane == 0) mbar_arrive(bar);
        };
        auto mask_and_softmax = [&](float (&s)[1][NB][4], int it, float (&alpha)[2]) {
            const int k0 = keys.tile(it) * BN;
            const KeyTile kt = key_tile_info(p, k0, min(BN, p.krows.len - k0));
            const bool cut = keys.cut(it);
            if (cut || pair_needs_mask(p, qt, kt, BN)) mask_scores<1, NB, Schedule>(s, p, b, row0, k0, kt.n, h, cut);
            online_softmax_scores<NB>(s[0], m, l, alpha, p.scale_log2);
        };
        mbar_wait(q_full, 0);

        // Tile 0: S = Q K0^T, its softmax (the accumulator is still zero).
        float s[1][NB][4];
        uint32_t pa[BN / 16][4];
        float alpha[2];
        named_sync(my_turn, 256);
        mbar_wait(k_full, 0);
        pin<NB>(s[0]);
        wgmma_fence();
        issue_qk<D, BN>(s[0], sQ, sK, cw);
        wgmma_commit();
        named_arrive(other_turn, 256);
        wgmma_wait_all();
        pin<NB>(s[0]);
        release(k_empty);
        mask_and_softmax(s, 0, alpha);
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) scores_to_a<NB>(pa[kk], s[0], kk);

        for (int it = 1; it < n; it++) {
            const int st = it % STAGES, ph = (it / STAGES) & 1;
            const int sp = (it - 1) % STAGES, pph = ((it - 1) / STAGES) & 1;
            named_sync(my_turn, 256);
            mbar_wait(k_full + 8 * st, ph);
            pin<NB>(s[0]);
            pin<DB>(acc);
            pin<BN / 16>(pa);
            wgmma_fence();
            issue_qk<D, BN>(s[0], sQ, sK + st * kTileK, cw);  // S(it) = Q K(it)^T
            wgmma_commit();
            mbar_wait(v_full + 8 * sp, pph);
            issue_pv<D, BN>(acc, pa, sV + sp * kTileK);         // O += P(it-1) V(it-1)
            wgmma_commit();
            named_arrive(other_turn, 256);
            wgmma_wait_one();  // S(it) done; P V still running
            pin<NB>(s[0]);
            release(k_empty + 8 * st);
            mask_and_softmax(s, it, alpha);  // under P V
            wgmma_wait_all();
            pin<DB>(acc);
            pin<BN / 16>(pa);
            release(v_empty + 8 * sp);
            rescale_acc<DB>(acc, alpha);
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++) scores_to_a<NB>(pa[kk], s[0], kk);
        }

        // The last tile's O += P V.
        const int sl = (n - 1) % STAGES, lph = ((n - 1) / STAGES) & 1;
        named_sync(my_turn, 256);
        mbar_wait(v_full + 8 * sl, lph);
        pin<DB>(acc);
        pin<BN / 16>(pa);
        wgmma_fence();
        issue_pv<D, BN>(acc, pa, sV + sl * kTileK);
        wgmma_commit();
        if (cw == 0) named_arrive(other_turn, 256);
        wgmma_wait_all();
        pin<DB>(acc);
        pin<BN / 16>(pa);
        release(v_empty + 8 * sl);
    }
    store_output<D, false, false>(p, b, h, row0, acc, m, l);
}

}  // namespace flash
