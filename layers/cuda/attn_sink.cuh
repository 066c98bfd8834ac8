// The attention sink on the GPU (CPU reference and the math: layers/attn_sink.h). Both kernels
// are one pass over O (bf16) and the row log-sum-exps (fp32), a small fraction of the attention
// they follow. One warp per row of head h; the sink logit is read from the bf16 weights.
//
// The backward's sum over rows is deterministic without atomics: a block of kSinkWarps warps sums
// a fixed slab of kSinkSlab rows of one head into a partial of its own (each warp its rows in
// order, then the warps in order), and a second kernel adds a head's partials in order. The slabs
// depend on the shapes only, so every run rounds dsink the same way.
#pragma once
#include "layers/cuda/common.cuh"
#include "layers/cuda/pack.cuh"

constexpr int kSinkWarps = 8;     // rows in flight per block
constexpr int kSinkSlab = 1024;   // rows of one head each backward block sums

// Rows r = b N + i of head h: O at ((b N + i) H + h) D, L at (b H + h) N + i.
__device__ __forceinline__ size_t sink_out_row(long long r, int h, int H, int D) {
    return ((size_t)r * H + h) * D;
}
__device__ __forceinline__ size_t sink_lse_row(long long r, int h, int N, int H) {
    return ((size_t)(r / N) * H + h) * N + (size_t)(r % N);
}

// grid (ceil(B N / kSinkWarps), H): warp w of block x takes row x kSinkWarps + w of head blockIdx.y.
__global__ void attn_sink_forward_kernel(bf16* out, float* lse, const bf16* sink, long long rows, int N, int H, int D) {
    const int h = blockIdx.y, lane = threadIdx.x & 31;
    const long long r = (long long)blockIdx.x * kSinkWarps + (threadIdx.x >> 5);
    if (r >= rows) return;
    const float s = __bfloat162float(sink[h]);
    float* lp = lse + sink_lse_row(r, h, N, H);
    const float L = *lp, mx = fmaxf(L, s);
    const float L_new = mx + logf(expf(L - mx) + expf(s - mx));  // L = -inf (no key): L_new = s, O stays 0
    const float f = expf(L - L_new);
    bf16* o = out + sink_out_row(r, h, H, D);
    for (int d = lane; d < D; d += 32) o[d] = __float2bfloat16(f * __bfloat162float(o[d]));
    __syncwarp();
    if (lane == 0) *lp = L_new;
}

// grid (ceil(B N / kSinkSlab), H): partial[h * slabs + x] = sum over the slab's rows of
// e^(s_h - L') rowsum(dO O').
__global__ void attn_sink_backward_partial_kernel(float* partial, const bf16* dout, const bf16* out, const float* lse,
                                                  const bf16* sink, long long rows, int N, int H, int D) {
    const int h = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float s = __bfloat162float(sink[h]);
    const long long first = (long long)blockIdx.x * kSinkSlab;
    float mine = 0;  // lane 0's running sum over this warp's rows, in order
    for (int k = warp; k < kSinkSlab; k += kSinkWarps) {
        const long long r = first + k;
        if (r >= rows) break;
        const size_t row = sink_out_row(r, h, H, D);
        float delta = 0;
        for (int d = lane; d < D; d += 32) delta += __bfloat162float(dout[row + d]) * __bfloat162float(out[row + d]);
        delta = warp_sum(delta);
        mine += expf(s - lse[sink_lse_row(r, h, N, H)]) * delta;
    }
    __shared__ float warp_sums[kSinkWarps];
    if (lane == 0) warp_sums[warp] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
        float total = 0;
        for (int w = 0; w < kSinkWarps; w++) total += warp_sums[w];
        partial[(size_t)h * gridDim.x + blockIdx.x] = total;
    }
}

// One thread per head: dsink[h] -= the head's partials, added in order.
__global__ void attn_sink_backward_sum_kernel(float* dsink, const float* partial, int slabs, int H) {
    const int h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= H) return;
    float total = 0;
    for (int x = 0; x < slabs; x++) total += partial[(size_t)h * slabs + x];
    dsink[h] -= total;
}

// The scratch attn_sink_backward_cuda needs for B N rows and H heads, in floats.
inline size_t attn_sink_scratch_floats(long long rows, int H) { return (size_t)ceil_div(rows, kSinkSlab) * H; }

inline void attn_sink_forward_cuda(bf16* out, float* lse, const bf16* sink, int B, int N, int H, int D, cudaStream_t stream) {
    const long long rows = (long long)B * N;
    if (rows == 0) return;
    attn_sink_forward_kernel<<<dim3(ceil_div(rows, kSinkWarps), H), 32 * kSinkWarps, 0, stream>>>(out, lse, sink, rows, N, H, D);
    CUDA_CHECK_LAST();
}

// Adds d sink into dsink (H, fp32) from the final out and lse (attn_sink_forward_cuda's) and
// dout; scratch: attn_sink_scratch_floats(B N, H) floats.
inline void attn_sink_backward_cuda(float* dsink, const bf16* dout, const bf16* out, const float* lse, const bf16* sink, int B,
                                    int N, int H, int D, float* scratch, cudaStream_t stream) {
    const long long rows = (long long)B * N;
    if (rows == 0) return;
    const int slabs = ceil_div(rows, kSinkSlab);
    attn_sink_backward_partial_kernel<<<dim3(slabs, H), 32 * kSinkWarps, 0, stream>>>(scratch, dout, out, lse, sink, rows, N,
                                                                                       H, D);
    CUDA_CHECK_LAST();
    attn_sink_backward_sum_kernel<<<ceil_div(H, 128), 128, 0, stream>>>(dsink, scratch, slabs, H);
    CUDA_CHECK_LAST();
}
