// Throughput of the cuDNN SDPA backend (layers/cuda/attention_cudnn.cuh): causal dense attention,
// bf16, forward and forward + backward, N = 1K .. 64K at a fixed 64K tokens per batch
// (B = 65536 / N) and model width 2048 (H = 2048 / D), D = 64 and 128.
//
// FLOPs (causal): forward 4 B H N^2 D / 2; forward + backward 3.5 times that. Each figure is the
// median of --iters timed runs (cudaEvents around each run) after two warm-up runs, which also
// build and cache the cuDNN plans. Inputs are random (never zeros).
//
//   build/bench_attention_cudnn [--out FILE] [--iters N] [--max-n N]
#include <cudnn.h>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>
#include "layers/cuda/attention_cudnn.h"

namespace {

// Uniform(-1, 1) bf16 from a hash of the index: cheap, reproducible, not zeros.
__global__ void fill_random_kernel(bf16* x, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 16;
        h *= 0x7feb352du;
        h ^= h >> 15;
        h *= 0x846ca68bu;
        h ^= h >> 16;
        x[i] = __float2bfloat16((float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
    }
}

void fill_random(bf16* x, size_t n, uint32_t seed) {
    fill_random_kernel<<<1024, 256>>>(x, n, seed);
    CUDA_CHECK_LAST();
}

template <class F>
float median_ms(int iters, F run) {
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int i = 0; i < iters; i++) {
        CUDA_CHECK(cudaEventRecord(a));
        run();
        CUDA_CHECK(cudaEventRecord(b));
        CUDA_CHECK(cudaEventSynchronize(b));
        float t = 0;
        CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

}  // namespace

static int main_body(int argc, char** argv) {
    std::string out_path;
    int iters = 10, max_n = 65536;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--max-n") && i + 1 < argc) max_n = std::atoi(argv[++i]);
        else fatal("bench_attention_cudnn: unknown argument %s (use --out FILE, --iters N, --max-n N)", argv[i]);
    }
    int ndev = 0;
    const cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        std::printf("SKIP bench_attention_cudnn: no CUDA device (%s)\n",
                    e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return 0;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));

    const int kTokens = 65536, kWidth = 2048;
    const size_t n_qkv = (size_t)kTokens * 3 * kWidth, n_o = (size_t)kTokens * kWidth;
    bf16 *qkv, *o, *dout, *dqkv;
    float *lse, *ws;
    size_t ws_bytes = 0, lse_elems = 0;
    for (int D : {64, 128})
        for (int N = 1024; N <= max_n; N *= 2) {
            const AttnShape s{kTokens / N, N, kWidth / D, D, 3 * kWidth};
            ws_bytes = std::max(ws_bytes, attention_cudnn_workspace_bytes(s));
            lse_elems = std::max(lse_elems, (size_t)s.B * s.H * s.N);
        }
    CUDA_CHECK(cudaMalloc(&qkv, n_qkv * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&dqkv, n_qkv * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&o, n_o * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&dout, n_o * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&lse, lse_elems * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
    fill_random(qkv, n_qkv, 1);
    fill_random(dout, n_o, 2);
    CUDA_CHECK(cudaDeviceSynchronize());

    char line[512];
    std::string table;
    std::snprintf(line, sizeof(line), "# cuDNN SDPA (cuDNN %zu) on %s, causal, bf16, %d tokens, width %d, median of %d\n",
                  cudnnGetVersion(), prop.name, kTokens, kWidth, iters);
    table += line;
    table += "| backend | D | N | B | H | fwd ms | fwd TFLOP/s | fwd+bwd ms | fwd+bwd TFLOP/s |\n";
    table += "|---|---|---|---|---|---|---|---|---|\n";
    std::printf("%s", table.c_str());
    std::fflush(stdout);
    const AttnPattern pattern = make_pattern(AttnKind::Dense, true);
    for (int D : {64, 128}) {
        for (int N = 1024; N <= max_n; N *= 2) {
            const AttnShape s{kTokens / N, N, kWidth / D, D, 3 * kWidth};
            const float scale = 1.0f / std::sqrt((float)D);
            const bf16 *q = qkv, *k = qkv + kWidth, *v = qkv + 2 * kWidth;
            auto fwd = [&] { attention_forward_cudnn(o, lse, q, k, v, nullptr, nullptr, pattern, s, scale, 0); };
            auto fwd_bwd = [&] {
                fwd();
                attention_backward_cudnn(dqkv, dqkv + kWidth, dqkv + 2 * kWidth, dout, o, lse, q, k, v, nullptr,
                                         nullptr, pattern, s, scale, ws, 0);
            };
            median_ms(2, fwd_bwd);  // warm-up: builds the plans
            const double t_fwd = median_ms(iters, fwd), t_all = median_ms(iters, fwd_bwd);
            const double flops = 4.0 * s.B * s.H * (double)N * N * D / 2;
            std::snprintf(line, sizeof(line), "| cudnn | %d | %d | %d | %d | %.3f | %.1f | %.3f | %.1f |\n", D, N, s.B,
                          s.H, t_fwd, flops / t_fwd * 1e-9, t_all, 3.5 * flops / t_all * 1e-9);
            table += line;
            std::printf("%s", line);
            std::fflush(stdout);
        }
    }
    for (void* p : {(void*)qkv, (void*)dqkv, (void*)o, (void*)dout, (void*)lse, (void*)ws}) CUDA_CHECK(cudaFree(p));
    if (!out_path.empty()) {
        FILE* f = std::fopen(out_path.c_str(), "w");
        if (!f) fatal("bench_attention_cudnn: cannot write %s", out_path.c_str());
        std::fputs(table.c_str(), f);
        std::fclose(f);
    }
    return 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
