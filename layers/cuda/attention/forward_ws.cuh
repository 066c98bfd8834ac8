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
//  - For short walks (short rows, a dilated branch's segments, block-sparse lists), a persistent
//    kernel: one block per SM walks many query tiles (tile_scheduler.cuh), the producer
//    loading the next tile while the consumers finish this one, so prologues and epilogues hide
//    behind work. Long dense rows run a block per tile (there the persistent walk is slower).
//    Both kernels are the same per-tile producer and consumer code (ws_load_tile,
//    ws_consume_tile).
// It serves every pattern's launches, one-sided or two-sided (ring steps, KV-cache blocks), through
// each launch's own schedule (the one of AllSchedules that serves it, as every kernel family
// does): dense rows, block-sparse tile lists, the fixed pattern's computed tiles, and dilated
// branches, whose virtual sequences the TMA reads at their step (merged into the branches
// before; past a step of 8 through a 4-D view, tma_rows.cuh: ws_fold). Two-sided launches write
// or merge, into bf16 O or the fp32 O of a run of merges. What TMA cannot read (rows not 16-byte
// aligned, a dilation above 8 whose folds do not divide the tokens) runs on forward_wgmma.cuh
// (launch_template.cuh, launch_forward_ws). Masks, the softmax update and the epilogue are the
// other kernels' (masks.cuh, softmax.cuh, epilogue.cuh).
#pragma once
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

constexpr int kWsThreads = 384;      // producer warpgroup + 2 consumer warpgroups
constexpr int kWsBM = 128;           // query rows per block (64 per consumer warpgroup)
constexpr int kWsSchedBarrier = 1;   // named barriers 1 and 2: the consumers' turns
constexpr int kWsProducerRegs = 40;  // 128 x 40 + 256 x 232 <= 65536 registers per SM
constexpr int kWsConsumerRegs = 232;
constexpr int kWsPersistentMaxQueryTiles = 32;  // rows up to 4096: a block per SM walks the tiles

template <int D, int BN, int STAGES>
constexpr int forward_ws_smem_bytes() {
    return (kWsBM * D + 2 * STAGES * BN * D) * 2 + 1024;  // Q, K and V stages; slack to align to 1024
}

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

// The block's mbarriers (shared-memory addresses): Q full/empty, and full/empty per K and V stage.
struct WsBarriers {
    uint32_t q_full, q_empty, k_full, k_empty, v_full, v_empty;  // k_*, v_*: stage s at + 8 s
};
template <int STAGES>
__device__ __forceinline__ WsBarriers ws_barriers(uint64_t (&bars)[2 + 4 * STAGES]) {
    const uint32_t q_full = smem_u32(bars), k_full = q_full + 16;
    return WsBarriers{q_full, q_full + 8, k_full, k_full + 8 * STAGES, k_full + 16 * STAGES, k_full + 24 * STAGES};
}
// One thread sets them up; the block waits for it (before the warps part ways).
template <int STAGES>
__device__ __forceinline__ void ws_init_barriers(const WsBarriers& w) {
    if (threadIdx.x == 0) {
        mbar_init(w.q_full, 1);
        mbar_init(w.q_empty, 8);  // one arrival per consumer warp
        for (int s = 0; s < STAGES; s++) {
            mbar_init(w.k_full + 8 * s, 1);
            mbar_init(w.v_full + 8 * s, 1);
            mbar_init(w.k_empty + 8 * s, 8);
            mbar_init(w.v_empty + 8 * s, 8);
        }
        mbar_fence_init();
    }
    __syncthreads();
}

// Shared-memory buffers: Q [D/64][128][64], then STAGES x K and STAGES x V, each [D/64][BN][64].
template <int D, int BN, int STAGES>
struct WsSmem {
    static constexpr uint32_t kTileK = BN * D * 2;  // bytes of one K (or V) stage
    uint32_t q, k, v;
    __device__ explicit WsSmem(uint32_t base) : q(base), k(base + kWsBM * D * 2), v(base + kWsBM * D * 2 + STAGES * kTileK) {}
};

// Producer, one thread: a query tile's Q (once the consumers released the previous tile's, when
// qj > 0), then its n key tiles' K and V, each into the next free stage. g counts the K/V tiles
// the block loaded before this query tile, qj its query tiles with keys. STRIDED: the maps may
// have a step > 1 (a dilated branch); else they are unit-step (ws_serves) and every tile is one
// box per 64 columns, with no box loop in the producer's path.
template <int D, int BN, int STAGES, bool STRIDED, class Keys>
__device__ __forceinline__ void ws_load_tile(const CUtensorMap* tm_q, const CUtensorMap* tm_k, const CUtensorMap* tm_v,
                                             const Params& p, const Keys& keys, int n, int b, int h, int q0,
                                             const WsSmem<D, BN, STAGES>& sm, const WsBarriers& w, int g, int qj) {
    constexpr uint32_t kTileK = WsSmem<D, BN, STAGES>::kTileK;
    const int fold = STRIDED ? ws_fold_of(p) : 1;  // the maps' (launch_forward_ws made them with it)
    auto load_rows = [&](uint32_t dst, const CUtensorMap* tm, const RowMap& map, int r0, int rows, uint32_t bar) {
        ws_load_rows<D, STRIDED>(dst, tm, map, r0, rows, h, b, bar, fold);
    };
    if (qj > 0) mbar_wait(w.q_empty, (qj - 1) & 1);
    mbar_arrive_expect_tx(w.q_full, kWsBM * D * 2);
    load_rows(sm.q, tm_q, p.qrows, q0, kWsBM, w.q_full);
    for (int it = 0; it < n; it++) {
        const int s = (g + it) % STAGES, use = (g + it) / STAGES;
        const int row = keys.tile(it) * BN;
        if (use > 0) mbar_wait(w.k_empty + 8 * s, (use - 1) & 1);
        mbar_arrive_expect_tx(w.k_full + 8 * s, kTileK);
        load_rows(sm.k + s * kTileK, tm_k, p.krows, row, BN, w.k_full + 8 * s);
        if (use > 0) mbar_wait(w.v_empty + 8 * s, (use - 1) & 1);
        mbar_arrive_expect_tx(w.v_full + 8 * s, kTileK);
        load_rows(sm.v + s * kTileK, tm_v, p.krows, row, BN, w.v_full + 8 * s);
    }
}

// Consumer warpgroup cw (0 or 1), one query tile with n > 0 key tiles: the flash loop into acc, m,
// l (zero, -inf, 0 on entry). PERSISTENT: the block walks more tiles after this one; Q is handed
// back after its last use (the producer loads the next tile's Q into it), and the turns run on
// across tiles (below). Turns: warpgroup 0 goes first; each takes its turn before issuing its
// products and hands it over right after, n + 1 times each. Warpgroup 1's last hand-over, right
// after it issues its last P V, gives warpgroup 0 the next tile's first turn, so that warpgroup 0
// starts the next tile's Q K^T while warpgroup 1 finishes this tile's P V and writes its rows;
// that arrival, after the block's last tile, is taken by ws_turns_end. Warpgroup 1 gives the
// first turn of the block's first tile (qj == 0) at its start. A block per tile (not PERSISTENT)
// has one tile: warpgroup 1 gives the first turn and skips its last hand-over.
template <int D, int BN, int STAGES, bool PERSISTENT, class Schedule, class Keys>
__device__ __forceinline__ void ws_consume_tile(const Params& p, const QueryTile& qt, const Keys& keys, int n, int b, int h,
                                                int row0, int cw, const WsSmem<D, BN, STAGES>& sm, const WsBarriers& w,
                                                int g, int qj, float (&acc)[D / 8][4], float (&m)[2], float (&l)[2]) {
    constexpr int NB = BN / 8, DB = D / 8;
    constexpr uint32_t kTileK = WsSmem<D, BN, STAGES>::kTileK;
    const int lane = threadIdx.x & 31;
    const int my_turn = kWsSchedBarrier + cw, other_turn = kWsSchedBarrier + 1 - cw;
    auto release = [&](uint32_t bar, bool now = true) {  // one arrival per warp, after all its lanes
        __syncwarp();
        if (lane == 0 && now) mbar_arrive(bar);
    };
    // The key tile's rows, positions and cut are loaded here, after the wait for S: loading them
    // before the turn is slower (see notes/fa3-speed.md, the key tile's loads).
    auto mask_and_softmax = [&](float (&s)[1][NB][4], int it, float (&alpha)[2]) {
        const int k0 = keys.tile(it) * BN;
        const KeyTile kt = key_tile_info(p, k0, min(BN, p.krows.len - k0));
        mask_scores_where_needed<1, NB, Schedule>(s, p, qt, kt, BN, keys.cut(it), b, row0, h);
        online_softmax_scores<NB>(s[0], m, l, alpha, p.scale_log2);
    };
    if (cw == 1 && (!PERSISTENT || qj == 0)) named_arrive(kWsSchedBarrier, 256);
    mbar_wait(w.q_full, qj & 1);

    // Tile 0: S = Q K0^T, its softmax (the accumulator is still zero).
    float s[1][NB][4];
    uint32_t pa[BN / 16][4];
    float alpha[2];
    const int s0 = g % STAGES;
    named_sync(my_turn, 256);
    mbar_wait(w.k_full + 8 * s0, (g / STAGES) & 1);
    pin<NB>(s[0]);
    wgmma_fence();
    issue_qk<D, BN>(s[0], sm.q, sm.k + s0 * kTileK, cw);
    wgmma_commit();
    named_arrive(other_turn, 256);
    wgmma_wait_all();
    pin<NB>(s[0]);
    release(w.k_empty + 8 * s0);
    if constexpr (PERSISTENT) release(w.q_empty, n == 1);  // after the tile's last use of Q
    mask_and_softmax(s, 0, alpha);
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) scores_to_a<NB>(pa[kk], s[0], kk);

    for (int it = 1; it < n; it++) {
        const int st = (g + it) % STAGES, ph = ((g + it) / STAGES) & 1;
        const int sp = (g + it - 1) % STAGES, pph = ((g + it - 1) / STAGES) & 1;
        named_sync(my_turn, 256);
        mbar_wait(w.k_full + 8 * st, ph);
        pin<NB>(s[0]);
        pin<DB>(acc);
        pin<BN / 16>(pa);
        wgmma_fence();
        issue_qk<D, BN>(s[0], sm.q, sm.k + st * kTileK, cw);  // S(it) = Q K(it)^T
        wgmma_commit();
        mbar_wait(w.v_full + 8 * sp, pph);
        issue_pv<D, BN>(acc, pa, sm.v + sp * kTileK);  // O += P(it-1) V(it-1)
        wgmma_commit();
        named_arrive(other_turn, 256);
        wgmma_wait_one();  // S(it) done; P V still running
        pin<NB>(s[0]);
        release(w.k_empty + 8 * st);
        if constexpr (PERSISTENT) release(w.q_empty, it == n - 1);
        mask_and_softmax(s, it, alpha);  // under P V
        wgmma_wait_all();
        pin<DB>(acc);
        pin<BN / 16>(pa);
        release(w.v_empty + 8 * sp);
        rescale_acc<DB>(acc, alpha);
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) scores_to_a<NB>(pa[kk], s[0], kk);
    }

    // The last tile's O += P V.
    const int sl = (g + n - 1) % STAGES, lph = ((g + n - 1) / STAGES) & 1;
    named_sync(my_turn, 256);
    mbar_wait(w.v_full + 8 * sl, lph);
    pin<DB>(acc);
    pin<BN / 16>(pa);
    wgmma_fence();
    issue_pv<D, BN>(acc, pa, sm.v + sl * kTileK);
    wgmma_commit();
    if (cw == 0 || PERSISTENT) named_arrive(other_turn, 256);
    wgmma_wait_all();
    pin<DB>(acc);
    pin<BN / 16>(pa);
    release(w.v_empty + 8 * sl);
}

// After a persistent block's last tile: warpgroup 0 takes warpgroup 1's last hand-over (a named
// barrier must not be left with arrivals pending when the block exits).
__device__ __forceinline__ void ws_turns_end(int cw, int tiles) {
    if (cw == 0 && tiles > 0) named_sync(kWsSchedBarrier, 256);
}

// A block per query tile (the grid of the other kernels: x = (b, h) or a virtual sequence, y =
// the tile's rank).
template <int D, int BN, int STAGES, class Schedule>
__global__ void __launch_bounds__(kWsThreads, 1)
    attention_forward_ws_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                                const __grid_constant__ CUtensorMap tm_v, Params p) {
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) uint64_t bars[2 + 4 * STAGES];
    const WsSmem<D, BN, STAGES> sm((smem_u32(smem) + 1023) & ~1023u);
    const WsBarriers w = ws_barriers<STAGES>(bars);

    int b, h, rank;
    resolve_block<Schedule, true>(p, b, h, rank);
    const int q0 = Schedule::query_tile_of_rank(p, rank, gridDim.y) * kWsBM, qn = min(kWsBM, p.qrows.len - q0);
    if (qn <= 0) return;
    const QueryTile qt = query_tile_info<kWsThreads>(p, b, q0, qn);  // every thread (a block reduction)
    const auto keys = Schedule::key_tiles(p, qt, BN);
    const int n = keys.count();
    ws_init_barriers<STAGES>(w);

    const int wg = threadIdx.x >> 7;
    if (wg == 0) {  // producer
        regs_decrease<kWsProducerRegs>();
        if (threadIdx.x == 0 && n > 0) {
            tma_prefetch_map(&tm_k);
            tma_prefetch_map(&tm_v);
            ws_load_tile<D, BN, STAGES, Schedule::kPerBlockMaps>(&tm_q, &tm_k, &tm_v, p, keys, n, b, h, q0, sm, w, 0, 0);
        }
        return;
    }
    regs_increase<kWsConsumerRegs>();
    const int cw = wg - 1;
    const int row0 = q0 + cw * 64 + ((threadIdx.x >> 5) & 3) * 16;  // first row of the warp's 16-row slice
    float acc[D / 8][4] = {};
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    if (n > 0) ws_consume_tile<D, BN, STAGES, false, Schedule>(p, qt, keys, n, b, h, row0, cw, sm, w, 0, 0, acc, m, l);
    store_output<D, Schedule::kMayMerge, Schedule::kTwoSided>(p, b, h, row0, acc, m, l);
}

// Persistent: a grid of at most one block per SM, each block walking tiles blockIdx.x,
// blockIdx.x + gridDim.x, ... of the ny * nseq query tiles (persistent_query_tile,
// tile_scheduler.cuh). The producer runs ahead
// into the next tile (its Q once the consumers are done with this one's, its K and V into the
// free stages) while the consumers finish this tile and write its output, so a block's prologue
// and epilogue are hidden except for its first tile. Stages and phases count K/V tiles over the
// block's whole walk (g); Q's over the tiles that have keys (qj). No block barrier after the
// set-up: each warp reads a tile's document bounds alone (query_tile_info_warp). pt is p with the
// tile's maps (a dilated branch's virtual sequence; p's own otherwise).
template <int D, int BN, int STAGES, class Schedule>
__global__ void __launch_bounds__(kWsThreads, 1)
    attention_forward_ws_persistent_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                                           const __grid_constant__ CUtensorMap tm_v, const Params p, int ny, int nseq) {
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) uint64_t bars[2 + 4 * STAGES];
    const WsSmem<D, BN, STAGES> sm((smem_u32(smem) + 1023) & ~1023u);
    const WsBarriers w = ws_barriers<STAGES>(bars);
    const int n_tiles = ny * nseq;
    ws_init_barriers<STAGES>(w);

    const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    int g = 0, qj = 0;
    if (wg == 0) {  // producer: warp 0, lane 0 issuing
        regs_decrease<kWsProducerRegs>();
        if (warp != 0) return;
        if (lane == 0) {
            tma_prefetch_map(&tm_q);
            tma_prefetch_map(&tm_k);
            tma_prefetch_map(&tm_v);
        }
        for (int t = blockIdx.x; t < n_tiles; t += gridDim.x) {
            Params pt = p;
            const PersistentTile tile = persistent_query_tile<Schedule, kWsBM>(pt, t, ny, nseq);
            if (tile.qn <= 0) continue;  // a short sequence (a branch's last segment) has fewer tiles
            const QueryTile qt = query_tile_info_warp(pt, tile.b, tile.q0, tile.qn);  // the whole warp
            const auto keys = Schedule::key_tiles(pt, qt, BN);
            const int n = keys.count();
            if (n == 0) continue;
            if (lane == 0) ws_load_tile<D, BN, STAGES, Schedule::kPerBlockMaps>(&tm_q, &tm_k, &tm_v, pt, keys, n, tile.b, tile.h, tile.q0, sm, w, g, qj);
            __syncwarp();
            g += n;
            qj++;
        }
        return;
    }
    regs_increase<kWsConsumerRegs>();
    const int cw = wg - 1;
    for (int t = blockIdx.x; t < n_tiles; t += gridDim.x) {
        Params pt = p;
        const PersistentTile tile = persistent_query_tile<Schedule, kWsBM>(pt, t, ny, nseq);
        if (tile.qn <= 0) continue;
        const int row0 = tile.q0 + cw * 64 + warp * 16;
        const QueryTile qt = query_tile_info_warp(pt, tile.b, tile.q0, tile.qn);
        const auto keys = Schedule::key_tiles(pt, qt, BN);
        const int n = keys.count();
        float acc[D / 8][4] = {};
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
        if (n > 0) {
            ws_consume_tile<D, BN, STAGES, true, Schedule>(pt, qt, keys, n, tile.b, tile.h, row0, cw, sm, w, g, qj, acc, m, l);
            g += n;
            qj++;
        }
        store_output<D, Schedule::kMayMerge, Schedule::kTwoSided>(pt, tile.b, tile.h, row0, acc, m, l);
    }
    ws_turns_end(cw, qj);
}

}  // namespace flash
