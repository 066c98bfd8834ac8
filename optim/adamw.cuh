// AdamW on the GPU (CPU reference: optim/adamw.h), with fp32 master weights and a bf16 copy for
// the forward. The gradient's scale (the clip factor of optim/clip.cuh) is read from device memory.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>
#include "layers/cuda/common.cuh"
#include "optim/update_shard.h"

// ------------------------------------------------------------------------------------------------
// AdamW: the arithmetic of adamw_update in optim/adamw.h, in fp32, with the bias corrections
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

// The same update over many tensors in one launch (a launch per tensor, 147 for GPT-2 124M, costs
// more than the update's own memory traffic: notes/training.md, AdamW in one launch). A table of
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

// The table of the weights a rank updates: each tensor's part inside its shard of the flat weights
// (optim/update_shard.h; UpdateShard{0, n}: all of them), with the tensor's decay flag. Tensor:
// anything with offset, size and decay (the model's ParamTensor).
template <class Tensor>
std::vector<AdamWChunk> adamw_shard_chunks(const std::vector<Tensor>& layout, UpdateShard shard) {
    std::vector<AdamWPiece> pieces;
    for_each_in_shard(layout, shard, [&](const Tensor& t, size_t at, size_t count) { pieces.push_back({at, count, t.decay}); });
    return adamw_chunks(pieces);
}
// Room for the table of any shard of n weights in n_tensors tensors: each tensor's part adds at
// most one chunk to n / ADAMW_CHUNK.
inline size_t adamw_max_chunks(size_t n, size_t n_tensors) { return n / ADAMW_CHUNK + n_tensors + 2; }

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
