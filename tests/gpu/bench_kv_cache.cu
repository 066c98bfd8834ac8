// Long-context inference through the KV cache on the GPU (model/kv_cache_cuda.cuh): prefill time
// of a context of T tokens in chunks, then decoding tokens one at a time at that context (batch
// 1) as a CUDA graph and with a launch per kernel, and the cache's memory; with --batches, the
// same context replicated into B sequences decoded at once (tokens/s over all of them). Default model: the 91M GPU default (12 layers, width 768, 12 heads,
// vocab 8192), every layer dilated in the LongNet setting (--dense: every layer dense, whose
// cache keeps every row). Random weights and tokens (the speed does not depend on them).
//   bench_kv_cache [--contexts 65536,1048576] [--chunk 16384] [--decode 32] [--batches 1,8] [--dense] [--out FILE]
#include <cuda_runtime.h>
#include <chrono>
#include <memory>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>
#include "model/kv_cache_cuda.cuh"
#include "tests/gpu/bench_table.h"

static std::string fmt_num(const char* f, double v) {
    char b[64];
    snprintf(b, sizeof b, f, v);
    return b;
}

static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

static int main_body(int argc, char** argv) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        std::printf("bench_kv_cache: no GPU, skipped\n");
        return 0;
    }
    GPTConfig cfg;
    cfg.n_layer = 12, cfg.n_embd = 768, cfg.n_head = 12, cfg.vocab_size = 8192;
    std::string contexts = "65536,1048576", batches = "1", out_path;
    int chunk = 16384, decode = 32;
    bool dense = false;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--dense") { dense = true; continue; }
        if (i + 1 >= argc) fatal("bench_kv_cache: %s needs a value", a.c_str());
        const std::string v = argv[++i];
        if (a == "--contexts") contexts = v;
        else if (a == "--chunk") chunk = std::stoi(v);
        else if (a == "--decode") decode = std::stoi(v);
        else if (a == "--batches") batches = v;
        else if (a == "--out") out_path = v;
        else fatal("bench_kv_cache: unknown flag %s", a.c_str());
    }
    if (!dense)
        cfg.layer_attn.assign(cfg.n_layer, make_pattern(AttnKind::Dilated, true, {2048, 4096, 8192, 16384, 32768}, {1, 2, 4, 6, 12}));
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    CudaBackend model(cfg, AttnBackend::Flash);
    model.init_weights(1);
    std::string table;
    char line[400];
    snprintf(line, sizeof line, "KV cache inference, %s: %d layers, width %d, %d heads, vocab %d, %s, batch 1, chunk %d\n\n",
             prop.name, cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.vocab_size,
             dense ? "dense causal" : "dilated w 2048..32768 r 1..12", chunk);
    table += line;
    table += "| context | batch | prefill s | prefill tokens/s | decode tokens/s (graph) | decode tokens/s (launch per kernel) | "
             "KV cache GiB | unpacked rows GiB |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n";
    std::fputs(table.c_str(), stdout);
    uint64_t x = 88172645463325252ull;
    auto next_token = [&] {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        return (int)(x % cfg.vocab_size);
    };
    std::vector<float> logits(cfg.vocab_size);
    for (int T : int_list(contexts)) {
        KVCacheCuda cache(model, 1, chunk);
        cache.reserve((long long)T + 2 * decode + 4);  // what infer does: the rows of the whole sequence up front
        std::vector<int> piece(chunk);
        CUDA_CHECK(cudaDeviceSynchronize());
        const auto t0 = std::chrono::steady_clock::now();
        for (int at = 0; at < T; at += chunk) {
            const int n = std::min(chunk, T - at);
            for (int i = 0; i < n; i++) piece[i] = next_token();
            cache.append(piece.data(), n);
        }
        cache.logits(logits.data(), 0, (T - 1) % chunk);  // synchronizes
        const double prefill = seconds_since(t0);
        // Decoding at this context: batch 1 in the prefilled cache itself, larger batches in a
        // cache of B copies of it (what infer --prompts-file does).
        for (int nb : int_list(batches)) {
            std::unique_ptr<KVCacheCuda> copies;
            if (nb > 1) {
                copies.reset(new KVCacheCuda(model, nb, chunk));
                copies->reserve((long long)T + 4 * decode + 8);
                copies->replicate(cache);
            }
            KVCacheCuda& c = nb > 1 ? *copies : cache;
            std::vector<int> toks(nb);
            double rate[2];
            for (int graph : {1, 0}) {
                KVCacheCuda::kUseGraphs = graph;
                for (int& t : toks) t = next_token();
                c.append(toks.data(), 1);  // untimed: the first step after a change runs eagerly, then the graph is captured
                c.append(toks.data(), 1);
                c.logits(logits.data(), 0, 0);
                const auto t1 = std::chrono::steady_clock::now();
                for (int i = 0; i < decode; i++) {
                    for (int& t : toks) t = next_token();
                    c.append(toks.data(), 1);
                    for (int b = 0; b < nb; b++) c.logits(logits.data(), b, 0);  // every token's logits reach the host
                }
                rate[graph] = (double)nb * decode / seconds_since(t1);
            }
            KVCacheCuda::kUseGraphs = true;
            snprintf(line, sizeof line, "| %d | %d | %s | %s | %.1f | %.1f | %.3f | %.3f |\n", T, nb,
                     nb == 1 ? fmt_num("%.3f", prefill).c_str() : "", nb == 1 ? fmt_num("%.0f", T / prefill).c_str() : "", rate[1],
                     rate[0], c.bytes() / 1073741824.0, c.unpack_bytes() / 1073741824.0);
            table += line;
            std::fputs(line, stdout);
            std::fflush(stdout);
        }
    }
    write_table(out_path, table);
    return 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
