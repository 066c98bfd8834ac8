// Training throughput of the GPU backend: tokens/s and peak memory for a model shape (default
// GPT-2 124M: 12 layers, width 768, 12 heads, vocab 50257, T = 1024, bf16) over a range of
// batch sizes, for each attention backend. A step is what train.cu does: forward + backward,
// gradient norm, AdamW. Random tokens (the speed does not depend on them).
//   bench_train [--layers 12 --width 768 --heads 12 --vocab 50257 --seq-len 1024]
//               [--batches 8,16,32] [--steps 10] [--attention flash,cudnn] [--out FILE]
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>
#include "model/gpt_cuda.cuh"
#include "bench/bench_table.h"

static std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
    return out;
}

static int main_body(int argc, char** argv) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        std::printf("bench_train: no GPU, skipped\n");
        return 0;
    }
    GPTConfig cfg;
    cfg.n_layer = 12, cfg.n_embd = 768, cfg.n_head = 12, cfg.vocab_size = 50257;
    int T = 1024, steps = 10;
    std::string batches = "8,16,32", attentions = "flash,cudnn", out_path;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--layers") cfg.n_layer = std::stoi(v);
        else if (a == "--width") cfg.n_embd = std::stoi(v);
        else if (a == "--heads") cfg.n_head = std::stoi(v);
        else if (a == "--vocab") cfg.vocab_size = std::stoi(v);
        else if (a == "--seq-len") T = std::stoi(v);
        else if (a == "--batches") batches = v;
        else if (a == "--steps") steps = std::stoi(v);
        else if (a == "--attention") attentions = v;
        else if (a == "--out") out_path = v;
        else fatal("bench_train: unknown flag %s", a.c_str());
    }
    validate_config(cfg);
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::string table;
    char line[512];
    snprintf(line, sizeof line, "training step, %s: %d layers, width %d, %d heads, vocab %d, T = %d, bf16\n\n", prop.name,
             cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.vocab_size, T);
    table += line;
    table += "| attention | batch | tokens/step | ms/step | tokens/s | peak GPU memory (GiB) |\n";
    table += "| --- | --- | --- | --- | --- | --- |\n";
    for (const std::string& attn_name : split(attentions)) {
        const AttnBackend attn = attn_name == "cudnn" ? AttnBackend::Cudnn : AttnBackend::Flash;
        for (const std::string& bs : split(batches)) {
            const int B = std::stoi(bs);
            size_t free0 = 0, total = 0;
            CUDA_CHECK(cudaMemGetInfo(&free0, &total));
            double ms, peak_gib;
            {
                CudaBackend model(cfg, attn);
                model.init_weights(1);
                std::vector<int> tokens((size_t)B * T), targets((size_t)B * T);
                uint64_t x = 88172645463325252ull;
                for (size_t i = 0; i < tokens.size(); i++) {
                    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                    tokens[i] = (int)(x % cfg.vocab_size), targets[i] = (int)((x >> 20) % cfg.vocab_size);
                }
                auto step = [&](int s) {
                    model.forward_backward(tokens.data(), targets.data(), nullptr, B, T);
                    model.adamw_step(1e-4f, clip_scale(model.grad_norm(), 1.0f), AdamWConfig{}, s);
                };
                for (int s = 1; s <= 3; s++) step(s);  // warm-up: allocation, plans, autotuning
                CUDA_CHECK(cudaDeviceSynchronize());
                const auto t0 = std::chrono::steady_clock::now();
                for (int s = 0; s < steps; s++) step(4 + s);
                CUDA_CHECK(cudaDeviceSynchronize());
                ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
                size_t free1 = 0;
                CUDA_CHECK(cudaMemGetInfo(&free1, &total));
                peak_gib = (free0 - free1) / 1073741824.0;  // everything is allocated up front: used == peak
            }
            snprintf(line, sizeof line, "| %s | %d | %d | %.1f | %.0f | %.1f |\n", attn_name.c_str(), B, B * T, ms,
                     B * T / (ms / 1000), peak_gib);
            table += line;
            std::fputs(line, stdout);
            std::fflush(stdout);
        }
    }
    std::printf("\n%s", table.c_str());
    write_table(out_path, table);
    return 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
