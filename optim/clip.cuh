// Gradient-norm clipping on the GPU (CPU reference: optim/clip.h). The clip factor stays on the
// device (grad_norm_squared_cuda -> clip_scale_cuda -> adamw_update*_cuda, optim/adamw.cuh, read it
// from device memory), so a step needs no host sync.
#pragma once
#include <cstdint>
#include "layers/cuda/common.cuh"
#include "layers/cuda/pack.cuh"

// ------------------------------------------------------------------------------------------------
// Gradient norm: a fixed grid (a function of nothing but these constants, so the same sum on any
// GPU), each thread summing squares in double over a fixed grid-stride set, each block reducing
// in a fixed order into one double; then one block sums the blocks in order. Deterministic.

constexpr int GNORM_BLOCKS = 1024, GNORM_THREADS = 512;

__global__ void __launch_bounds__(GNORM_THREADS)
    grad_norm_squared_kernel(double* partial,      // (GNORM_BLOCKS)
                             const float* grad,    // (n)
                             size_t n) {
    __shared__ double shm[GNORM_THREADS / 32];
    double s = 0;
    const size_t stride = (size_t)GNORM_BLOCKS * GNORM_THREADS;
    const size_t start = (size_t)blockIdx.x * GNORM_THREADS + threadIdx.x;
    if (((uintptr_t)grad & 15) == 0) {
        // 4 floats per step: element groups [4j, 4j+4); the scalar tail goes to thread 0 of block 0.
        const size_t n4 = n / 4;
        for (size_t j = start; j < n4; j += stride) {
            const f128 g = load128cs(grad + 4 * j);
            for (int k = 0; k < 4; k++) s += (double)g[k] * g[k];
        }
        if (start == 0)
            for (size_t i = 4 * n4; i < n; i++) s += (double)grad[i] * grad[i];
    } else {
        for (size_t i = start; i < n; i += stride) s += (double)grad[i] * grad[i];
    }
    s = warp_sum(s);
    if (threadIdx.x % 32 == 0) shm[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0;
        for (int w = 0; w < GNORM_THREADS / 32; w++) t += shm[w];
        partial[blockIdx.x] = t;
    }
}

__global__ void grad_norm_squared_final_kernel(float* out, const double* partial) {
    __shared__ double shm[32];
    double s = 0;
    for (int i = threadIdx.x; i < GNORM_BLOCKS; i += 32 * 32) s += partial[i];  // blockDim = 1024
    s = warp_sum(s);
    if (threadIdx.x % 32 == 0) shm[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0;
        for (int w = 0; w < 32; w++) t += shm[w];
        *out = (float)t;
    }
}

// scale = max_norm / norm when norm > max_norm > 0, else 1 (optim/clip.h: clip_scale).
__global__ void clip_scale_kernel(float* scale_out, const float* norm_squared, float max_norm) {
    const double norm = sqrt((double)*norm_squared);
    *scale_out = (max_norm > 0 && norm > max_norm) ? (float)(max_norm / norm) : 1.0f;
}

// ------------------------------------------------------------------------------------------------
// Launchers

inline size_t grad_norm_squared_scratch_bytes() { return GNORM_BLOCKS * sizeof(double); }

// *out = sum grad^2 (device scalar, fp32 of a double sum). scratch: grad_norm_squared_scratch_bytes()
// (8 KiB), 8-byte aligned.
inline void grad_norm_squared_cuda(float* out, const float* grad, size_t n, float* scratch, cudaStream_t stream) {
    if ((uintptr_t)scratch & 7) fatal("grad_norm_squared: scratch must be 8-byte aligned");
    double* partial = reinterpret_cast<double*>(scratch);
    grad_norm_squared_kernel<<<GNORM_BLOCKS, GNORM_THREADS, 0, stream>>>(partial, grad, n);
    CUDA_CHECK_LAST();
    grad_norm_squared_final_kernel<<<1, 1024, 0, stream>>>(out, partial);
    CUDA_CHECK_LAST();
}

inline void clip_scale_cuda(float* scale_out, const float* norm_squared, float max_norm, cudaStream_t stream) {
    clip_scale_kernel<<<1, 1, 0, stream>>>(scale_out, norm_squared, max_norm);
    CUDA_CHECK_LAST();
}
