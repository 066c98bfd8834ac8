// What the pattern benchmarks share (bench_attention_dilated.cu, bench_attention_block_sparse.cu):
// one layer's attention buffers for a shape and pattern, and the timing of its forward and
// forward + backward through the public launchers, with effective TFLOP/s over the pairs the
// pattern keeps (docs/attention-spec.md#flops) and the device memory per 1K tokens.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>
#include "layers/attention_pattern.h"
#include "layers/cuda/attention_flash.h"
#include "bench/bench_common.cuh"

__global__ void iota_kernel(int* x, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = i;
}

// Documents of `len` tokens: each token's document start, as the model's doc masks pass them.
__global__ void doc_start_kernel(int* x, int n, int len) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = i / len * len;
}

inline double median_ms(const std::function<void()>& f, int warmup, int reps) {
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < warmup; i++) f();
    std::vector<float> t(reps);
    for (int i = 0; i < reps; i++) {
        CUDA_CHECK(cudaEventRecord(a));
        f();
        CUDA_CHECK(cudaEventRecord(b));
        CUDA_CHECK(cudaEventSynchronize(b));
        CUDA_CHECK(cudaEventElapsedTime(&t[i], a, b));
    }
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[reps / 2];
}

// Everything one layer's attention forward + backward holds, for one shape and pattern.
struct Buffers {
    bf16 *qkv = nullptr, *dqkv = nullptr, *out = nullptr, *dout = nullptr;
    float *lse = nullptr, *ws = nullptr;
    int *pos = nullptr, *doc_start = nullptr;  // doc_start: only with documents (doc_tokens > 0)
    double mib_per_1k = 0;  // measured with cudaMemGetInfo around the allocations

    static size_t need(const AttnShape& s, const AttnPattern& pat) {
        const size_t t = (size_t)s.B * s.N, hd = (size_t)s.H * s.D;
        return t * hd * 2 * 8 + t * s.H * 4 + s.N * 4 + attention_backward_workspace_bytes(s, pat);
    }
    Buffers(const AttnShape& s, const AttnPattern& pat, int doc_tokens = 0) {
        const size_t t = (size_t)s.B * s.N, hd = (size_t)s.H * s.D;
        size_t free0 = 0, free1 = 0, total = 0;
        CUDA_CHECK(cudaMemGetInfo(&free0, &total));
        CUDA_CHECK(cudaMalloc(&qkv, t * 3 * hd * 2));
        CUDA_CHECK(cudaMalloc(&dqkv, t * 3 * hd * 2));
        CUDA_CHECK(cudaMalloc(&out, t * hd * 2));
        CUDA_CHECK(cudaMalloc(&dout, t * hd * 2));
        CUDA_CHECK(cudaMalloc(&lse, t * s.H * 4));
        CUDA_CHECK(cudaMalloc(&pos, (size_t)s.N * 4));
        CUDA_CHECK(cudaMalloc(&ws, attention_backward_workspace_bytes(s, pat)));
        CUDA_CHECK(cudaMemGetInfo(&free1, &total));
        mib_per_1k = (double)(free0 - free1) / (1 << 20) / (s.N / 1024.0);
        fill_normal_bf16<<<4096, 256>>>(qkv, t * 3 * hd, 1);
        CUDA_CHECK_LAST();
        fill_normal_bf16<<<4096, 256>>>(dout, t * hd, 2);
        CUDA_CHECK_LAST();
        iota_kernel<<<1024, 256>>>(pos, s.N);
        CUDA_CHECK_LAST();
        if (doc_tokens > 0) {  // B = 1 here, as in every pattern benchmark
            CUDA_CHECK(cudaMalloc(&doc_start, (size_t)s.B * s.N * 4));
            doc_start_kernel<<<1024, 256>>>(doc_start, s.B * s.N, doc_tokens);
            CUDA_CHECK_LAST();
        }
        CUDA_CHECK(cudaDeviceSynchronize());
    }
    ~Buffers() {
        cudaFree(qkv), cudaFree(dqkv), cudaFree(out), cudaFree(dout), cudaFree(lse), cudaFree(pos), cudaFree(ws), cudaFree(doc_start);
    }
};

struct Result {
    double fwd_ms, fb_ms, fwd_tf, fb_tf, mib_per_1k;
};

// doc_tokens > 0: documents of that many tokens, masked as the model's --doc-mask does.
inline Result time_pattern(const AttnShape& s, const AttnPattern& pat, int fwd_variant, int bwd_variant, int warmup,
                           int reps, int doc_tokens = 0) {
    Buffers buf(s, pat, doc_tokens);
    const int HD = s.H * s.D;
    const float scale = 1.f / std::sqrt((float)s.D);
    const bf16 *q = buf.qkv, *k = buf.qkv + HD, *v = buf.qkv + 2 * HD;
    auto fwd = [&] {
        attention_forward_cuda_variant(fwd_variant, buf.out, buf.lse, q, k, v, buf.pos, buf.doc_start, pat, s, scale, 0);
    };
    auto bwd = [&] {
        attention_backward_cuda_variant(bwd_variant, buf.dqkv, buf.dqkv + HD, buf.dqkv + 2 * HD, buf.dout, buf.out,
                                        buf.lse, q, k, v, buf.pos, buf.doc_start, pat, s, scale, buf.ws, 0);
    };
    // The first calls allocate what the launchers cache (a block-sparse pattern's tile lists):
    // counted in the memory column too.
    size_t free0 = 0, free1 = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&free0, &total));
    fwd();
    bwd();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemGetInfo(&free1, &total));
    Result r;
    r.fwd_ms = median_ms(fwd, warmup, reps);
    r.fb_ms = median_ms([&] { fwd(); bwd(); }, warmup, reps);
    const double flops = 4.0 * s.B * s.D * pairs_kept(pat, s.N, s.H);
    r.fwd_tf = flops / r.fwd_ms * 1e-9;
    r.fb_tf = 3.5 * flops / r.fb_ms * 1e-9;
    r.mib_per_1k = buf.mib_per_1k + (double)(free0 - free1) / (1 << 20) / (s.N / 1024.0);
    return r;
}

