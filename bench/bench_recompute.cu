// Gradient checkpointing on the GPU: for each recompute policy (model/recompute.h) and window
// T, a training step's time, tokens/s and peak memory, against what the memory planner
// (model/memory_plan.h) predicted before anything was allocated. Default model: the 91M GPU
// default (12 layers, width 768, 12 heads, vocab 8192) with every layer dilated in the LongNet
// setting (segments 2048..32768, dilations 1..12), B = 1. A step is what train.cu does:
// forward + backward, gradient norm, AdamW. Random tokens (the speed does not depend on them).
//   bench_recompute [--layers 12 --width 768 --heads 12 --vocab 8192]
//                   [--seq-lens 65536,262144] [--recompute none,selective,full] [--steps 3]
//                   [--segments 2048,4096,8192,16384,32768 --dilations 1,2,4,6,12 | --dense]
//                   [--check-plan] [--plan-cp P] [--out FILE]
// --plan-cp P: print the memory plan of one rank of a --cp P job at each window (the window
// split over P GPUs of this one's kind) instead of running.
// --check-plan: fail (exit 1) unless every measured peak is within 10% of the plan's.
// A (policy, T) the planner says does not fit is reported as such and not run.
#include <cuda_runtime.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>
#include "comm/in_process.h"
#include "model/gpt_cuda.cuh"
#include "model/memory_plan.h"
#include "bench/bench_table.h"

static int main_body(int argc, char** argv) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        std::printf("bench_recompute: no GPU, skipped\n");
        return 0;
    }
    GPTConfig cfg;
    cfg.n_layer = 12, cfg.n_embd = 768, cfg.n_head = 12, cfg.vocab_size = 8192;
    std::string seq_lens = "65536,262144", policies = "none,selective,full", out_path;
    std::string segments = "2048,4096,8192,16384,32768", dilations = "1,2,4,6,12";
    int steps = 3, plan_cp = 0;
    bool dense = false, check_plan = false;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--dense") { dense = true; continue; }
        if (a == "--check-plan") { check_plan = true; continue; }
        if (i + 1 >= argc) fatal("bench_recompute: %s needs a value", a.c_str());
        const std::string v = argv[++i];
        if (a == "--layers") cfg.n_layer = std::stoi(v);
        else if (a == "--width") cfg.n_embd = std::stoi(v);
        else if (a == "--heads") cfg.n_head = std::stoi(v);
        else if (a == "--vocab") cfg.vocab_size = std::stoi(v);
        else if (a == "--seq-lens") seq_lens = v;
        else if (a == "--recompute") policies = v;
        else if (a == "--steps") steps = std::stoi(v);
        else if (a == "--segments") segments = v;
        else if (a == "--dilations") dilations = v;
        else if (a == "--out") out_path = v;
        else if (a == "--plan-cp") plan_cp = std::stoi(v);
        else fatal("bench_recompute: unknown flag %s", a.c_str());
    }
    if (!dense) cfg.layer_attn.assign(cfg.n_layer, dilated_pattern(true, int_list(segments), int_list(dilations)));
    validate_config(cfg);
    std::vector<Recompute> rs;
    {
        std::stringstream ss(policies);
        for (std::string item; std::getline(ss, item, ',');) {
            Recompute r;
            bool is_auto;
            parse_recompute(item, &r, &is_auto);
            if (is_auto) fatal("bench_recompute: --recompute lists policies (none, selective, full), not auto");
            rs.push_back(r);
        }
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::string table;
    char line[512];
    snprintf(line, sizeof line, "training step, %s: %d layers, width %d, %d heads, vocab %d, %s, B = 1, bf16\n\n", prop.name,
             cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.vocab_size,
             dense ? "dense causal" : ("dilated w " + segments + " r " + dilations).c_str());
    table += line;
    table += "| recompute | T | first loss | ms/step | tokens/s | step time vs none | peak GiB (measured) | peak GiB (planned) | planned/measured |\n";
    table += "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    std::fputs(table.c_str(), stdout);
    if (plan_cp > 0) {  // plans only: one rank of the ring, with its share of each window
        InProcessWorld world(plan_cp);
        InProcessComm comm(world, 0);
        CudaBackend model(cfg, AttnBackend::Flash);
        model.set_context_parallel(plan_cp > 1 ? &comm : nullptr);
        for (int T : int_list(seq_lens)) {
            std::printf("--cp %d, window %d (%s)\n", plan_cp, T, prop.name);
            std::printf("%s\n", format_plan(plan_memory(model, 1, T / plan_cp, 1024, true, Recompute::None), "GPU").c_str());
        }
        return 0;
    }
    bool plan_ok = true;
    matmul_context();  // before the baseline: every backend shares it, and the plan counts it as held
    for (int T : int_list(seq_lens)) {
        double none_ms = 0;
        for (Recompute r : rs) {
            size_t free0 = 0, total = 0;
            CUDA_CHECK(cudaMemGetInfo(&free0, &total));
            CudaBackend model(cfg, AttnBackend::Flash);
            model.init_weights(1);
            const MemoryNeeds need = model.memory_needs(1, T, r);
            if (!plan_fits(need, model.memory_available())) {
                snprintf(line, sizeof line, "| %s | %d | does not fit | | | | | %.2f | |\n", recompute_name(r), T,
                         need.peak() / 1073741824.0);
                table += line;
                std::fputs(line, stdout);
                continue;
            }
            model.set_recompute(r);
            std::vector<int> tokens(T), targets(T);
            uint64_t x = 88172645463325252ull;
            for (int i = 0; i < T; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                tokens[i] = (int)(x % cfg.vocab_size), targets[i] = (int)((x >> 20) % cfg.vocab_size);
            }
            float loss = 0, first_loss = 0;  // random tokens: the first is ~ln(vocab), the same under every policy
            auto step = [&](int s) {
                loss = model.forward_backward(tokens.data(), targets.data(), nullptr, 1, T);
                if (s == 1) first_loss = loss;
                model.adamw_step(1e-4f, clip_scale(model.grad_norm(), 1.0f), AdamWConfig{}, s);
            };
            step(1);  // warm-up: allocation, plans
            CUDA_CHECK(cudaDeviceSynchronize());
            const auto t0 = std::chrono::steady_clock::now();
            for (int s = 0; s < steps; s++) step(2 + s);
            CUDA_CHECK(cudaDeviceSynchronize());
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
            size_t free1 = 0;
            CUDA_CHECK(cudaMemGetInfo(&free1, &total));
            // Everything is allocated up front, so used == peak; the matmul workspaces were held
            // before the baseline, and the plan counts them.
            const double measured = (double)(free0 - free1) + MATMUL_WORKSPACE_BYTES + MATMUL_DBIAS_SCRATCH_BYTES;
            const double ratio = need.peak() / measured;
            plan_ok = plan_ok && std::fabs(ratio - 1) <= 0.10 && std::isfinite(loss);
            if (r == Recompute::None) none_ms = ms;
            char vs[32] = "";
            if (none_ms > 0) snprintf(vs, sizeof vs, "%.3fx", ms / none_ms);
            snprintf(line, sizeof line, "| %s | %d | %.4f | %.1f | %.0f | %s | %.2f | %.2f | %.3f |\n", recompute_name(r), T, first_loss, ms,
                     T / (ms / 1000), vs, measured / 1073741824.0, need.peak() / 1073741824.0, ratio);
            table += line;
            std::fputs(line, stdout);
            std::fflush(stdout);
        }
    }
    std::printf("\n%s", table.c_str());
    write_table(out_path, table);
    if (check_plan) {
        std::printf("%s planned peak within 10%% of the measured peak at every size run\n%d passed, %d failed\n",
                    plan_ok ? "PASS" : "FAIL", plan_ok ? 1 : 0, plan_ok ? 0 : 1);
        return plan_ok ? 0 : 1;
    }
    return 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
