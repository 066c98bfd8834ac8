// The pointer on the GPU (CPU reference and the math: layers/pointer.h), in the launchers the
// model calls, mirroring the reference:
//   pointer_pack_cuda            [q | kp] (the one product over lnf) -> the head's (B, T, 3, 1, D)
//                                rows: q, the shifted keys K' (K'_0 = 0), V = 0
//   pointer_forward_cuda         our dense flash forward for the head's log-sum-exp L (its output
//                                is dropped), then p_copy summed over the target's keys by tiles
//   pointer_backward_cuda        the dense term w a_ts as our flash backward (V = 0, so dP = 0, and
//                                O, dO chosen so that its delta = rowsum(dO O) is -w dloss), then
//                                the target's keys' term, query tiles into dq and key tiles into
//                                dK' (each row written by one block: no atomics, deterministic),
//                                written unshifted as d[q | kp]
// The target's keys come as tiles (pointer_tiles, built on the host): a block holds a tile's rows
// and streams the other side's through shared memory, kPointerTile rows at a time, into tensor-core
// products (pointer_tile_kernel), so a pair costs its share of an MMA, not a dependent load.
//   pointer_gate_forward_cuda    g_t = lnf_t . wg + bg
//   pointer_gate_backward_cuda   dln += dln_ptr + dgate wg; dwg, dbg by fixed-order partial sums
// Layout of the row kernels: a warp per row, D / 32 channels a lane (D = 64 or 128).
#pragma once
#include <climits>
#include "layers/cuda/attention/smem_tiles.cuh"
#include "layers/cuda/attention_flash.h"
#include "layers/cuda/common.cuh"
#include "layers/pointer.h"

constexpr int kPointerWarps = 8;  // warps per block of the row kernels
constexpr int kPointerSlab = 128;  // rows each block of the gate's weight gradient sums

template <int D>
__device__ __forceinline__ void pointer_load_row(float (&x)[D / 32], const bf16* row) {
#pragma unroll
    for (int i = 0; i < D / 32; i++) x[i] = __bfloat162float(row[threadIdx.x % 32 + 32 * i]);
}

template <int D>
__device__ __forceinline__ float pointer_warp_dot(const float (&a)[D / 32], const bf16* row) {
    float s = 0;
#pragma unroll
    for (int i = 0; i < D / 32; i++) s = fmaf(a[i], __bfloat162float(row[threadIdx.x % 32 + 32 * i]), s);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

// qkv (B T, 3 D) from qk (B T, 2 D): q as is, key s the kp of s - 1 (key 0 zero), V zero.
__global__ void pointer_pack_kernel(bf16* __restrict__ qkv, const bf16* __restrict__ qk, long long BT, int T, int D) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= BT * D) return;
    const long long r = i / D;
    const int c = (int)(i % D), t = (int)(r % T);
    bf16* out = qkv + r * 3 * D;
    out[c] = qk[r * 2 * D + c];
    out[D + c] = t == 0 ? __float2bfloat16(0.0f) : qk[(r - 1) * 2 * D + D + c];
    out[2 * D + c] = __float2bfloat16(0.0f);
}

// The three sums over the target's keys, one kernel on tensor cores (the flash kernels' mma.sync
// tiles and fragment loads, layers/cuda/attention/smem_tiles.cuh). A block takes one tile: its
// own kPointerTile rows (the "fixed" side; warp w rows 16w..16w+15) against the other side's rows
// of the group, kPointerTile at a time (a chunk). S = q . K' for each pair, the pair kept where
// the query's position is at or after the key's, e_ts = exp(scale S - L_t). Then by Mode:
//   kPointerSum        fixed queries: p_copy_t = sum_s e_ts
//   kPointerQueryGrad  fixed queries: dq_t += sum_s c_t e_ts K'_s            (c_t below)
//   kPointerKeyGrad    fixed keys:    dK'_s += sum_t c_t e_ts q_t            (unshifted: dkp_(s - 1))
// with c_t = -w_t dloss scale / p_copy_t (0 where w_t = 0: no copy). The gradients add to the flash
// backward's dqkv, read here, and are written to dqk once, each row by the block that owns it.
enum PointerTileMode { kPointerSum, kPointerQueryGrad, kPointerKeyGrad };
constexpr int kPointerTileThreads = 32 * kPointerTile / 16;  // a warp per 16 fixed rows

// Rows [begin, begin + n) of an order into a (kPointerTile, D) tile of the mma.sync layout (part
// 0: q, 1: K'), rows past n zero; with each row's position, log-sum-exp and coefficient (queries)
// into pos / L / coef (rows past n: a position no pair keeps).
template <int D>
__device__ __forceinline__ void pointer_load_tile(uint32_t tile, int* pos, float* L, float* coef, const bf16* __restrict__ qkv,
                                                  const int* __restrict__ order, int begin, int n, int part, int T,
                                                  const float* __restrict__ w, const float* __restrict__ lse,
                                                  const float* __restrict__ pcopy, float dloss, float scale) {
    constexpr int kChunks = D / 8;
    for (int c = threadIdx.x; c < kPointerTile * kChunks; c += kPointerTileThreads) {
        const int r = c / kChunks, ch = c % kChunks;
        const bool ok = r < n;
        const bf16* src = ok ? qkv + (size_t)order[begin + r] * 3 * D + part * D + ch * 8 : qkv;
        flash::cp_async_16(tile + flash::swz<D>(r, ch), src, ok);
    }
    flash::cp_async_commit();
    for (int r = threadIdx.x; r < kPointerTile; r += kPointerTileThreads) {
        if (r >= n) {
            pos[r] = part == 0 ? -1 : INT_MAX, L[r] = 0, coef[r] = 0;
            continue;
        }
        const long long row = order[begin + r];
        pos[r] = (int)(row % T);
        if (part == 0) {
            L[r] = lse[row];
            coef[r] = w && w[row] > 0 ? -w[row] * dloss * scale / pcopy[row] : 0.0f;
        }
    }
}

template <int D, int Mode>
__global__ void __launch_bounds__(kPointerTileThreads)
    pointer_tile_kernel(float* __restrict__ pcopy_out, bf16* __restrict__ dqk, const bf16* __restrict__ dqkv,
                        const bf16* __restrict__ qkv, const float* __restrict__ w, const float* __restrict__ lse,
                        const float* __restrict__ pcopy, const int* __restrict__ fixed_order,
                        const int* __restrict__ chunk_order, const int* __restrict__ tiles, int T, float scale, float dloss) {
    constexpr bool kQueriesFixed = Mode != kPointerKeyGrad;
    constexpr int kFixedPart = kQueriesFixed ? 0 : 1, kChunkPart = 1 - kFixedPart, NB = kPointerTile / 8;
    __shared__ __align__(128) bf16 fixed_rows[kPointerTile * D];
    __shared__ __align__(128) bf16 chunk_rows[kPointerTile * D];
    __shared__ int fixed_pos[kPointerTile], chunk_pos[kPointerTile];
    __shared__ float fixed_L[kPointerTile], fixed_coef[kPointerTile], chunk_L[kPointerTile], chunk_coef[kPointerTile];
    const int* tile = tiles + 4 * blockIdx.x;
    const int f0 = tile[0], f1 = tile[1], c0 = tile[2], c1 = tile[3];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
    const uint32_t sF = flash::smem_u32(fixed_rows), sC = flash::smem_u32(chunk_rows);
    const float* wq = Mode == kPointerSum ? nullptr : w;
    pointer_load_tile<D>(sF, fixed_pos, fixed_L, fixed_coef, qkv, fixed_order, f0, f1 - f0, kFixedPart, T, wq, lse, pcopy, dloss, scale);
    float sum[2] = {0.0f, 0.0f};
    float acc[1][D / 8][4];
#pragma unroll
    for (int db = 0; db < D / 8; db++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[0][db][i] = 0.0f;
    for (int cb = c0; cb < c1; cb += kPointerTile) {
        __syncthreads();  // the chunk before is read
        pointer_load_tile<D>(sC, chunk_pos, chunk_L, chunk_coef, qkv, chunk_order, cb, min(kPointerTile, c1 - cb), kChunkPart, T, wq,
                             lse, pcopy, dloss, scale);
        flash::cp_async_wait_all();
        __syncthreads();
        float s[1][NB][4];
#pragma unroll
        for (int nb = 0; nb < NB; nb++)
#pragma unroll
            for (int i = 0; i < 4; i++) s[0][nb][i] = 0.0f;
        flash::mma_rows_times_tile_t<1, NB, D>(s, sF, 16 * warp, sC);
#pragma unroll
        for (int nb = 0; nb < NB; nb++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int f = 16 * warp + g + 8 * (i / 2), c = nb * 8 + 2 * t4 + (i % 2);
                const int tq = kQueriesFixed ? fixed_pos[f] : chunk_pos[c], sk = kQueriesFixed ? chunk_pos[c] : fixed_pos[f];
                const float Lq = kQueriesFixed ? fixed_L[f] : chunk_L[c];
                const float e = sk <= tq ? __expf(scale * s[0][nb][i] - Lq) : 0.0f;
                if (Mode == kPointerSum) sum[i / 2] += e;
                else s[0][nb][i] = e * (kQueriesFixed ? fixed_coef[f] : chunk_coef[c]);
            }
        if (Mode != kPointerSum) flash::mma_probs_times_tile<1, NB, D / 8, D>(acc, s, sC);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int f = 16 * warp + g + 8 * h;
        if (Mode == kPointerSum) {  // every lane shuffles (rows past the tile summed zeros); the row's owner writes
            float v = sum[h];
            v += __shfl_xor_sync(0xffffffffu, v, 1);
            v += __shfl_xor_sync(0xffffffffu, v, 2);
            if (f < f1 - f0 && t4 == 0) pcopy_out[fixed_order[f0 + f]] = v;
            continue;
        }
        if (f >= f1 - f0) continue;
        const long long r = fixed_order[f0 + f];
        const bf16* in = Mode == kPointerQueryGrad ? dqkv + r * 3 * D : dqkv + r * 3 * D + D;
        bf16* out = Mode == kPointerQueryGrad ? dqk + r * 2 * D : dqk + (r - 1) * 2 * D + D;
#pragma unroll
        for (int db = 0; db < D / 8; db++)
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const int d = db * 8 + 2 * t4 + j;
                out[d] = __float2bfloat16(__bfloat162float(in[d]) + acc[0][db][2 * h + j]);
            }
    }
}

// O and dO of the flash backward's dense term: delta = rowsum(dO O) = -w_t dloss, carried in three
// bf16 pieces of O (each dO 1) so that the fp32 sum holds it to fp32's precision.
__global__ void pointer_delta_rows_kernel(bf16* __restrict__ o, bf16* __restrict__ dout, const float* __restrict__ w, long long BT,
                                          int D, float dloss) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= BT * D) return;
    const long long r = i / D;
    const int c = (int)(i % D);
    const float x = -w[r] * dloss;
    const bf16 x1 = __float2bfloat16(x), x2 = __float2bfloat16(x - __bfloat162float(x1));
    const bf16 x3 = __float2bfloat16(x - __bfloat162float(x1) - __bfloat162float(x2));
    o[i] = c == 0 ? x1 : c == 1 ? x2 : c == 2 ? x3 : __float2bfloat16(0.0f);
    dout[i] = __float2bfloat16(c < 3 ? 1.0f : 0.0f);
}

// Every row's part of d[q | kp] without the target's keys' term (the flash backward's dq, and its
// dK'_s unshifted into dkp_(s - 1); the last dkp of a row, which no key reads, 0), and the gate's
// gradient; the tile kernels below then rewrite the rows they own with that term added.
__global__ void pointer_backward_rows_kernel(bf16* __restrict__ dqk, float* __restrict__ dgate, const bf16* __restrict__ dqkv,
                                             const float* __restrict__ gate, const float* __restrict__ w,
                                             const int* __restrict__ targets, long long BT, int T, int D, float dloss) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= BT * D) return;
    const long long r = i / D;
    const int c = (int)(i % D), s = (int)(r % T);
    dqk[r * 2 * D + c] = dqkv[r * 3 * D + c];
    if (s >= 1) dqk[(r - 1) * 2 * D + D + c] = dqkv[r * 3 * D + D + c];
    else dqk[(r + T - 1) * 2 * D + D + c] = __float2bfloat16(0.0f);
    if (c == 0) dgate[r] = targets[r] >= 0 ? (1.0f / (1.0f + __expf(-gate[r])) - w[r]) * dloss : 0.0f;
}

// g_t = x_t . wg + bg, a warp per row.
__global__ void pointer_gate_forward_kernel(float* __restrict__ gate, const bf16* __restrict__ x, const bf16* __restrict__ wg,
                                            const bf16* __restrict__ bg, long long N, int C) {
    const long long r = (long long)blockIdx.x * kPointerWarps + threadIdx.x / 32;
    if (r >= N) return;
    float s = 0;
    for (int c = threadIdx.x % 32; c < C; c += 32) s = fmaf(__bfloat162float(x[r * C + c]), __bfloat162float(wg[c]), s);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0) gate[r] = s + __bfloat162float(bg[0]);
}

// dx += dx_ptr + dgate wg, elementwise.
__global__ void pointer_gate_dx_kernel(bf16* __restrict__ dx, const bf16* __restrict__ dx_ptr, const float* __restrict__ dgate,
                                       const bf16* __restrict__ wg, long long N, int C) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * C) return;
    const float v = __bfloat162float(dx[i]) + __bfloat162float(dx_ptr[i]) + dgate[i / C] * __bfloat162float(wg[i % C]);
    dx[i] = __float2bfloat16(v);
}

// Partial sums of dgate_t x_t (C) and dgate_t (one more) over a slab of rows, a block per slab.
__global__ void pointer_gate_partial_kernel(float* __restrict__ partial, const bf16* __restrict__ x, const float* __restrict__ dgate,
                                            long long N, int C) {
    const long long r0 = (long long)blockIdx.x * kPointerSlab, r1 = r0 + kPointerSlab < N ? r0 + kPointerSlab : N;
    for (int c = threadIdx.x; c <= C; c += blockDim.x) {
        float s = 0;
        for (long long r = r0; r < r1; r++) s = fmaf(dgate[r], c < C ? __bfloat162float(x[r * C + c]) : 1.0f, s);
        partial[(size_t)blockIdx.x * (C + 1) + c] = s;
    }
}
__global__ void pointer_gate_reduce_kernel(float* __restrict__ dwg, float* __restrict__ dbg, const float* __restrict__ partial,
                                           int slabs, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c > C) return;
    float s = 0;
    for (int k = 0; k < slabs; k++) s += partial[(size_t)k * (C + 1) + c];
    if (c < C) dwg[c] += s;
    else dbg[0] += s;
}

// ------------------------------------------------------------------------------------------------
// Launchers

inline AttnShape pointer_attn_shape(int B, int T, int D) { return {B, T, 1, D, 3 * D}; }
inline size_t pointer_gate_scratch_floats(long long N, int C) { return (size_t)ceil_div(N, kPointerSlab) * (C + 1); }

inline void pointer_pack_cuda(bf16* qkv, const bf16* qk, int B, int T, int D, cudaStream_t stream) {
    const long long n = (long long)B * T * D;
    pointer_pack_kernel<<<ceil_div(n, 256), 256, 0, stream>>>(qkv, qk, (long long)B * T, T, D);
    CUDA_CHECK_LAST();
}

// One pointer_tile_kernel launch over n tiles (none: nothing to do) at head dim D.
template <int Mode>
inline void pointer_tile_launch(int D, int n, float* pcopy_out, bf16* dqk, const bf16* dqkv, const bf16* qkv, const float* w,
                                const float* lse, const float* pcopy, const int* fixed_order, const int* chunk_order,
                                const int* tiles, int T, float scale, float dloss, cudaStream_t stream) {
    if (D != 64 && D != 128) fatal("pointer: head dim %d is not 64 or 128", D);
    if (n == 0) return;
    if (D == 64)
        pointer_tile_kernel<64, Mode><<<n, kPointerTileThreads, 0, stream>>>(pcopy_out, dqk, dqkv, qkv, w, lse, pcopy, fixed_order,
                                                                             chunk_order, tiles, T, scale, dloss);
    else
        pointer_tile_kernel<128, Mode><<<n, kPointerTileThreads, 0, stream>>>(pcopy_out, dqk, dqkv, qkv, w, lse, pcopy, fixed_order,
                                                                              chunk_order, tiles, T, scale, dloss);
    CUDA_CHECK_LAST();
}

// pointer_tiles' orders and tiles in device memory (the model uploads them with the batch).
struct PointerTilesDevice {
    const int *query_order = nullptr, *key_order = nullptr, *query_tiles = nullptr, *key_tiles = nullptr;
    int n_query_tiles = 0, n_key_tiles = 0;
};

// lse (B, T) and pcopy (B, T) from the head's qkv (pointer_pack_cuda); o (B, T, D) scratch.
inline void pointer_forward_cuda(float* lse, float* pcopy, bf16* o, const bf16* qkv, const int* pos, const PointerTilesDevice& tiles,
                                 int B, int T, int D, cudaStream_t stream) {
    const float scale = 1.0f / std::sqrt((float)D);
    const AttnShape s = pointer_attn_shape(B, T, D);
    attention_forward_cuda(o, lse, qkv, qkv + D, qkv + 2 * D, pos, nullptr, AttnPattern{}, s, scale, stream);
    CUDA_CHECK(cudaMemsetAsync(pcopy, 0, (size_t)B * T * sizeof(float), stream));
    pointer_tile_launch<kPointerSum>(D, tiles.n_query_tiles, pcopy, nullptr, nullptr, qkv, nullptr, lse, nullptr, tiles.query_order,
                                     tiles.key_order, tiles.query_tiles, T, scale, 0.0f, stream);
}

// dqk (B, T, 2 D) OVERWRITTEN with d[q | kp] and dgate (B, T) with the gate's, for sum_t dloss
// loss_t; o, dout (B, T, D) and dqkv (B, T, 3 D) scratch; workspace as the attention backward's.
inline void pointer_backward_cuda(bf16* dqk, float* dgate, bf16* o, bf16* dout, bf16* dqkv, const bf16* qkv, const float* gate,
                                  const float* w, const float* lse, const float* pcopy, const int* targets, const int* pos,
                                  const PointerTilesDevice& tiles, int B, int T, int D, float dloss, bool deterministic,
                                  float* workspace, cudaStream_t stream) {
    const float scale = 1.0f / std::sqrt((float)D);
    const AttnShape s = pointer_attn_shape(B, T, D);
    const long long BT = (long long)B * T;
    pointer_delta_rows_kernel<<<ceil_div(BT * D, 256), 256, 0, stream>>>(o, dout, w, BT, D, dloss);
    CUDA_CHECK_LAST();
    const int variant = deterministic ? flash::kDeterministicBackwardVariant : 0;
    attention_backward_cuda_variant(variant, dqkv, dqkv + D, dqkv + 2 * D, dout, o, lse, qkv, qkv + D, qkv + 2 * D, pos, nullptr,
                                    AttnPattern{}, s, scale, workspace, stream);
    pointer_backward_rows_kernel<<<ceil_div(BT * D, 256), 256, 0, stream>>>(dqk, dgate, dqkv, gate, w, targets, BT, T, D, dloss);
    CUDA_CHECK_LAST();
    const PointerTilesDevice& t = tiles;
    pointer_tile_launch<kPointerQueryGrad>(D, t.n_query_tiles, nullptr, dqk, dqkv, qkv, w, lse, pcopy, t.query_order, t.key_order,
                                           t.query_tiles, T, scale, dloss, stream);
    pointer_tile_launch<kPointerKeyGrad>(D, t.n_key_tiles, nullptr, dqk, dqkv, qkv, w, lse, pcopy, t.key_order, t.query_order,
                                         t.key_tiles, T, scale, dloss, stream);
}

inline void pointer_gate_forward_cuda(float* gate, const bf16* x, const bf16* wg, const bf16* bg, long long N, int C,
                                      cudaStream_t stream) {
    pointer_gate_forward_kernel<<<ceil_div(N, kPointerWarps), 32 * kPointerWarps, 0, stream>>>(gate, x, wg, bg, N, C);
    CUDA_CHECK_LAST();
}

// dx (N, C) += dx_ptr + dgate wg; dwg (C) and dbg (1) += the gate's weight gradients.
inline void pointer_gate_backward_cuda(bf16* dx, float* dwg, float* dbg, const bf16* dx_ptr, const float* dgate, const bf16* x,
                                       const bf16* wg, long long N, int C, float* scratch, cudaStream_t stream) {
    pointer_gate_dx_kernel<<<ceil_div(N * C, 256), 256, 0, stream>>>(dx, dx_ptr, dgate, wg, N, C);
    CUDA_CHECK_LAST();
    const int slabs = ceil_div(N, kPointerSlab);
    pointer_gate_partial_kernel<<<slabs, 256, 0, stream>>>(scratch, x, dgate, N, C);
    CUDA_CHECK_LAST();
    pointer_gate_reduce_kernel<<<ceil_div(C + 1, 256), 256, 0, stream>>>(dwg, dbg, scratch, slabs, C);
    CUDA_CHECK_LAST();
}

// ------------------------------------------------------------------------------------------------
// The KV cache's side (model/pointer_cache_cuda.cuh; CPU: model/pointer_cache.h): the shifted keys
// K' (B, cap, D) and tokens (B, cap) of every position so far, a chunk's queries against them.

// K'_(p0 + 1 + i) = kp_i for the chunk's rows i (B, n, D); K'_0 = 0 when the chunk starts the sequence.
__global__ void pointer_cache_keys_kernel(bf16* __restrict__ keys, const bf16* __restrict__ kp, int B, int n, long long p0,
                                          long long cap, int D) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)B * n * D) return;
    const int c = (int)(i % D), row = (int)((i / D) % n), b = (int)(i / D / n);
    keys[((size_t)b * cap + p0 + 1 + row) * D + c] = kp[i];
    if (p0 == 0 && row == 0) keys[(size_t)b * cap * D + c] = __float2bfloat16(0.0f);
}

// p_copy of the chunk's rows: the warp of row (b, i) walks the keys holding its target, from
// first_key (a position, -1: none) down prev (B, cap).
template <int D>
__global__ void pointer_cache_gather_kernel(float* __restrict__ pcopy, const bf16* __restrict__ q, const bf16* __restrict__ keys,
                                            const float* __restrict__ lse, const int* __restrict__ first_key,
                                            const int* __restrict__ prev, int B, int n, long long cap, float scale) {
    const long long r = (long long)blockIdx.x * kPointerWarps + threadIdx.x / 32;
    if (r >= (long long)B * n) return;
    const long long b = r / n;
    float qr[D / 32];
    pointer_load_row<D>(qr, q + r * D);
    float p = 0;
    for (long long s = first_key[r]; s >= 1; s = prev[b * cap + s])
        p += __expf(scale * pointer_warp_dot<D>(qr, keys + (b * cap + s) * D) - lse[r]);
    if (threadIdx.x % 32 == 0) pcopy[r] = p;
}

// One query against keys 0..t of one sequence: scores[s] = scale q . K'_s (a warp per key).
template <int D>
__global__ void pointer_cache_scores_kernel(float* __restrict__ scores, const bf16* __restrict__ q, const bf16* __restrict__ keys,
                                            long long t, float scale) {
    const long long s = (long long)blockIdx.x * kPointerWarps + threadIdx.x / 32;
    if (s > t) return;
    float qr[D / 32];
    pointer_load_row<D>(qr, q);
    const float v = scale * pointer_warp_dot<D>(qr, keys + s * D);
    if (threadIdx.x % 32 == 0) scores[s] = v;
}

// Block-wide max and sum of exp over n values (one block of 1024 threads): stats = (max, sum).
__global__ void pointer_softmax_stats_kernel(float* __restrict__ stats, const float* __restrict__ x, long long n) {
    __shared__ float shm_m[32], shm_s[32];
    float m = -INFINITY, s = 0;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = x[i];
        if (v > m) s = s * __expf(m - v) + 1.0f, m = v;
        else s += __expf(v - m);
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        const float mm = fmaxf(m, m2);
        s = mm == -INFINITY ? 0.0f : s * __expf(m - mm) + s2 * __expf(m2 - mm);
        m = mm;
    }
    if (threadIdx.x % 32 == 0) shm_m[threadIdx.x / 32] = m, shm_s[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x != 0) return;
    m = -INFINITY, s = 0;
    for (int w = 0; w < (int)blockDim.x / 32; w++) {
        const float mm = fmaxf(m, shm_m[w]);
        s = mm == -INFINITY ? 0.0f : s * __expf(m - mm) + shm_s[w] * __expf(shm_m[w] - mm);
        m = mm;
    }
    stats[0] = m, stats[1] = s;
}

// copy[v] += a_s for the keys 1..t by the token each holds (a_s = exp(scores[s] - L), L from
// stats); copy must be zero before.
__global__ void pointer_cache_scatter_kernel(float* __restrict__ copy, const float* __restrict__ scores, const int* __restrict__ tokens,
                                             const float* __restrict__ stats, long long t) {
    const long long s = 1 + (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s > t) return;
    const float L = stats[0] + logf(stats[1]);
    atomicAdd(copy + tokens[s], __expf(scores[s] - L));
}

// out[v] = log((1 - g) softmax(logits)(v) + g copy[v]); lm_stats the logits' (max, sum).
__global__ void pointer_cache_mix_kernel(float* __restrict__ out, const float* __restrict__ logits, const float* __restrict__ copy,
                                         const float* __restrict__ lm_stats, const float* __restrict__ gate, int V) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= V) return;
    const float g = 1.0f / (1.0f + __expf(-gate[0]));
    out[v] = logf((1.0f - g) * __expf(logits[v] - lm_stats[0]) / lm_stats[1] + g * copy[v]);
}
