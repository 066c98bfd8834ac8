// What the GPU benchmarks (and the attention harness's perf mode) share: random bf16 inputs made
// on the device, and a cudaEvent timer taking the median of timed runs.
#pragma once
#include <algorithm>
#include <vector>
#include "layers/cuda/common.cuh"

// Unit normals from a counter-based generator: Box-Muller over two hashed uniforms.
__global__ void fill_normal_bf16(bf16* x, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = seed + i * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const float u1 = ((z >> 40) + 1) * (1.0f / 16777217.0f), u2 = ((z >> 16) & 0xffffff) * (1.0f / 16777216.0f);
        x[i] = __float2bfloat16(sqrtf(-2.f * logf(u1)) * cospif(2.f * u2));
    }
}

struct Timer {
    cudaEvent_t a, b;
    Timer() {
        CUDA_CHECK(cudaEventCreate(&a));
        CUDA_CHECK(cudaEventCreate(&b));
    }
    ~Timer() {
        cudaEventDestroy(a);
        cudaEventDestroy(b);
    }
    template <class F>
    double ms(F f) {  // one run
        CUDA_CHECK(cudaEventRecord(a));
        f();
        CUDA_CHECK(cudaEventRecord(b));
        CUDA_CHECK(cudaEventSynchronize(b));
        float t = 0;
        CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
        return t;
    }
    template <class F>
    double median_ms(F f, int warmup, int reps) {
        for (int i = 0; i < warmup; i++) f();
        std::vector<double> t(reps);
        for (int i = 0; i < reps; i++) t[i] = ms(f);
        std::sort(t.begin(), t.end());
        return t[reps / 2];
    }
};
