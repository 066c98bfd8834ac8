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
#include "layers/cuda/attention/forward_mma_sync.cuh"

namespace flash {

// ---------------------------------------------------------------------------------------------
// wgmma wrappers (generated: one per instruction shape). d is the accumulator in the mma.sync C
// fragment layout per 8-column block: d[j] = (row g, cols 8j+2t, +1), (row g+8, cols 8j+2t, +1)
// of the warp's 16-row slice. scale_d = 0 overwrites d, 1 accumulates.
// ss: A and B from shared memory, both K-major. rs: A from registers (the mma.sync A fragment
// layout), B from shared memory MN-major (transposed).

__device__ __forceinline__ void wgmma_ss_n64(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n"
        "}\n"
          : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
            "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
            "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
            "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
            "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
            "+f"(d[7][2]), "+f"(d[7][3])
          : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_rs_n64(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n"
        "}\n"
          : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
            "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
            "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
            "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
            "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
            "+f"(d[7][2]), "+f"(d[7][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_ss_n128(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n"
        "}\n"
          : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
            "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
            "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
            "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
            "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
            "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),
            "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),
            "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),
            "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]),
            "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),
            "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
          : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_rs_n128(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n"
        "}\n"
          : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
            "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
            "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
            "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
            "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
            "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),
            "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),
            "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),
            "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]),
            "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),
            "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}


// tt: A and B from shared memory, both MN-major (A^T and B^T stored).
__device__ __forceinline__ void wgmma_ss_tt_n32(float (&d)[4][4], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 1, 1;\n"
        "}\n"
          : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
            "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
            "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
          : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_ss_tt_n64(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 1, 1;\n"
        "}\n"
          : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
            "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
            "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
            "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
            "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
            "+f"(d[7][2]), "+f"(d[7][3])
          : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// Waits until at most one committed group is still running (groups retire in commit order).
__device__ __forceinline__ void wgmma_wait_one() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }
// wgmma reads its register operands and writes its accumulators asynchronously, until
// wgmma_wait_all. These empty asm statements pin such registers: the compiler must keep them in
// place (no copy, no reuse) up to this point, and may not read an accumulator from before it.
template <int N>
__device__ __forceinline__ void pin(float (&d)[N][4]) {
#pragma unroll
    for (int j = 0; j < N; j++)
        asm volatile("" : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])::"memory");
}
template <int N>
__device__ __forceinline__ void pin(uint32_t (&a)[N][4]) {
#pragma unroll
    for (int j = 0; j < N; j++)
        asm volatile("" : "+r"(a[j][0]), "+r"(a[j][1]), "+r"(a[j][2]), "+r"(a[j][3])::"memory");
}
// Makes cp.async (generic proxy) writes to shared memory visible to wgmma (async proxy).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 8][4], uint64_t a, uint64_t b, int scale_d) {
    if constexpr (N == 64) wgmma_ss_n64(d, a, b, scale_d);
    else wgmma_ss_n128(d, a, b, scale_d);
}
template <int N>
__device__ __forceinline__ void wgmma_ss_tt(float (&d)[N / 8][4], uint64_t a, uint64_t b, int scale_d) {
    if constexpr (N == 32) wgmma_ss_tt_n32(d, a, b, scale_d);
    else wgmma_ss_tt_n64(d, a, b, scale_d);
}
template <int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b, int scale_d) {
    if constexpr (N == 64) wgmma_rs_n64(d, a, b, scale_d);
    else wgmma_rs_n128(d, a, b, scale_d);
}

// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride byte
// offsets (all in 16-byte units), layout type 1 (SWIZZLE_128B) in bits 62-63.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
    return (uint64_t)((addr >> 4) & 0x3FFF) | ((uint64_t)((lbo_bytes >> 4) & 0x3FFF) << 16) |
           ((uint64_t)((sbo_bytes >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

// Byte offset of 16-byte chunk c of row r in a (ROWS, D) tile stored as [D/64][ROWS][64] with the
// 128-byte swizzle (the hardware XORs address bits 4-6 with bits 7-9; tiles are 1024-byte aligned).
template <int ROWS>
__device__ __forceinline__ uint32_t sw128_offset(int r, int c) {
    return (uint32_t)((c >> 3) * ROWS * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

template <int ROWS, int D, int NT>
__device__ __forceinline__ void load_tile_sw128_async(uint32_t dst, const bf16* base, int stride, RowMap map,
                                                      int row0, int nvalid) {
    constexpr int CH = D / 8;
    for (int c = threadIdx.x; c < ROWS * CH; c += NT) {
        const int r = c / CH, ch = c % CH;
        const bool ok = r < nvalid;
        const bf16* src = ok ? base + (size_t)map.token(row0 + r) * stride + ch * 8 : base;
        cp_async_16(dst + sw128_offset<ROWS>(r, ch), src, ok);
    }
}

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
        load_tile_sw128_async<BM, D, NT>(sQ, p.q + (size_t)b * p.q_tokens * p.q_stride + h * D, p.q_stride, p.qrows,
                                         q0, qn);
        const int k0 = keys.tile(0) * BN;
        load_tile_sw128_async<BN, D, NT>(sK, kbase, p.kv_stride, p.krows, k0, min(BN, p.krows.len - k0));
        load_tile_sw128_async<BN, D, NT>(sV, vbase, p.kv_stride, p.krows, k0, min(BN, p.krows.len - k0));
        cp_async_commit();
    }
    for (int it = 0; it < n; it++) {
        cp_async_wait_all();
        fence_proxy_async();
        __syncthreads();
        if (it + 1 < n) {
            const int k0 = keys.tile(it + 1) * BN, st = (it + 1) & 1;
            load_tile_sw128_async<BN, D, NT>(sK + st * BN * D * 2, kbase, p.kv_stride, p.krows, k0,
                                             min(BN, p.krows.len - k0));
            load_tile_sw128_async<BN, D, NT>(sV + st * BN * D * 2, vbase, p.kv_stride, p.krows, k0,
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
        const bool cut = keys.cut(it);
        if (cut || pair_needs_mask(p, qt, kt, BN)) mask_scores<1, NB, Schedule>(s, p, b, row0, k0, kt.n, h, cut);
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
