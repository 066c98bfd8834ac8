// Training throughput of the GPU backend: tokens/s and peak memory for a model shape (default
// GPT-2 124M: 12 layers, width 768, 12 heads, vocab 50257, T = 1024, bf16) over a range of
// batch sizes, for each attention backend. A step is what train.cu does: forward + backward,
// gradient norm, AdamW. Random tokens (the speed does not depend on them), or with --tokens a
// token shard's first B x T + 1 (a pointer's copy costs by how often its tokens recur: real text).
//   bench_train [--layers 12 --width 768 --heads 12 --vocab 50257 --seq-len 1024]
//               [--batches 8,16,32] [--steps 10] [--attention flash,cudnn] [--split on] [--out FILE]
//               [--pointer on] [--tokens SHARD]
// --split on: also one step's time by kind of op (model/op_timer.cuh), each beside its floor:
// its FLOPs at this GPU's measured bf16 matrix rate, or the bytes it must read and write at the
// measured device copy rate (bench/ceilings.cuh; counted below: dense causal attention, no
// recompute).
#include <cuda_runtime.h>
#include <chrono>
#include <functional>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>
#include "data/shard.h"
#include "model/gpt_cuda.cuh"
#include "bench/bench_table.h"
#include "bench/ceilings.cuh"

// A kind of op's floor for one step of B x T tokens: FLOPs at the matrix rate or bytes at the copy
// rate (forward + backward; dense causal attention; no recompute). 0: none counted (upload).
struct Floor {
    double flops = 0, bytes = 0;
};
static Floor floor_of(const std::string& kind, const GPTConfig& c, int B, int T, size_t params) {
    const double BT = (double)B * T, C = c.n_embd, L = c.n_layer, V = c.vocab_size, P = (double)params;
    Floor f;
    if (kind == "matmul") f.flops = 3 * 2 * BT * (3 * C * C + C * C + 4 * C * C + 4 * C * C) * L;  // backward = 2 x forward
    else if (kind == "classifier") f.flops = 3 * 2 * BT * C * V;
    else if (kind == "attention") f.flops = 3.5 * 2 * (double)B * T * (double)T * C * L;  // causal forward 2 B T^2 C
    else if (kind == "layernorm") f.bytes = (4 + 8) * BT * C * (2 * L + 1);    // fwd: x, y; bwd: x, dy, dx, dresid in/out
    else if (kind == "residual") f.bytes = 6 * BT * C * 2 * L;                 // two inputs, one output, bf16, twice a block
    else if (kind == "rope") f.bytes = 2 * 12 * BT * C * L;                    // the (B, T, 3C) q/k/v in and out, fwd and bwd
    else if (kind == "encoder") f.bytes = 4 * BT * C + 10 * BT * C;            // fwd: rows in, out; bwd: dresid in, fp32 rows
    else if (kind == "zero grad") f.bytes = 4 * P;
    else if (kind == "grad norm") f.bytes = 4 * P;
    else if (kind == "adamw") f.bytes = 30 * P;  // grad, master, m, v in; master, m, v, bf16 weight out
    else if (kind == "pointer" && c.pointer) f.flops = 3.5 * 2 * (double)B * T * (double)T * c.head_dim();  // one causal head
    return f;
}

static std::string split_table(CudaBackend& model, const GPTConfig& cfg, int B, int T, double tflops, double copy_gbs,
                                const std::function<void(int)>& step) {
    OpTimer& t = model.op_timer();
    t.enable(true);
    step(1000);
    const std::vector<std::pair<std::string, double>> kinds = t.take();
    t.enable(false);
    double total = 0, total_floor = 0;
    for (const auto& [k, ms] : kinds) total += ms;
    std::string out;
    char line[512];
    snprintf(line, sizeof line, "\none step by kind of op, B = %d, T = %d (floors at %.0f TFLOP/s and %.0f GB/s, measured here)\n\n",
             B, T, tflops, copy_gbs);
    out += line;
    out += "| op | ms | share | floor ms | bound by | x floor |\n| --- | --- | --- | --- | --- | --- |\n";
    for (const auto& [k, ms] : kinds) {
        const Floor f = floor_of(k, cfg, B, T, model.num_params());
        const double fl = f.flops > 0 ? f.flops / (tflops * 1e12) * 1e3 : f.bytes / (copy_gbs * 1e9) * 1e3;
        total_floor += fl;
        const char* bound = f.flops > 0 ? "FLOPs" : f.bytes > 0 ? "bytes" : "-";
        if (fl > 0)
            snprintf(line, sizeof line, "| %s | %.3f | %.1f%% | %.3f | %s | %.2f |\n", k.c_str(), ms, 100 * ms / total, fl, bound, ms / fl);
        else
            snprintf(line, sizeof line, "| %s | %.3f | %.1f%% | - | - | - |\n", k.c_str(), ms, 100 * ms / total);
        out += line;
    }
    snprintf(line, sizeof line, "| step | %.3f | 100%% | %.3f | | %.2f |\n", total, total_floor, total / total_floor);
    out += line;
    return out;
}

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
    std::string batches = "8,16,32", attentions = "flash,cudnn", out_path, split_on = "off", pointer_on = "off", tokens_path;
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
        else if (a == "--split") split_on = v;
        else if (a == "--pointer") pointer_on = v;
        else if (a == "--tokens") tokens_path = v;
        else fatal("bench_train: unknown flag %s", a.c_str());
    }
    if (pointer_on != "on" && pointer_on != "off") fatal("bench_train: --pointer must be on or off (got '%s')", pointer_on.c_str());
    cfg.pointer = pointer_on == "on";
    validate_config(cfg);
    if (split_on != "on" && split_on != "off") fatal("bench_train: --split must be on or off (got '%s')", split_on.c_str());
    TokenShard shard;
    if (!tokens_path.empty()) {
        shard = read_shard(tokens_path, "--tokens");
        if (shard.vocab_size > (uint32_t)cfg.vocab_size)
            fatal("bench_train: --tokens %s holds ids of a vocabulary of %u, past --vocab %d: pass --vocab %u", tokens_path.c_str(),
                  shard.vocab_size, cfg.vocab_size, shard.vocab_size);
    }
    double tflops = 0, copy_gbs = 0;
    if (split_on == "on") {
        const Ceilings ce = measure_ceilings();
        tflops = ce.flops_per_s() / 1e12, copy_gbs = ce.bytes_per_s() / 1e9;
    }
    std::string splits;
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::string table;
    char line[512];
    snprintf(line, sizeof line, "training step, %s: %d layers, width %d, %d heads, vocab %d, T = %d, bf16%s; tokens: %s\n\n",
             prop.name, cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.vocab_size, T, cfg.pointer ? ", a pointer" : "",
             tokens_path.empty() ? "random" : tokens_path.c_str());
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
                if (!shard.tokens.empty() && shard.n_tokens() < tokens.size() + 1)
                    fatal("bench_train: --tokens %s holds %llu tokens, fewer than B x T + 1 = %zu: pass a larger shard or a smaller batch",
                          tokens_path.c_str(), (unsigned long long)shard.n_tokens(), tokens.size() + 1);
                for (size_t i = 0; i < tokens.size(); i++) {
                    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                    tokens[i] = (int)(x % cfg.vocab_size), targets[i] = (int)((x >> 20) % cfg.vocab_size);
                    if (!shard.tokens.empty()) tokens[i] = (int)shard.tokens[i], targets[i] = (int)shard.tokens[i + 1];
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
                if (split_on == "on") splits += "\n" + attn_name + " attention:" + split_table(model, cfg, B, T, tflops, copy_gbs, step);
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
    table += splits;
    std::printf("\n%s", table.c_str());
    write_table(out_path, table);
    return 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
