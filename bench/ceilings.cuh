// This GPU's ceilings, measured where a benchmark runs, for the floors it prints beside its
// times: a 1 GiB device-to-device copy (bytes read plus written a second) and a bf16 matrix
// product of 8192^3 through the project's matmul on random data (FLOP a second); the median of 9
// runs after 2 warm-ups. test_ops --perf and bench_train --split take them from here.
#pragma once
#include "bench/bench_common.cuh"
#include "layers/cuda/matmul.cuh"

struct Ceilings {
    double copy_ms, copy_bytes;  // read plus written
    double gemm_ms, gemm_flops;
    double bytes_per_s() const { return copy_bytes / (copy_ms * 1e-3); }
    double flops_per_s() const { return gemm_flops / (gemm_ms * 1e-3); }
};

inline Ceilings measure_ceilings() {
    Ceilings c{};
    Timer timer;
    const size_t bytes = (size_t)1 << 30;
    void *x, *y;
    CUDA_CHECK(cudaMalloc(&x, bytes));
    CUDA_CHECK(cudaMalloc(&y, bytes));
    CUDA_CHECK(cudaMemset(x, 1, bytes));
    c.copy_bytes = 2.0 * bytes;
    c.copy_ms = timer.median_ms([&] { CUDA_CHECK(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, 0)); }, 2, 9);
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
    const int n = 8192;
    const size_t nn = (size_t)n * n;
    bf16 *a, *b, *out;
    CUDA_CHECK(cudaMalloc(&a, nn * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&b, nn * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&out, nn * sizeof(bf16)));
    fill_normal_bf16<<<1024, 256>>>(a, nn, 1);
    fill_normal_bf16<<<1024, 256>>>(b, nn, 2);
    CUDA_CHECK_LAST();
    c.gemm_flops = 2.0 * n * n * (double)n;
    c.gemm_ms = timer.median_ms([&] { matmul_forward_cuda(out, a, b, nullptr, n, n, n, 0); }, 2, 9);
    for (bf16* p : {a, b, out}) CUDA_CHECK(cudaFree(p));
    return c;
}
