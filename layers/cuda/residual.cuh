// Residual connection on the GPU (CPU reference: layers/residual.h): out = a + b, summed in fp32
// and rounded once. The backward needs no kernel: the caller passes the same gradient to both
// branches (the layernorm backward accumulates into the residual stream's gradient).
#pragma once
#include "layers/cuda/common.cuh"
#include "layers/cuda/pack.cuh"

template <bool VEC>
__global__ void residual_forward_kernel(bf16* out, const bf16* a, const bf16* b, size_t n) {  // (n) each
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= n) return;
    if (VEC && i + 8 <= n) {
        const x128 x = load128cs(a + i), y = load128cs(b + i);
        x128 r;
        for (int j = 0; j < 8; j++) r[j] = __float2bfloat16(__bfloat162float(x[j]) + __bfloat162float(y[j]));
        store128(out + i, r);
        return;
    }
    for (size_t k = i; k < n && k < i + 8; k++) out[k] = __float2bfloat16(__bfloat162float(a[k]) + __bfloat162float(b[k]));
}

// out may alias a or b.
inline void residual_forward_cuda(bf16* out, const bf16* a, const bf16* b, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    const int block = 256;
    const int grid = ceil_div((long long)((n + 7) / 8), block);
    if (is_aligned16(out) && is_aligned16(a) && is_aligned16(b))
        residual_forward_kernel<true><<<grid, block, 0, stream>>>(out, a, b, n);
    else
        residual_forward_kernel<false><<<grid, block, 0, stream>>>(out, a, b, n);
    CUDA_CHECK_LAST();
}
