// The pointer on the GPU (CPU reference and the math: layers/pointer.h), in the launchers the
// model calls, mirroring the reference:
//   pointer_pack_cuda            [q | kp] (the one product over lnf) -> the head's (B, T, 3, 1, D)
//                                rows: q, the shifted keys K' (K'_0 = 0), V = 0
//   pointer_forward_cuda         our dense flash forward for the head's log-sum-exp L (its output
//                                is dropped), then the gather of p_copy over the target's keys
//   pointer_backward_cuda        the dense term w a_ts as our flash backward (V = 0, so dP = 0, and
//                                O, dO chosen so that its delta = rowsum(dO O) is -w dloss), then
//                                the target's keys' term, query-parallel into dq and key-parallel
//                                into dK' (each a warp walking a chain: no atomics, deterministic),
//                                written unshifted as d[q | kp]
//   pointer_gate_forward_cuda    g_t = lnf_t . wg + bg
//   pointer_gate_backward_cuda   dln += dln_ptr + dgate wg; dwg, dbg by fixed-order partial sums
// Layout: a warp per row for the gathers, D / 32 channels a lane (D = 64 or 128).
#pragma once
#include "layers/cuda/attention_flash.h"
#include "layers/cuda/common.cuh"

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

// p_copy_t: the warp of query t walks the keys holding its target.
template <int D>
__global__ void pointer_gather_kernel(float* __restrict__ pcopy, const bf16* __restrict__ qkv, const float* __restrict__ lse,
                                      const int* __restrict__ first_key, const int* __restrict__ prev_key, long long BT, int T,
                                      float scale) {
    const long long r = (long long)blockIdx.x * kPointerWarps + threadIdx.x / 32;
    if (r >= BT) return;
    const long long r0 = r - r % T;
    float q[D / 32];
    pointer_load_row<D>(q, qkv + r * 3 * D);
    const float L = lse[r];
    float p = 0;
    for (int s = first_key[r]; s >= 1; s = prev_key[r0 + s]) p += __expf(scale * pointer_warp_dot<D>(q, qkv + (r0 + s) * 3 * D + D) - L);
    if (threadIdx.x % 32 == 0) pcopy[r] = p;
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

// The gate's gradient and dq's sparse term: the warp of query t adds -w a_ts / p_copy dloss scale
// K'_s over the keys holding its target to the flash backward's dq, into dqk's q half.
template <int D>
__global__ void pointer_backward_query_kernel(bf16* __restrict__ dqk, float* __restrict__ dgate, const bf16* __restrict__ dqkv,
                                              const bf16* __restrict__ qkv, const float* __restrict__ gate,
                                              const float* __restrict__ w, const float* __restrict__ lse,
                                              const float* __restrict__ pcopy, const int* __restrict__ targets,
                                              const int* __restrict__ first_key, const int* __restrict__ prev_key, long long BT,
                                              int T, float scale, float dloss) {
    const long long r = (long long)blockIdx.x * kPointerWarps + threadIdx.x / 32;
    if (r >= BT) return;
    const long long r0 = r - r % T;
    const int lane = threadIdx.x % 32;
    float acc[D / 32];
#pragma unroll
    for (int i = 0; i < D / 32; i++) acc[i] = 0;
    const float wr = w[r];
    if (targets[r] >= 0 && wr > 0) {
        float q[D / 32];
        pointer_load_row<D>(q, qkv + r * 3 * D);
        const float L = lse[r], c = -wr * dloss / pcopy[r] * scale;
        for (int s = first_key[r]; s >= 1; s = prev_key[r0 + s]) {
            const bf16* k = qkv + (r0 + s) * 3 * D + D;
            const float ds = c * __expf(scale * pointer_warp_dot<D>(q, k) - L);
#pragma unroll
            for (int i = 0; i < D / 32; i++) acc[i] = fmaf(ds, __bfloat162float(k[lane + 32 * i]), acc[i]);
        }
    }
#pragma unroll
    for (int i = 0; i < D / 32; i++)
        dqk[r * 2 * D + lane + 32 * i] = __float2bfloat16(__bfloat162float(dqkv[r * 3 * D + lane + 32 * i]) + acc[i]);
    if (lane == 0) dgate[r] = targets[r] >= 0 ? (1.0f / (1.0f + __expf(-gate[r])) - wr) * dloss : 0.0f;
}

// dK''s sparse term: the warp of key s (s >= 1) adds -w_t a_ts / p_copy_t dloss scale q_t over the
// queries whose target it holds to the flash backward's dK'_s, written unshifted as dkp_(s - 1)
// into dqk's kp half; key 0's warp writes the row's last dkp, which no key reads, as 0.
template <int D>
__global__ void pointer_backward_key_kernel(bf16* __restrict__ dqk, const bf16* __restrict__ dqkv, const bf16* __restrict__ qkv,
                                            const float* __restrict__ w, const float* __restrict__ lse,
                                            const float* __restrict__ pcopy, const int* __restrict__ first_query,
                                            const int* __restrict__ next_query, long long BT, int T, float scale, float dloss) {
    const long long r = (long long)blockIdx.x * kPointerWarps + threadIdx.x / 32;
    if (r >= BT) return;
    const long long r0 = r - r % T;
    const int s = (int)(r - r0), lane = threadIdx.x % 32;
    if (s == 0) {
#pragma unroll
        for (int i = 0; i < D / 32; i++) dqk[(r0 + T - 1) * 2 * D + D + lane + 32 * i] = __float2bfloat16(0.0f);
        return;
    }
    float k[D / 32], acc[D / 32];
    pointer_load_row<D>(k, qkv + r * 3 * D + D);
#pragma unroll
    for (int i = 0; i < D / 32; i++) acc[i] = 0;
    for (int t = first_query[r]; t >= 0; t = next_query[r0 + t]) {
        const long long rt = r0 + t;
        const float wt = w[rt];
        if (!(wt > 0)) continue;
        const bf16* q = qkv + rt * 3 * D;
        const float ds = -wt * dloss / pcopy[rt] * scale * __expf(scale * pointer_warp_dot<D>(k, q) - lse[rt]);
#pragma unroll
        for (int i = 0; i < D / 32; i++) acc[i] = fmaf(ds, __bfloat162float(q[lane + 32 * i]), acc[i]);
    }
#pragma unroll
    for (int i = 0; i < D / 32; i++)
        dqk[(r - 1) * 2 * D + D + lane + 32 * i] = __float2bfloat16(__bfloat162float(dqkv[r * 3 * D + D + lane + 32 * i]) + acc[i]);
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

// lse (B, T) and pcopy (B, T) from the head's qkv (pointer_pack_cuda); o (B, T, D) scratch.
inline void pointer_forward_cuda(float* lse, float* pcopy, bf16* o, const bf16* qkv, const int* pos, const int* first_key,
                                 const int* prev_key, int B, int T, int D, cudaStream_t stream) {
    const float scale = 1.0f / std::sqrt((float)D);
    const AttnShape s = pointer_attn_shape(B, T, D);
    attention_forward_cuda(o, lse, qkv, qkv + D, qkv + 2 * D, pos, nullptr, AttnPattern{}, s, scale, stream);
    const long long BT = (long long)B * T;
    const int blocks = ceil_div(BT, kPointerWarps);
    if (D == 64) pointer_gather_kernel<64><<<blocks, 32 * kPointerWarps, 0, stream>>>(pcopy, qkv, lse, first_key, prev_key, BT, T, scale);
    else if (D == 128) pointer_gather_kernel<128><<<blocks, 32 * kPointerWarps, 0, stream>>>(pcopy, qkv, lse, first_key, prev_key, BT, T, scale);
    else fatal("pointer: head dim %d is not 64 or 128", D);
    CUDA_CHECK_LAST();
}

// dqk (B, T, 2 D) OVERWRITTEN with d[q | kp] and dgate (B, T) with the gate's, for sum_t dloss
// loss_t; o, dout (B, T, D) and dqkv (B, T, 3 D) scratch; workspace as the attention backward's.
inline void pointer_backward_cuda(bf16* dqk, float* dgate, bf16* o, bf16* dout, bf16* dqkv, const bf16* qkv, const float* gate,
                                  const float* w, const float* lse, const float* pcopy, const int* targets, const int* pos,
                                  const int* first_key, const int* prev_key, const int* first_query, const int* next_query,
                                  int B, int T, int D, float dloss, bool deterministic, float* workspace, cudaStream_t stream) {
    const float scale = 1.0f / std::sqrt((float)D);
    const AttnShape s = pointer_attn_shape(B, T, D);
    const long long BT = (long long)B * T;
    pointer_delta_rows_kernel<<<ceil_div(BT * D, 256), 256, 0, stream>>>(o, dout, w, BT, D, dloss);
    CUDA_CHECK_LAST();
    const int variant = deterministic ? flash::kDeterministicBackwardVariant : 0;
    attention_backward_cuda_variant(variant, dqkv, dqkv + D, dqkv + 2 * D, dout, o, lse, qkv, qkv + D, qkv + 2 * D, pos, nullptr,
                                    AttnPattern{}, s, scale, workspace, stream);
    const int blocks = ceil_div(BT, kPointerWarps), threads = 32 * kPointerWarps;
    if (D == 64) {
        pointer_backward_query_kernel<64><<<blocks, threads, 0, stream>>>(dqk, dgate, dqkv, qkv, gate, w, lse, pcopy, targets, first_key,
                                                                         prev_key, BT, T, scale, dloss);
        pointer_backward_key_kernel<64><<<blocks, threads, 0, stream>>>(dqk, dqkv, qkv, w, lse, pcopy, first_query, next_query, BT, T,
                                                                       scale, dloss);
    } else if (D == 128) {
        pointer_backward_query_kernel<128><<<blocks, threads, 0, stream>>>(dqk, dgate, dqkv, qkv, gate, w, lse, pcopy, targets, first_key,
                                                                          prev_key, BT, T, scale, dloss);
        pointer_backward_key_kernel<128><<<blocks, threads, 0, stream>>>(dqk, dqkv, qkv, w, lse, pcopy, first_query, next_query, BT, T,
                                                                        scale, dloss);
    } else {
        fatal("pointer: head dim %d is not 64 or 128", D);
    }
    CUDA_CHECK_LAST();
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
