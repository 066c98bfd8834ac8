// GELU (tanh approximation) on the GPU (CPU reference: layers/gelu.h). Elementwise, 8 bf16 per
// thread through 16-byte accesses; misaligned buffers or a tail of n % 8 take a scalar path.
#pragma once
#include "layers/cuda/common.cuh"
#include "layers/cuda/pack.cuh"

// ------------------------------------------------------------------------------------------------
// Math, fp32: the CPU reference's function, written without its cancellation. With
// u = sqrt(2/pi) (x + 0.044715 x^3) and s = sigmoid(2u) = (1 + tanh u) / 2:
//   gelu(x)  = 0.5 x (1 + tanh u)                  = x s
//   gelu'(x) = 0.5 (1 + tanh u) + 0.5 x sech^2(u) u' = s + 2 x s (1 - s) u'
// In fp32, 1 + tanh(u) loses every digit once x < -4 (tanh(u) rounds to -1); the sigmoid form
// keeps full relative accuracy in the negative tail.

__device__ __forceinline__ float gelu_tanh(float x) {
    const float k = 0.7978845608028654f;  // sqrt(2/pi)
    const float u = k * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
}
__device__ __forceinline__ float gelu_tanh_grad(float x) {
    const float k = 0.7978845608028654f;
    const float u = k * (x + 0.044715f * x * x * x);
    const float s = 1.0f / (1.0f + expf(-2.0f * u));
    const float du = k * (1.0f + 3.0f * 0.044715f * x * x);
    const float t = s * (1.0f - s);  // 0 in both far tails, where du may overflow
    return t > 0.0f ? s + 2.0f * x * t * du : s;
}

// ------------------------------------------------------------------------------------------------
// Kernels. VEC: every buffer 16-byte aligned; thread i owns elements [8i, 8i+8) (the last thread
// of a ragged n finishes the tail one element at a time).

template <bool VEC>
__global__ void gelu_forward_kernel(bf16* out, const bf16* inp, size_t n) {  // (n) -> (n)
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= n) return;
    if (VEC && i + 8 <= n) {
        const x128 x = load128cs(inp + i);
        x128 r;
        for (int j = 0; j < 8; j++) r[j] = __float2bfloat16(gelu_tanh(__bfloat162float(x[j])));
        store128(out + i, r);
        return;
    }
    for (size_t k = i; k < n && k < i + 8; k++) out[k] = __float2bfloat16(gelu_tanh(__bfloat162float(inp[k])));
}

// dinp may alias dout (in place): each thread reads its elements before writing them.
template <bool VEC>
__global__ void gelu_backward_kernel(bf16* dinp, const bf16* inp, const bf16* dout, size_t n) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= n) return;
    if (VEC && i + 8 <= n) {
        const x128 x = load128cs(inp + i), d = load128cs(dout + i);
        x128 r;
        for (int j = 0; j < 8; j++)
            r[j] = __float2bfloat16(gelu_tanh_grad(__bfloat162float(x[j])) * __bfloat162float(d[j]));
        store128(dinp + i, r);
        return;
    }
    for (size_t k = i; k < n && k < i + 8; k++)
        dinp[k] = __float2bfloat16(gelu_tanh_grad(__bfloat162float(inp[k])) * __bfloat162float(dout[k]));
}

// ------------------------------------------------------------------------------------------------
// Launchers

inline void gelu_forward_cuda(bf16* out, const bf16* inp, size_t n, cudaStream_t stream) {  // (n) -> (n)
    if (n == 0) return;
    const int block = 256;
    const int grid = ceil_div((long long)((n + 7) / 8), block);
    if (is_aligned16(out) && is_aligned16(inp)) gelu_forward_kernel<true><<<grid, block, 0, stream>>>(out, inp, n);
    else gelu_forward_kernel<false><<<grid, block, 0, stream>>>(out, inp, n);
    CUDA_CHECK_LAST();
}

// dinp = gelu'(inp) * dout, OVERWRITTEN; dinp == dout allowed.
inline void gelu_backward_cuda(bf16* dinp, const bf16* inp, const bf16* dout, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    const int block = 256;
    const int grid = ceil_div((long long)((n + 7) / 8), block);
    if (is_aligned16(dinp) && is_aligned16(inp) && is_aligned16(dout))
        gelu_backward_kernel<true><<<grid, block, 0, stream>>>(dinp, inp, dout, n);
    else
        gelu_backward_kernel<false><<<grid, block, 0, stream>>>(dinp, inp, dout, n);
    CUDA_CHECK_LAST();
}
