// LayerNorm on the GPU (CPU reference: layers/layernorm.h), bf16 in and out, fp32 statistics.
// One warp per row, 16-byte accesses. The backward is deterministic: each warp keeps its own
// column partials of dweight/dbias in shared memory, a block sums its warps in order into a
// per-block row of the scratch, and a second kernel sums the blocks in order (no atomics).
#pragma once
#include "layers/cuda/common.cuh"
#include "layers/cuda/pack.cuh"

// ------------------------------------------------------------------------------------------------
// Kernels

// One warp's statistics of a row x (C): two passes (mean, then centred variance, like the CPU
// reference) so a large mean does not cancel the variance; the second read hits L1. Shared with
// decoding's fused products (matmul.cuh: matmul_rows_kernel), which then normalize to the same bits.
__device__ __forceinline__ void layernorm_row_stats(const bf16* x, int C, int lane, float& mean, float& rstd) {
    float sum = 0;
    for (int c = lane * 8; c < C; c += 256) {
        const x128 v = load128(x + c);
        for (int j = 0; j < 8; j++) sum += __bfloat162float(v[j]);
    }
    const float m = warp_sum(sum) / C;
    float var = 0;
    for (int c = lane * 8; c < C; c += 256) {
        const x128 v = load128(x + c);
        for (int j = 0; j < 8; j++) {
            const float d = __bfloat162float(v[j]) - m;
            var += d * d;
        }
    }
    mean = m;
    rstd = 1.0f / sqrtf(warp_sum(var) / C + 1e-5f);
}

// One element of a normalized row, as the forward writes it (bf16).
__device__ __forceinline__ bf16 layernorm_value(bf16 x, float mean, float rstd, bf16 w, bf16 b) {
    return __float2bfloat16((__bfloat162float(x) - mean) * rstd * __bfloat162float(w) + __bfloat162float(b));
}

// One warp per row (layernorm_row_stats), the third read of the row from L1.
__global__ void layernorm_forward_kernel(bf16* out,     // (N, C)
                                         float* mean,   // (N)
                                         float* rstd,   // (N)
                                         const bf16* inp,  // (N, C)
                                         const bf16* weight, const bf16* bias,  // (C)
                                         int N, int C) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) return;
    const bf16* x = inp + (size_t)row * C;
    float m, s;
    layernorm_row_stats(x, C, lane, m, s);
    bf16* o = out + (size_t)row * C;
    for (int c = lane * 8; c < C; c += 256) {
        const x128 v = load128cs(x + c), w = load128(weight + c), b = load128(bias + c);
        x128 r;
        for (int j = 0; j < 8; j++) r[j] = layernorm_value(v[j], m, s, w[j], b[j]);
        store128(o + c, r);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

constexpr int LN_BWD_WARPS = 8;  // warps per block of the backward
// Blocks of the backward: a function of N only, never of the GPU, so dweight/dbias round the same
// way on an H100 and an H200 (bit-identical resumes across machines).
inline int layernorm_backward_blocks(int N) {
    const int b = ceil_div(N, LN_BWD_WARPS);
    return b < 528 ? (b > 0 ? b : 1) : 528;
}

// Warp w of block b handles rows (b*W + w) + k*G*W. Shared memory: W x 2 x C floats.
__global__ void __launch_bounds__(32 * LN_BWD_WARPS)
    layernorm_backward_kernel(bf16* dinp,              // (N, C) +=
                              float* partials,         // (G, 2, C) dweight, dbias per block
                              const bf16* dout,        // (N, C)
                              const bf16* inp,         // (N, C)
                              const bf16* weight,      // (C)
                              const float* mean, const float* rstd,  // (N)
                              int N, int C) {
    extern __shared__ __align__(16) float smem[];  // (W, 2, C)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float* dw_acc = smem + (size_t)warp * 2 * C;
    float* db_acc = dw_acc + C;
    for (int c = lane * 8; c < C; c += 256)
        for (int j = 0; j < 8; j++) dw_acc[c + j] = 0, db_acc[c + j] = 0;
    const int stride = gridDim.x * LN_BWD_WARPS;
    for (int row = blockIdx.x * LN_BWD_WARPS + warp; row < N; row += stride) {
        const bf16* d = dout + (size_t)row * C;
        const bf16* x = inp + (size_t)row * C;
        const float m = mean[row], s = rstd[row];
        float dnorm_sum = 0, dnorm_norm_sum = 0;
        for (int c = lane * 8; c < C; c += 256) {
            const x128 dv = load128(d + c), xv = load128(x + c), wv = load128(weight + c);
            for (int j = 0; j < 8; j++) {
                const float norm = (__bfloat162float(xv[j]) - m) * s;
                const float dnorm = __bfloat162float(dv[j]) * __bfloat162float(wv[j]);
                dnorm_sum += dnorm;
                dnorm_norm_sum += dnorm * norm;
            }
        }
        const float dnorm_mean = warp_sum(dnorm_sum) / C, dnorm_norm_mean = warp_sum(dnorm_norm_sum) / C;
        bf16* dx = dinp + (size_t)row * C;
        for (int c = lane * 8; c < C; c += 256) {
            const x128 dv = load128cs(d + c), xv = load128cs(x + c), wv = load128(weight + c);
            const x128 old = load128cs(dx + c);
            x128 r;
            // The warp's own column partials: 16-byte shared-memory read-modify-writes.
            f128 w0 = load128(dw_acc + c), w1 = load128(dw_acc + c + 4), b0 = load128(db_acc + c), b1 = load128(db_acc + c + 4);
            for (int j = 0; j < 8; j++) {
                const float dval = __bfloat162float(dv[j]);
                const float norm = (__bfloat162float(xv[j]) - m) * s;
                const float dnorm = dval * __bfloat162float(wv[j]);
                r[j] = __float2bfloat16(__bfloat162float(old[j]) + (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s);
                if (j < 4) w0[j] += dval * norm, b0[j] += dval;
                else w1[j - 4] += dval * norm, b1[j - 4] += dval;
            }
            store128(dw_acc + c, w0), store128(dw_acc + c + 4, w1), store128(db_acc + c, b0), store128(db_acc + c + 4, b1);
            store128(dx + c, r);
        }
    }
    __syncthreads();
    float* out = partials + (size_t)blockIdx.x * 2 * C;
    for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) {
        float s = 0;
        for (int w = 0; w < LN_BWD_WARPS; w++) s += smem[(size_t)w * 2 * C + c];
        out[c] = s;
    }
}

// Columns [32*blockIdx.x, +32) of (dweight | dbias): lane y of block (32, 16) sums the block
// partials y, y+16, ... in order, then lanes are combined in order 0..15 (deterministic).
constexpr int LN_RED_LANES = 16;
__global__ void __launch_bounds__(32 * LN_RED_LANES)
    layernorm_backward_reduce_kernel(float* dweight, float* dbias,  // (C) +=
                                     const float* partials,         // (G, 2, C)
                                     int G, int C) {
    __shared__ float part[LN_RED_LANES][32];
    const int c = blockIdx.x * 32 + threadIdx.x;
    float s = 0;
    if (c < 2 * C) {
#pragma unroll 4
        for (int g = threadIdx.y; g < G; g += LN_RED_LANES) s += partials[(size_t)g * 2 * C + c];
    }
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y != 0 || c >= 2 * C) return;
    float t = 0;
    for (int y = 0; y < LN_RED_LANES; y++) t += part[y][threadIdx.x];
    if (c < C) dweight[c] += t;
    else dbias[c - C] += t;
}

// ------------------------------------------------------------------------------------------------
// Launchers. C must be a multiple of 8, buffers 16-byte aligned.

inline void layernorm_check_(int C, const void* a, const void* b, const void* c) {
    if (C % 8 != 0) fatal("layernorm: C = %d must be a multiple of 8 (16-byte vector access)", C);
    if (!is_aligned16(a) || !is_aligned16(b) || !is_aligned16(c)) fatal("layernorm: buffers must be 16-byte aligned");
}

inline void layernorm_forward_cuda(bf16* out,         // (N, C)
                                   float* mean,       // (N)
                                   float* rstd,       // (N)
                                   const bf16* inp,   // (N, C)
                                   const bf16* weight, const bf16* bias,  // (C)
                                   int N, int C, cudaStream_t stream) {
    layernorm_check_(C, out, inp, weight);
    layernorm_check_(C, bias, bias, bias);
    if (N == 0) return;
    const int rows_per_block = 8;
    layernorm_forward_kernel<<<ceil_div(N, rows_per_block), 32 * rows_per_block, 0, stream>>>(out, mean, rstd, inp,
                                                                                              weight, bias, N, C);
    CUDA_CHECK_LAST();
}

inline size_t layernorm_backward_scratch_bytes(int N, int C) {
    return (size_t)layernorm_backward_blocks(N) * 2 * C * sizeof(float);
}

inline void layernorm_backward_cuda(bf16* dinp,                    // (N, C) ACCUMULATE: +=
                                    float* dweight, float* dbias,  // (C) +=
                                    const bf16* dout,              // (N, C)
                                    const bf16* inp,               // (N, C)
                                    const bf16* weight,            // (C)
                                    const float* mean, const float* rstd,  // (N)
                                    int N, int C,
                                    float* scratch,  // layernorm_backward_scratch_bytes(N, C)
                                    cudaStream_t stream) {
    layernorm_check_(C, dinp, dout, inp);
    layernorm_check_(C, weight, weight, weight);
    if (N == 0) return;
    const int G = layernorm_backward_blocks(N);
    const size_t smem = (size_t)LN_BWD_WARPS * 2 * C * sizeof(float);
    if (smem > 227 * 1024) fatal("layernorm_backward: C = %d needs %zu bytes of shared memory (max 227 KiB)", C, smem);
    static size_t smem_raised = 48 * 1024;  // per process; the attribute is per function
    if (smem > smem_raised) {
        CUDA_CHECK(cudaFuncSetAttribute(layernorm_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        smem_raised = smem;
    }
    layernorm_backward_kernel<<<G, 32 * LN_BWD_WARPS, smem, stream>>>(dinp, scratch, dout, inp, weight, mean, rstd, N, C);
    CUDA_CHECK_LAST();
    layernorm_backward_reduce_kernel<<<ceil_div(2 * C, 32), dim3(32, LN_RED_LANES), 0, stream>>>(dweight, dbias, scratch, G, C);
    CUDA_CHECK_LAST();
}
