// Rotary position embedding on the GPU (CPU reference: layers/rope.h), GPT-NeoX pairing: dim i
// of a head rotates with dim i + D/2 by angle pos * theta^(-2i/D); theta 0 rotates nothing (a
// NoPE layer: out is inp).
// The angle is formed and reduced in double: at pos ~1e6 the angle is ~1e6 rad, where an fp32
// angle is off by up to 0.03 rad (ulp 0.06) and its sine would be wrong in the second digit.
// One thread per (token, group of 8 adjacent i): it computes its 8 sincos once (double, with
// proper range reduction) and applies them to q and k of every head with 16-byte accesses, two
// heads' loads issued before their stores (out may alias inp, so the compiler cannot reorder).
#pragma once
#include "layers/cuda/common.cuh"
#include "layers/cuda/head_sums.cuh"
#include "layers/cuda/pack.cuh"

// ------------------------------------------------------------------------------------------------
// One rotated pair, shared by the few-token kernel below and the decode step's one launch
// (layers/cuda/attention_decode.cuh), so that both round the same floats to the same bf16: the
// cos and sin of pair i at position pos (double, rounded to float), and the pair rotated with
// explicit roundings (no fused multiply-add the compiler might form in one place and not the
// other).
__device__ __forceinline__ void rope_angle(int pos, int i, int D, float theta, float& c, float& s) {
    double sd, cd;
    sincos((double)pos * pow((double)theta, -2.0 * i / D), &sd, &cd);
    c = (float)cd, s = (float)sd;
}
__device__ __forceinline__ void rope_pair(float x1, float x2, float c, float s, bf16& o1, bf16& o2) {
    o1 = __float2bfloat16(__fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)));
    o2 = __float2bfloat16(__fadd_rn(__fmul_rn(x1, s), __fmul_rn(x2, c)));
}
// The factor logn_scale_queries_kernel multiplies a query at position p by (1: none); with a
// learned slope (slope != nullptr: the head's, as a float), 1 + slope ln((p + 1) / base)
// (layers/rope.h logn_slope_scale), formed in double as the reference's.
__device__ __forceinline__ float logn_factor(int p, int base) {
    return base > 0 && (long long)p + 1 > base ? (float)(log((double)p + 1) / log((double)base)) : 1.0f;
}
__device__ __forceinline__ float logn_factor(int p, int base, const bf16* slope, int h) {
    if (slope == nullptr) return logn_factor(p, base);
    return base > 0 && (long long)p + 1 > base ? (float)(1.0 + (double)__bfloat162float(slope[h]) * log(((double)p + 1) / base)) : 1.0f;
}

// ------------------------------------------------------------------------------------------------
// Kernels. SIGN = +1: forward rotation; -1: the inverse rotation (backward: rotation is orthogonal).

template <int SIGN>
__device__ __forceinline__ void rope_rotate(bf16* out,        // (B, T, 3, H, D)
                                            const bf16* inp,  // (B, T, 3, H, D); out == inp allowed
                                            const int* pos,   // (T)
                                            int B, int T, int H, int D, float theta) {
    const int half = D / 2, groups = half / 8;
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)B * T * groups) return;
    const int i0 = (int)(idx % groups) * 8;
    const long long bt = idx / groups;
    const int t = (int)(bt % T);
    float c[8], s[8];
    for (int k = 0; k < 8; k++) {
        rope_angle(pos[t], i0 + k, D, theta, c[k], s[k]);
        s[k] = SIGN > 0 ? s[k] : -s[k];
    }
    const bool copy_v = out != inp;
    const size_t row = (size_t)bt * 3 * H * D;
    constexpr int HB = 2;  // heads per batch of loads
    for (int h0 = 0; h0 < H; h0 += HB) {
        x128 x[HB][3][2];  // [head][q, k, v][first half, second half]
#pragma unroll
        for (int j = 0; j < HB; j++) {
            if (h0 + j >= H) break;
            for (int slot = 0; slot < 3; slot++) {
                if (slot == 2 && !copy_v) break;
                const bf16* p = inp + row + ((size_t)slot * H + h0 + j) * D + i0;
                x[j][slot][0] = load128cs(p);
                x[j][slot][1] = load128cs(p + half);
            }
        }
#pragma unroll
        for (int j = 0; j < HB; j++) {
            if (h0 + j >= H) break;
            for (int slot = 0; slot < 3; slot++) {
                bf16* p = out + row + ((size_t)slot * H + h0 + j) * D + i0;
                if (slot == 2) {
                    if (!copy_v) break;
                    store128(p, x[j][2][0]);
                    store128(p + half, x[j][2][1]);
                    break;
                }
                x128 o1, o2;
                for (int k = 0; k < 8; k++)
                    rope_pair(__bfloat162float(x[j][slot][0][k]), __bfloat162float(x[j][slot][1][k]), c[k], s[k], o1[k], o2[k]);
                store128(p, o1);
                store128(p + half, o2);
            }
        }
    }
}

// A few tokens (decoding one token per sequence): one thread per (token, head, i < D/2), each
// forming its one sincos (the same rope_angle and rope_pair as above: the same bits), so that the work spreads
// over B T H D / 2 threads instead of B T D / 16 (4 threads for one token of D = 64, each with
// 8 double-precision sincos in a row).
template <int SIGN>
__device__ __forceinline__ void rope_rotate_head(bf16* out, const bf16* inp, const int* pos, int B, int T, int H, int D,
                                                 float theta) {
    const int half = D / 2;
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)B * T * H * half) return;
    const int i = (int)(idx % half), h = (int)(idx / half % H);
    const long long bt = idx / half / H;
    const int t = (int)(bt % T);
    float c, s;
    rope_angle(pos[t], i, D, theta, c, s);
    s = SIGN > 0 ? s : -s;
    const size_t row = (size_t)bt * 3 * H * D;
    for (int slot = 0; slot < 2; slot++) {
        const size_t at = row + ((size_t)slot * H + h) * D + i;
        rope_pair(__bfloat162float(inp[at]), __bfloat162float(inp[at + half]), c, s, out[at], out[at + half]);
    }
    if (out != inp) {
        const size_t at = row + ((size_t)2 * H + h) * D + i;
        out[at] = inp[at], out[at + half] = inp[at + half];
    }
}

__global__ void rope_forward_head_kernel(bf16* out, const bf16* inp, const int* pos, int B, int T, int H, int D, float theta) {
    rope_rotate_head<1>(out, inp, pos, B, T, H, D, theta);
}
__global__ void rope_backward_head_kernel(bf16* dinp, const bf16* dout, const int* pos, int B, int T, int H, int D, float theta) {
    rope_rotate_head<-1>(dinp, dout, pos, B, T, H, D, theta);
}

__global__ void rope_forward_kernel(bf16* out, const bf16* inp, const int* pos, int B, int T, int H, int D, float theta) {
    rope_rotate<1>(out, inp, pos, B, T, H, D, theta);
}
__global__ void rope_backward_kernel(bf16* dinp, const bf16* dout, const int* pos, int B, int T, int H, int D, float theta) {
    rope_rotate<-1>(dinp, dout, pos, B, T, H, D, theta);
}

// ------------------------------------------------------------------------------------------------
// Launchers. D must be a multiple of 16 (8-element groups in each half) and the buffers
// 16-byte aligned.

inline void rope_launch_(int sign, bf16* out, const bf16* inp, const int* pos, int B, int T, int H, int D, float theta,
                         cudaStream_t stream) {
    if (D % 16 != 0) fatal("rope: head dim D = %d must be a multiple of 16", D);
    if (!is_aligned16(out) || !is_aligned16(inp)) fatal("rope: buffers must be 16-byte aligned");
    const long long threads = (long long)B * T * (D / 16);
    if (threads == 0) return;
    if (theta == 0.0f) {  // base 0: a NoPE layer, nothing rotates (the CPU reference's rule)
        if (out != inp) CUDA_CHECK(cudaMemcpyAsync(out, inp, (size_t)B * T * 3 * H * D * sizeof(bf16), cudaMemcpyDeviceToDevice, stream));
        return;
    }
    const int block = 128;
    if ((long long)B * T < 64) {  // decoding: a thread per head and rotated pair
        const long long per_head = (long long)B * T * H * (D / 2);
        if (sign > 0) rope_forward_head_kernel<<<ceil_div(per_head, block), block, 0, stream>>>(out, inp, pos, B, T, H, D, theta);
        else rope_backward_head_kernel<<<ceil_div(per_head, block), block, 0, stream>>>(out, inp, pos, B, T, H, D, theta);
        CUDA_CHECK_LAST();
        return;
    }
    if (sign > 0) rope_forward_kernel<<<ceil_div(threads, block), block, 0, stream>>>(out, inp, pos, B, T, H, D, theta);
    else rope_backward_kernel<<<ceil_div(threads, block), block, 0, stream>>>(out, inp, pos, B, T, H, D, theta);
    CUDA_CHECK_LAST();
}

// out: q and k rotated, v copied. out == inp allowed.
inline void rope_forward_cuda(bf16* out,          // (B, T, 3, H, D)
                              const bf16* inp,    // (B, T, 3, H, D)
                              const int* pos,     // (T) device: global position of each token
                              int B, int T, int H, int D, float theta, cudaStream_t stream) {
    rope_launch_(+1, out, inp, pos, B, T, H, D, theta, stream);
}

// dinp OVERWRITTEN with the inverse rotation of dout (v's gradient copied). dinp == dout allowed.
inline void rope_backward_cuda(bf16* dinp,         // (B, T, 3, H, D)
                               const bf16* dout,   // (B, T, 3, H, D)
                               const int* pos,     // (T) device
                               int B, int T, int H, int D, float theta, cudaStream_t stream) {
    rope_launch_(-1, dinp, dout, pos, B, T, H, D, theta, stream);
}

// ------------------------------------------------------------------------------------------------
// Log-n attention on the queries (CPU reference: logn_scale_queries in layers/rope.h): q at
// position p times ln(p + 1) / ln(base) when p + 1 > base, or with learned slopes (slope: (H),
// nullptr for none) 1 + slope_h ln((p + 1) / base). The factor is formed in double, as the
// reference's, and rounded to float; one thread per 8 elements of q (16-byte accesses).

__global__ void logn_scale_queries_kernel(bf16* qkv, const int* pos, int B, int T, int H, int D, int base, const bf16* slope) {
    const int groups = H * D / 8;
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)B * T * groups) return;
    const long long bt = idx / groups;
    const int p = pos[bt % T];
    if ((long long)p + 1 <= base) return;
    const float s = logn_factor(p, base, slope, (int)(idx % groups) * 8 / D);
    bf16* q = qkv + (size_t)bt * 3 * H * D + (size_t)(idx % groups) * 8;
    x128 x = load128(q);
    for (int k = 0; k < 8; k++) x[k] = __float2bfloat16(__bfloat162float(x[k]) * s);
    store128(q, x);
}

inline void logn_check_(int D, const void* qkv) {
    if (D % 8 != 0 || !is_aligned16(qkv)) fatal("logn_scale_queries: head dim %d must be a multiple of 8, the buffer 16-byte aligned", D);
}

// In place on q (slot 0); base 0 launches nothing. The backward of q is the same call on dqkv
// (after logn_slope_backward_cuda, which reads dq' before it is scaled).
inline void logn_scale_queries_cuda(bf16* qkv,         // (B, T, 3, H, D)
                                    const int* pos,    // (T) device
                                    int B, int T, int H, int D, int base, cudaStream_t stream, const bf16* slope = nullptr) {
    if (base == 0) return;
    logn_check_(D, qkv);
    const long long threads = (long long)B * T * H * D / 8;
    if (threads == 0) return;
    logn_scale_queries_kernel<<<ceil_div(threads, 128), 128, 0, stream>>>(qkv, pos, B, T, H, D, base, slope);
    CUDA_CHECK_LAST();
}

// The learned slopes' gradient (CPU reference: logn_slope_backward): dL/ds_h = sum over tokens
// past the base of ln((p + 1) / base) / f q' . dq' (q = q' / f, the forward's scaled q). It is a
// pass over q and dq of the NoPE layers only, a few hundred MB at 128K tokens against the
// attention's seconds, so it is written for determinism, not speed: a block sums a fixed slab of
// kLognSlab tokens of one head into a partial of its own (each token's 8-element groups by a fixed
// butterfly), and a second kernel adds a head's partials in a fixed order (layers/cuda/head_sums.cuh).
constexpr int kLognThreads = 256;
constexpr int kLognSlab = 256;
// grid (ceil(B T / kLognSlab), H); a token's D / 8 threads sit in one warp.
__global__ void logn_slope_backward_partial_kernel(float* __restrict__ partial, const bf16* __restrict__ dqkv,
                                                   const bf16* __restrict__ qkv, const int* __restrict__ pos,
                                                   const bf16* __restrict__ slope, long long rows, int T, int H, int D, int base) {
    const int h = blockIdx.y, per_row = D / 8, groups = kLognThreads / per_row;
    const int g = threadIdx.x / per_row, d0 = (threadIdx.x % per_row) * 8;
    const long long first = (long long)blockIdx.x * kLognSlab;
    float mine = 0;
    for (int k = g; k < kLognSlab; k += groups) {
        const long long r = first + k;
        float dot = 0, w = 0;
        if (r < rows) {
            const int p = pos[r % T];
            const float f = logn_factor(p, base, slope, h);
            if ((long long)p + 1 > base && f != 0.0f) {
                const size_t at = (size_t)r * 3 * H * D + (size_t)h * D + d0;
                const x128 dq = load128(dqkv + at), q = load128(qkv + at);
                for (int j = 0; j < 8; j++) dot += __bfloat162float(dq[j]) * __bfloat162float(q[j]);
                w = (float)(log(((double)p + 1) / base) / f);
            }
        }
        // Every lane takes part (a warp's groups may straddle the end of the rows).
        for (int o = per_row / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o, per_row);
        mine += w * dot;
    }
    store_block_partial<kLognThreads>(partial, mine, per_row, g);
}
// The scratch logn_slope_backward_cuda needs for B T tokens and H heads, in floats.
inline size_t logn_slope_scratch_floats(long long rows, int H) { return (size_t)ceil_div(rows, kLognSlab) * H; }
// Adds the slopes' gradient into dslope (H, fp32) from dq' and q' (slot 0 of dqkv and qkv), before
// dq is scaled; scratch: logn_slope_scratch_floats(B T, H) floats.
inline void logn_slope_backward_cuda(float* dslope, const bf16* dqkv, const bf16* qkv, const int* pos, const bf16* slope, int B,
                                     int T, int H, int D, int base, float* scratch, cudaStream_t stream) {
    const long long rows = (long long)B * T;
    if (rows == 0 || base == 0) return;
    logn_check_(D, dqkv), logn_check_(D, qkv);
    if (D < 8 || D > 256 || (D & (D - 1)) != 0) fatal("logn_slope_backward: head dim D = %d must be a power of two from 8 to 256", D);
    const int slabs = ceil_div(rows, kLognSlab);
    logn_slope_backward_partial_kernel<<<dim3(slabs, H), kLognThreads, 0, stream>>>(scratch, dqkv, qkv, pos, slope, rows, T, H, D, base);
    CUDA_CHECK_LAST();
    add_head_partials_kernel<<<H, 32, 0, stream>>>(dslope, scratch, slabs, 1.0f);
    CUDA_CHECK_LAST();
}
