// The attention sink on the GPU (CPU reference and the math: layers/attn_sink.h). Both kernels
// are one pass over O (bf16) and the row log-sum-exps (fp32), a small fraction of the attention
// they follow, so what they must avoid is latency: each thread owns 8 elements of one row (one
// 16-byte access), and a backward thread has several rows' loads in flight before it uses any
// (a warp walking its rows one after another, each row's loads waiting on the last, is bound by
// the memory's latency, not its bandwidth).
//
// The backward's sum over rows is deterministic without atomics: a block sums a fixed slab of
// kSinkSlab rows of one head into a partial of its own (each row's 8-element groups added by a
// fixed butterfly, the rows of each thread group in order, then the groups in order), and a
// second kernel adds a head's partials in a fixed order. The slabs depend on the shapes only, so
// every run rounds dsink the same way.
#pragma once
#include "layers/cuda/common.cuh"
#include "layers/cuda/head_sums.cuh"
#include "layers/cuda/pack.cuh"

constexpr int kSinkThreads = 256;  // threads per block, both kernels
constexpr int kSinkSlab = 256;     // rows of one head each backward block sums
constexpr int kSinkBatch = 4;      // rows whose loads a backward thread has in flight at once

// Rows r = b N + i of head h: O at ((b N + i) H + h) D, L at (b H + h) N + i.
__device__ __forceinline__ size_t sink_out_row(long long r, int h, int H, int D) {
    return ((size_t)r * H + h) * D;
}
__device__ __forceinline__ size_t sink_lse_row(long long r, int h, int N, int H) {
    return ((size_t)(r / N) * H + h) * N + (size_t)(r % N);
}

// One thread per 8 elements of O, in O's order (a row's D / 8 threads sit in one warp). The row's
// first thread writes L after the warp has read it; no thread returns early, so the whole warp
// meets at the __syncwarp.
__global__ void attn_sink_forward_kernel(bf16* __restrict__ out, float* __restrict__ lse, const bf16* __restrict__ sink,
                                         long long rows, int N, int H, int D) {
    const int per_row = D / 8;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x, rh = t / per_row;
    const bool active = rh < rows * H;
    const long long r = rh / H;
    const int h = (int)(rh % H), d0 = (int)(t % per_row) * 8;
    float L = 0, L_new = 0;
    if (active) {
        bf16* o = out + sink_out_row(r, h, H, D) + d0;
        x128 v = load128(o);
        L = lse[sink_lse_row(r, h, N, H)];
        const float s = __bfloat162float(sink[h]), mx = fmaxf(L, s);
        L_new = mx + logf(expf(L - mx) + expf(s - mx));  // L = -inf (no key): L_new = s, O stays 0
        const float f = expf(L - L_new);
        for (int k = 0; k < 8; k++) v[k] = __float2bfloat16(f * __bfloat162float(v[k]));
        store128(o, v);
    }
    __syncwarp();
    if (active && d0 == 0) lse[sink_lse_row(r, h, N, H)] = L_new;
}

// grid (ceil(B N / kSinkSlab), H): partial[h * slabs + x] = sum over the slab's rows of
// e^(s_h - L') rowsum(dO O'). A block covers kSinkThreads / (D / 8) rows at a time; thread group
// g (a row's D / 8 threads) takes rows g, g + groups, ... of the slab.
__global__ void attn_sink_backward_partial_kernel(float* __restrict__ partial, const bf16* __restrict__ dout,
                                                  const bf16* __restrict__ out, const float* __restrict__ lse,
                                                  const bf16* __restrict__ sink, long long rows, int N, int H, int D) {
    const int h = blockIdx.y, per_row = D / 8, groups = kSinkThreads / per_row;
    const int g = threadIdx.x / per_row, d0 = (threadIdx.x % per_row) * 8;
    const float s = __bfloat162float(sink[h]);
    const long long first = (long long)blockIdx.x * kSinkSlab;
    float mine = 0;  // the group's running sum over its rows, in order (every thread of the group holds it)
    for (int k0 = g; k0 < kSinkSlab; k0 += kSinkBatch * groups) {
        // kSinkBatch rows' loads in flight before any of them is used. Rows past the end add 0;
        // every lane takes part in the shuffles (a warp's groups may straddle the end).
        x128 da[kSinkBatch], ob[kSinkBatch];
        float w[kSinkBatch];
        for (int u = 0; u < kSinkBatch; u++) {
            const long long k = k0 + u * groups, r = first + k;
            w[u] = 0;
            if (k < kSinkSlab && r < rows) {
                const size_t row = sink_out_row(r, h, H, D) + d0;
                da[u] = load128(dout + row), ob[u] = load128(out + row);
                w[u] = expf(s - lse[sink_lse_row(r, h, N, H)]);
            } else {
                for (int j = 0; j < 8; j++) da[u][j] = ob[u][j] = __float2bfloat16(0.0f);
            }
        }
        for (int u = 0; u < kSinkBatch; u++) {
            float delta = 0;
            for (int j = 0; j < 8; j++) delta += __bfloat162float(da[u][j]) * __bfloat162float(ob[u][j]);
            for (int o = per_row / 2; o > 0; o >>= 1) delta += __shfl_xor_sync(0xffffffffu, delta, o, per_row);
            mine += w[u] * delta;
        }
    }
    store_block_partial<kSinkThreads>(partial, mine, per_row, g);
}

// The scratch attn_sink_backward_cuda needs for B N rows and H heads, in floats.
inline size_t attn_sink_scratch_floats(long long rows, int H) { return (size_t)ceil_div(rows, kSinkSlab) * H; }

// The kernels' shape rules: 16-byte accesses (D a multiple of 8, buffers aligned) and a row's
// D / 8 threads a power of two inside one warp.
inline void attn_sink_check_(int D, const void* a, const void* b) {
    if (D < 8 || D > 256 || (D & (D - 1)) != 0) fatal("attn_sink: head dim D = %d must be a power of two from 8 to 256", D);
    if (!is_aligned16(a) || !is_aligned16(b)) fatal("attn_sink: O and dO must be 16-byte aligned");
}

inline void attn_sink_forward_cuda(bf16* out, float* lse, const bf16* sink, int B, int N, int H, int D, cudaStream_t stream) {
    const long long rows = (long long)B * N;
    if (rows == 0) return;
    attn_sink_check_(D, out, out);
    const long long threads = rows * H * (D / 8);
    attn_sink_forward_kernel<<<ceil_div(threads, kSinkThreads), kSinkThreads, 0, stream>>>(out, lse, sink, rows, N, H, D);
    CUDA_CHECK_LAST();
}

// Adds d sink into dsink (H, fp32) from the final out and lse (attn_sink_forward_cuda's) and
// dout; scratch: attn_sink_scratch_floats(B N, H) floats.
inline void attn_sink_backward_cuda(float* dsink, const bf16* dout, const bf16* out, const float* lse, const bf16* sink, int B,
                                    int N, int H, int D, float* scratch, cudaStream_t stream) {
    const long long rows = (long long)B * N;
    if (rows == 0) return;
    attn_sink_check_(D, dout, out);
    const int slabs = ceil_div(rows, kSinkSlab);
    attn_sink_backward_partial_kernel<<<dim3(slabs, H), kSinkThreads, 0, stream>>>(scratch, dout, out, lse, sink, rows, N, H, D);
    CUDA_CHECK_LAST();
    add_head_partials_kernel<<<H, 32, 0, stream>>>(dsink, scratch, slabs, -1.0f);  // dsink[h] -= the head's sum
    CUDA_CHECK_LAST();
}
