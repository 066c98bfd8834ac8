// Benchmark of the flash attention kernels (layers/cuda/attention/launch_template.cuh): causal, bf16,
// TFLOP/s of forward and forward+backward for N = 1K .. 64K, D = 64 and 128, with B*N = 64K
// tokens and H = 2048/D heads (so every size fills the GPU with the same amount of work per
// token), Q/K/V read in place from a (B, N, 3, H, D) buffer as the model does.
//   FLOPs: forward 4*B*H*N^2*D / 2 (causal), forward+backward 3.5x that.
// Time: median of --reps timed runs (cudaEvents) after --warmup runs, inputs random normal.
//
// The cuDNN SDPA backend (layers/cuda/attention_cudnn.cuh) is timed on the same buffers and shown
// in the last two columns (--no-cudnn leaves it out).
//
// Usage: bench_attention [--out FILE] [--reps N] [--warmup N] [--max-n N] [--variants] [--no-cudnn]
//                        [--l2-budget BYTES]
//   --variants also times every tile configuration (flash::forward_variants/backward_variants),
//   to choose the defaults; the main table is always the default (variant 0).
//   --l2-budget sets flash::dense_l2_budget (the launch-order groups of dense rows; 0: plain grid
//   order), to compare the two in one binary.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "layers/cuda/attention_cudnn.h"
#include "layers/cuda/attention_flash.h"
#include "layers/cuda/attention_flash_variants.h"  // every tile variant
#include "bench/bench_common.cuh"


static int main_body(int argc, char** argv) {
    const char* out_path = nullptr;
    int reps = 5, warmup = 2, max_n = 65536;
    bool variants = false, cudnn = true;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--max-n") && i + 1 < argc) max_n = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--variants")) variants = true;
        else if (!std::strcmp(argv[i], "--no-cudnn")) cudnn = false;
        else if (!std::strcmp(argv[i], "--l2-budget") && i + 1 < argc) flash::dense_l2_budget = std::atoll(argv[++i]);
        else fatal("usage: bench_attention [--out FILE] [--reps N] [--warmup N] [--max-n N] [--variants] [--no-cudnn] [--l2-budget BYTES]");
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        std::printf("SKIP bench_attention: no CUDA device\n");
        return 0;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));

    const long long tokens = 65536;
    const int maxH = 2048 / 64;
    // One allocation for the largest case of each tensor (tokens * 3 * H*D stays constant).
    const size_t nqkv = (size_t)tokens * 3 * 2048, no = (size_t)tokens * 2048, nl = (size_t)tokens * maxH;
    bf16 *qkv, *dqkv, *out, *dout;
    float *lse, *ws;
    int* pos;
    CUDA_CHECK(cudaMalloc(&qkv, nqkv * 2));
    CUDA_CHECK(cudaMalloc(&dqkv, nqkv * 2));
    CUDA_CHECK(cudaMalloc(&out, no * 2));
    CUDA_CHECK(cudaMalloc(&dout, no * 2));
    CUDA_CHECK(cudaMalloc(&lse, nl * 4));
    size_t ws_bytes = 0;
    for (int D : {64, 128}) {
        const AttnShape big{1, (int)tokens, 2048 / D, D, 3 * 2048};
        ws_bytes = std::max({ws_bytes, attention_backward_workspace_bytes(big), attention_cudnn_workspace_bytes(big)});
    }
    CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
    CUDA_CHECK(cudaMalloc(&pos, tokens * 4));
    {
        std::vector<int> p(tokens);
        for (long long i = 0; i < tokens; i++) p[i] = (int)i;
        CUDA_CHECK(cudaMemcpy(pos, p.data(), tokens * 4, cudaMemcpyHostToDevice));
    }
    fill_normal_bf16<<<1024, 256>>>(qkv, nqkv, 1);
    CUDA_CHECK_LAST();
    fill_normal_bf16<<<1024, 256>>>(dout, no, 2);
    CUDA_CHECK_LAST();
    CUDA_CHECK(cudaDeviceSynchronize());

    AttnPattern pat;
    pat.causal = true;
    Timer timer;
    std::string table;
    char line[512];
    std::snprintf(line, sizeof line, "# flash attention (ours), causal, bf16, B*N = %lld tokens, H = 2048/D, %s, L2 groups of dense rows: %s\n",
                  tokens, prop.name, flash::dense_l2_budget > 0 ? (std::to_string(flash::dense_l2_budget >> 20) + " MiB").c_str() : "off");
    table += line;
    std::snprintf(line, sizeof line, "%-6s %4s %4s %4s %10s %10s %10s %10s %10s %12s %12s\n", "N", "D", "B", "H",
                  "fwd ms", "fwd TF/s", "f+b ms", "f+b TF/s", "bwd TF/s", "cudnn fwd", "cudnn f+b");
    table += line;
    std::printf("%s", table.c_str());
    std::string vtable = "# tile variants (TFLOP/s; forward: fwd only, backward: bwd only = 2.5x fwd FLOPs)\n";

    for (int D : {64, 128}) {
        for (int N = 1024; N <= max_n; N *= 2) {
            const int H = 2048 / D, B = (int)std::max(1LL, tokens / N);
            const AttnShape s{B, N, H, D, 3 * H * D};
            const float scale = 1.f / std::sqrt((float)D);
            const double fwd_flops = 4.0 * B * H * (double)N * N * D / 2;
            const bf16 *q = qkv, *k = qkv + H * D, *v = qkv + 2 * H * D;
            auto run_fwd = [&](int var) {
                attention_forward_cuda_variant(var, out, lse, q, k, v, pos, nullptr, pat, s, scale, 0);
            };
            auto run_bwd = [&](int var) {
                attention_backward_cuda_variant(var, dqkv, dqkv + H * D, dqkv + 2 * H * D, dout, out, lse, q, k, v, pos,
                                                nullptr, pat, s, scale, ws, 0);
            };
            run_fwd(0);  // O and L for the backward
            const double tf = timer.median_ms([&] { run_fwd(0); }, warmup, reps);
            const double tfb = timer.median_ms([&] { run_fwd(0); run_bwd(0); }, warmup, reps);
            double cf = NAN, cfb = NAN;  // cuDNN TFLOP/s
            if (cudnn && attention_cudnn_supports(pat, s, false, nullptr)) {
                auto cfwd = [&] { attention_forward_cudnn(out, lse, q, k, v, pos, nullptr, pat, s, scale, 0); };
                auto cbwd = [&] {
                    attention_backward_cudnn(dqkv, dqkv + H * D, dqkv + 2 * H * D, dout, out, lse, q, k, v, pos,
                                             nullptr, pat, s, scale, ws, 0);
                };
                cf = fwd_flops / timer.median_ms(cfwd, warmup, reps) * 1e-9;
                cfb = 3.5 * fwd_flops / timer.median_ms([&] { cfwd(); cbwd(); }, warmup, reps) * 1e-9;
                run_fwd(0);  // our O and L again for the variants below
            }
            std::snprintf(line, sizeof line, "%-6d %4d %4d %4d %10.3f %10.1f %10.3f %10.1f %10.1f %12.1f %12.1f\n", N, D,
                          B, H, tf, fwd_flops / tf * 1e-9, tfb, 3.5 * fwd_flops / tfb * 1e-9,
                          2.5 * fwd_flops / (tfb - tf) * 1e-9, cf, cfb);
            table += line;
            std::printf("%s", line);
            std::fflush(stdout);
            if (variants && (N == 8192 || N == 16384 || N == 65536 || N == max_n)) {
                int nf = 0, nb = 0;
                const flash::Variant* fv = flash::forward_variants(D, &nf);
                const flash::Variant* bv = flash::backward_variants(D, &nb);
                for (int i = 0; i < nf; i++) {
                    const double t = timer.median_ms([&] { run_fwd(i); }, 1, 3);
                    std::snprintf(line, sizeof line, "N=%-6d D=%-4d %-44s %8.1f\n", N, D, fv[i].name, fwd_flops / t * 1e-9);
                    vtable += line;
                }
                run_fwd(0);
                for (int i = 0; i < nb; i++) {
                    const double t = timer.median_ms([&] { run_bwd(i); }, 1, 3);
                    std::snprintf(line, sizeof line, "N=%-6d D=%-4d %-44s %8.1f\n", N, D, bv[i].name,
                                  2.5 * fwd_flops / t * 1e-9);
                    vtable += line;
                }
            }
        }
    }
    if (variants) {
        std::printf("%s", vtable.c_str());
        table += vtable;
    }
    if (out_path) {
        FILE* f = std::fopen(out_path, "w");
        if (!f) fatal("cannot write %s", out_path);
        std::fputs(table.c_str(), f);
        std::fclose(f);
    }
    cudaFree(qkv);
    cudaFree(dqkv);
    cudaFree(out);
    cudaFree(dout);
    cudaFree(lse);
    cudaFree(ws);
    cudaFree(pos);
    return 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
