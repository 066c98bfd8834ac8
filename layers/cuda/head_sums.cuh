// Deterministic sums per head over many rows, shared by the backward passes whose gradient is one
// number per head (the attention sinks', layers/cuda/attn_sink.cuh; the learned log-n slopes',
// layers/cuda/rope.cuh). A block of THREADS threads sums a fixed slab of rows of one head into a
// partial of its own, its thread groups' sums added in order by one thread; a second kernel adds
// a head's partials in a fixed order. Nothing depends on timing, so every run rounds alike.
#pragma once
#include "layers/cuda/common.cuh"

// The block's partial for head blockIdx.y at slab blockIdx.x: `mine` is the running sum of thread
// group g (each of whose per_row threads holds it); every thread of a block of THREADS calls this,
// once (a second call would need a __syncthreads first: thread 0 may still read the sums).
template <int THREADS>
__device__ __forceinline__ void store_block_partial(float* __restrict__ partial, float mine, int per_row, int g) {
    __shared__ float group_sums[THREADS];
    if (threadIdx.x % per_row == 0) group_sums[g] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
        float total = 0;
        for (int i = 0; i < THREADS / per_row; i++) total += group_sums[i];
        partial[(size_t)blockIdx.y * gridDim.x + blockIdx.x] = total;
    }
}

// One warp per head: out[h] += sign * (the head's partials, each lane's in order, then a fixed butterfly).
__global__ void add_head_partials_kernel(float* __restrict__ out, const float* __restrict__ partial, int slabs, float sign) {
    const int h = blockIdx.x, lane = threadIdx.x;
    float total = 0;
    for (int x = lane; x < slabs; x += 32) total += partial[(size_t)h * slabs + x];
    for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
    if (lane == 0) out[h] += sign * total;
}
