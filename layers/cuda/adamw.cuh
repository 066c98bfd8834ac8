// AdamW and gradient-norm clipping on the GPU (CPU reference: layers/adamw.h), with fp32 master
// weights and a bf16 copy for the forward. The clip factor stays on the device (grad_norm ->
// clip_scale -> adamw_update read it from device memory), so a step needs no host sync.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>
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

// scale = max_norm / norm when norm > max_norm > 0, else 1 (layers/adamw.h: clip_scale).
__global__ void clip_scale_kernel(float* scale_out, const float* norm_squared, float max_norm) {
    const double norm = sqrt((double)*norm_squared);
    *scale_out = (max_norm > 0 && norm > max_norm) ? (float)(max_norm / norm) : 1.0f;
}

// ------------------------------------------------------------------------------------------------
// AdamW: the arithmetic of adamw_update in layers/adamw.h, in fp32, with the bias corrections
// computed in double on the host (as the reference does) and divided in double here too.

// Element i's update: both kernels below run exactly this, so they give the same bits.
__device__ __forceinline__ void adamw_element(size_t i, float* master, bf16* param, float* m, float* v, const float* grad,
                                              float scale, float lr, float beta1, float beta2, float eps, float weight_decay,
                                              double bc1, double bc2) {
    const float g = grad[i] * scale;
    const float mi = beta1 * m[i] + (1 - beta1) * g;
    const float vi = beta2 * v[i] + (1 - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float m_hat = (float)(mi / bc1), v_hat = (float)(vi / bc2);
    float p = master[i];
    p -= lr * (m_hat / (sqrtf(v_hat) + eps) + weight_decay * p);
    master[i] = p;
    param[i] = __float2bfloat16(p);
}

__global__ void adamw_update_kernel(float* master, bf16* param, float* m, float* v, const float* grad, size_t n,
                                    float lr, float beta1, float beta2, float eps, float weight_decay, double bc1,
                                    double bc2, const float* grad_scale) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float scale = grad_scale ? *grad_scale : 1.0f;
    adamw_element(i, master, param, m, v, grad, scale, lr, beta1, beta2, eps, weight_decay, bc1, bc2);
}

// The same update over many tensors in one launch (the training step's 147 launches, one per
// tensor, were 1.6 ms against a 0.9 ms floor for GPT-2 124M: bench_train --split). A table of
// chunks, each at most ADAMW_CHUNK elements of one tensor with its weight decay, one block each;
// the arithmetic is adamw_element's, as adamw_update_kernel's, so the bits are the same.
constexpr int ADAMW_CHUNK = 4096, ADAMW_THREADS = 256;
struct AdamWChunk {
    unsigned long long offset;  // first element in the flat buffers
    unsigned int count;         // <= ADAMW_CHUNK
    unsigned int decay;         // 1: the decay of the launch applies (matrices), 0: none
};

__global__ void __launch_bounds__(ADAMW_THREADS)
    adamw_update_chunks_kernel(float* master, bf16* param, float* m, float* v, const float* grad, const AdamWChunk* chunks,
                               float lr, float beta1, float beta2, float eps, float weight_decay, double bc1, double bc2,
                               const float* grad_scale) {
    const AdamWChunk c = chunks[blockIdx.x];
    const float scale = grad_scale ? *grad_scale : 1.0f;
    const float wd = c.decay ? weight_decay : 0.0f;
    for (unsigned int j = threadIdx.x; j < c.count; j += ADAMW_THREADS)
        adamw_element(c.offset + j, master, param, m, v, grad, scale, lr, beta1, beta2, eps, wd, bc1, bc2);
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

// One AdamW step (step is 1-based). grad_scale: device scalar multiplying the gradient (the clip
// factor), or nullptr for 1.
inline void adamw_update_cuda(float* master,      // (n) fp32 weights
                              bf16* param,        // (n) bf16 copy, written
                              float* m, float* v, // (n) moments
                              const float* grad,  // (n)
                              size_t n, float lr, float beta1, float beta2, float eps, float weight_decay, int step,
                              const float* grad_scale, cudaStream_t stream) {
    if (n == 0) return;
    const double bc1 = 1.0 - std::pow((double)beta1, step);
    const double bc2 = 1.0 - std::pow((double)beta2, step);
    const int block = 256;
    adamw_update_kernel<<<ceil_div((long long)n, block), block, 0, stream>>>(master, param, m, v, grad, n, lr, beta1, beta2,
                                                                            eps, weight_decay, bc1, bc2, grad_scale);
    CUDA_CHECK_LAST();
}

// The chunk table of the pieces [offset, offset + count) of the flat buffers, each with its decay
// flag (built once on the host; the layout does not change). Elements outside every piece are
// left alone.
struct AdamWPiece {
    size_t offset, count;
    bool decay;
};
inline std::vector<AdamWChunk> adamw_chunks(const std::vector<AdamWPiece>& pieces) {
    std::vector<AdamWChunk> out;
    for (const AdamWPiece& p : pieces)
        for (size_t at = 0; at < p.count; at += ADAMW_CHUNK)
            out.push_back({(unsigned long long)(p.offset + at), (unsigned int)std::min<size_t>(ADAMW_CHUNK, p.count - at),
                           p.decay ? 1u : 0u});
    return out;
}

// One AdamW step over every chunk of the table (device copy of adamw_chunks, n_chunks long);
// weight_decay applies to the chunks marked for it. The rest as adamw_update_cuda.
inline void adamw_update_chunks_cuda(float* master, bf16* param, float* m, float* v, const float* grad,
                                     const AdamWChunk* chunks, int n_chunks, float lr, float beta1, float beta2, float eps,
                                     float weight_decay, int step, const float* grad_scale, cudaStream_t stream) {
    if (n_chunks == 0) return;
    const double bc1 = 1.0 - std::pow((double)beta1, step);
    const double bc2 = 1.0 - std::pow((double)beta2, step);
    adamw_update_chunks_kernel<<<n_chunks, ADAMW_THREADS, 0, stream>>>(master, param, m, v, grad, chunks, lr, beta1, beta2, eps,
                                                                       weight_decay, bc1, bc2, grad_scale);
    CUDA_CHECK_LAST();
}
