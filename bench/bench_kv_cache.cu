// Long-context inference through the KV cache on the GPU (model/kv_cache_cuda.cuh): prefill time
// of a context of T tokens in chunks, then decoding tokens one at a time at that context (batch
// 1) as a CUDA graph and with a launch per kernel, and the cache's memory; with --batches, the
// same context replicated into B sequences decoded at once (tokens/s over all of them). Default model: the 91M GPU default (12 layers, width 768, 12 heads,
// vocab 8192), every layer dilated in the LongNet setting (--dense: every layer dense, whose
// cache keeps every row). Random weights and tokens (the speed does not depend on them).
//   bench_kv_cache [--contexts 65536,1048576] [--chunk 65536] [--decode 32] [--batches 1,8] [--dense] [--unfused] [--no-pdl]
//                  [--no-row-fusion] [--four-launches] [--piece-rows N] [--dense-piece-rows N] [--dense-pieces N]
//                  [--prefetch-rows N] [--graph-only] [--out FILE]
//   (--unfused: each LayerNorm and residual add its own launch, as before they were fused into
//   the products beside them, matmul.cuh: g_matmul_fuse_rows; and a token's attention as four
//   launches, rope, cache append, attention, merge, as before attention_decode_step_cuda; and
//   every launch waiting for the one before, as before pdl.cuh); --no-pdl, --no-row-fusion,
//   --four-launches: each of the three alone; how the decode kernels cut the rows into blocks
//   (KVCacheCuda::kDecodePieces): --piece-rows, a dilated branch's rows a block; --dense-piece-rows
//   and --dense-pieces, a dense layer's fewest rows a block and most blocks a head;
//   --prefetch-rows, how many rows a dense layer's block fetches into L2 before its wait;
//   --graph-only: no launch-per-kernel column.
//   The dilated model's decode cost depends on where a token falls in its segments: decoding
//   from T = 2^20 starts every segment empty, and --decode 32768 walks the longest segment once,
//   every shorter one whole (the average over positions); T = 2^20 - 64 decodes each segment's last rows
//   bench_kv_cache --breakdown [--dense]: the pieces of one decode step at position 1M - 1, where
//   every segment of the dilated model is full (its slowest position), each beside its floor (the
//   bytes it moves at the measured copy rate), and the step's
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>
#include "model/kv_cache_cuda.cuh"
#include "bench/bench_table.h"
#include "bench/ceilings.cuh"

static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// --breakdown: what one decode step of the model is made of, each piece launched 200 times in a
// CUDA graph (so the time is the GPU's, not the launches'): microseconds per call, and per step;
// beside each, the bytes it must move (weights, cache rows, its inputs and outputs, bf16) and the
// time those take at this GPU's measured copy rate (bench/ceilings.cuh), the piece's floor, so that
// the step's gap to its floor is in the output, piece by piece.
static void decode_breakdown(const GPTConfig& cfg, const AttnPattern& pattern, long long pos) {
    const int C = cfg.n_embd, H = cfg.n_head, D = cfg.head_dim(), V = cfg.vocab_size, reps = 200;
    const double copy_rate = measure_ceilings().bytes_per_s();
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreate(&st));
    auto dev = [](size_t bytes) {
        void* p = nullptr;
        CUDA_CHECK(cudaMalloc(&p, bytes));
        CUDA_CHECK(cudaMemset(p, 0, bytes));
        return p;
    };
    bf16 *x = (bf16*)dev(4 * C * 2), *y = (bf16*)dev(4 * C * 2), *pre = (bf16*)dev(4 * C * 2), *w = (bf16*)dev((size_t)4 * C * C * 2);
    bf16 *bias = (bf16*)dev(4 * C * 2), *wte = (bf16*)dev((size_t)V * C * 2), *qkv = (bf16*)dev(3 * C * 2), *o = (bf16*)dev(C * 2);
    float *stats = (float*)dev(64), *logits = (float*)dev(V * 4), *lse = (float*)dev(H * 4);
    int* p_dev = (int*)dev(4);
    const int p32 = (int)pos;
    CUDA_CHECK(cudaMemcpy(p_dev, &p32, 4, cudaMemcpyHostToDevice));
    std::vector<CacheBranch<bf16>> branches;
    for (const CacheBranchShape& sh : pattern_cache_branches(pattern)) {
        const long long rows = sh.rows > 0 ? sh.rows : pos + 1;
        branches.push_back({sh.w, sh.r, (bf16*)dev((size_t)rows * 2 * C * 2), rows});
    }
    const int S = attention_decode_pieces(branches, KVCacheCuda::kDecodePieces);
    float *po = (float*)dev((size_t)S * C * 4), *pl = (float*)dev((size_t)S * H * 4);
    int* tickets = (int*)dev(H * 4);
    std::vector<float> host(V);
    struct Piece {
        const char* name;
        int per_step;
        std::function<void()> run;
        double bytes;  // the least it must read and write
    };
    // A product of one row, in -> out (bf16): its weights and bias, its input and output row; a
    // LayerNorm before it adds its gain and bias, a residual after it one more row, a GELU its
    // pre-activation row.
    auto product = [](double in, double out) { return 2 * (in * out + out + in + out); };
    const double ln = 2.0 * 2 * C, row = 2.0 * C;
    double cache_bytes = 0;  // the rows the attention reads: every branch's, each 2C wide
    for (const CacheBranch<bf16>& br : branches) cache_bytes += (double)br.rows * 2 * C * 2;
    const double attn_io = 2.0 * (3 * C + C);  // the token's q, k, v in, its output row
    // The step as decoding runs it (model/kv_cache_cuda.cuh: each LayerNorm fused into the product
    // after it, each residual add into the product before it), then the unfused pieces they
    // replaced (0 calls a step: for comparison).
    const std::vector<Piece> pieces = {
        {"layernorm + matmul qkv (1 x 768 -> 2304)", cfg.n_layer,
         [&] { layernorm_matmul_forward_cuda(y, y, stats, stats + 8, x, bias, bias, w, bias, 1, C, 3 * C, st); },
         ln + product(C, 3 * C)},
        {"matmul proj + residual (768 -> 768)", cfg.n_layer,
         [&] { matmul_residual_forward_cuda(y, pre, x, w, bias, 1, C, C, st); }, product(C, C) + row},
        {"layernorm + matmul fc + GELU (768 -> 3072)", cfg.n_layer,
         [&] { layernorm_matmul_forward_cuda(y, y, stats, stats + 8, x, bias, bias, w, bias, 1, C, 4 * C, st, pre); },
         ln + product(C, 4 * C) + 4 * row},
        {"matmul fcproj + residual (3072 -> 768)", cfg.n_layer,
         [&] { matmul_residual_forward_cuda(y, pre, x, w, bias, 1, 4 * C, C, st); }, product(4 * C, C) + row},
        {"layernorm (final)", 1, [&] { layernorm_forward_cuda(y, stats, stats + 8, x, bias, bias, 1, C, st); }, ln + 2 * row},
        {"unfused: matmul qkv (1 x 768 -> 2304)", 0, [&] { matmul_forward_cuda(y, x, w, bias, 1, C, 3 * C, st); }, product(C, 3 * C)},
        {"unfused: matmul proj (768 -> 768)", 0, [&] { matmul_forward_cuda(y, x, w, bias, 1, C, C, st); }, product(C, C)},
        {"unfused: matmul fc + GELU (768 -> 3072)", 0, [&] { matmul_forward_cuda(y, x, w, bias, 1, C, 4 * C, st, pre); },
         product(C, 4 * C) + 4 * row},
        {"unfused: matmul fcproj (3072 -> 768)", 0, [&] { matmul_forward_cuda(y, x, w, bias, 1, 4 * C, C, st); }, product(4 * C, C)},
        {"unfused: layernorm", 0, [&] { layernorm_forward_cuda(y, stats, stats + 8, x, bias, bias, 1, C, st); }, ln + 2 * row},
        {"unfused: residual", 0, [&] { residual_forward_cuda(y, y, x, C, st); }, 3 * row},
        {"attention step: rope + append + decode + merge, one launch", cfg.n_layer,
         [&] {
             attention_decode_step_cuda(o, lse, qkv, branches, p_dev, 1, H, D, 0.125f, cfg.rope_theta, 0,
                                        KVCacheCuda::kDecodePieces, po, pl, tickets, st);
         },
         cache_bytes + attn_io},
        {"unfused: rope", 0, [&] { rope_forward_cuda(qkv, qkv, p_dev, 1, 1, H, D, cfg.rope_theta, st); }, 2 * 2 * 3 * row},
        {"unfused: cache append", 0, [&] { cache_append_cuda(branches, qkv, p_dev, 1, 1, H, D, st); }, 2 * 2 * row},
        {"unfused: attention decode + merge", 0,
         [&] { attention_decode_cuda(o, lse, qkv, 3 * C, branches, p_dev, 1, H, D, 0.125f, KVCacheCuda::kDecodePieces, po, pl, st); },
         cache_bytes + attn_io},
        {"logits (768 -> vocab, fp32)", 1, [&] { logits_cuda(logits, x, wte, C, V, st); }, 2.0 * V * C + row + 4.0 * V},
    };
    std::printf("\ndecode step breakdown at position %lld (a dilated layer's segments all full: its slowest position; each piece %d "
                "times in a graph, the best of 5 replays; floor: its bytes at the copy rate, %.2f TB/s here):\n\n"
                "| piece | us per call | calls per step | us per step | MB per call | floor us | x floor |\n"
                "| --- | --- | --- | --- | --- | --- | --- |\n", pos, reps, copy_rate / 1e12);
    double total = 0, floor_total = 0;
    cudaEvent_t ev0, ev1;
    CUDA_CHECK(cudaEventCreate(&ev0));
    CUDA_CHECK(cudaEventCreate(&ev1));
    for (const Piece& pc : pieces) {
        pc.run();  // lazy set-up (cuBLASLt heuristics) outside the capture
        CUDA_CHECK(cudaStreamSynchronize(st));
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < reps; i++) pc.run();
        CUDA_CHECK(cudaStreamEndCapture(st, &g));
        CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
        CUDA_CHECK(cudaGraphLaunch(ge, st));  // warm
        CUDA_CHECK(cudaStreamSynchronize(st));
        // The best of 5 replays, timed by events on the stream: one replay timed on the host once
        // read 20 us for a 1 us kernel (the host thread descheduled while other work shared the CPU).
        double us = 1e30;
        for (int k = 0; k < 5; k++) {
            CUDA_CHECK(cudaEventRecord(ev0, st));
            CUDA_CHECK(cudaGraphLaunch(ge, st));
            CUDA_CHECK(cudaEventRecord(ev1, st));
            CUDA_CHECK(cudaEventSynchronize(ev1));
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, ev0, ev1));
            us = std::min(us, 1e3 * ms / reps);
        }
        cudaGraphExecDestroy(ge), cudaGraphDestroy(g);
        const double floor_us = pc.bytes / copy_rate * 1e6;
        std::printf("| %s | %.2f | %d | %.1f | %.3f | %.2f | %.1f |\n", pc.name, us, pc.per_step, us * pc.per_step, pc.bytes / 1e6,
                    floor_us, us / floor_us);
        total += us * pc.per_step, floor_total += floor_us * pc.per_step;
    }
    // The logits' trip to the host, as generation takes it every token: the median of reps trips.
    std::vector<double> trips;
    for (int i = 0; i < reps; i++) {
        const auto t0 = std::chrono::steady_clock::now();
        CUDA_CHECK(cudaMemcpyAsync(host.data(), logits, (size_t)V * 4, cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
        trips.push_back(seconds_since(t0) * 1e6);
    }
    std::sort(trips.begin(), trips.end());
    const double sync_us = trips[trips.size() / 2];
    cudaEventDestroy(ev0), cudaEventDestroy(ev1);
    std::printf("| logits to the host + sync | %.2f | 1 | %.1f | | | |\n| **sum** | | | **%.1f** (%.0f tokens/s) | | **%.1f** (%.0f tokens/s) | "
                "%.1f |\n", sync_us, sync_us, total + sync_us, 1e6 / (total + sync_us), floor_total, 1e6 / floor_total,
                (total + sync_us) / floor_total);
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
    int chunk = 65536, decode = 32;  // infer's chunk on the GPU
    bool dense = false, breakdown = false, graph_only = false;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--dense") { dense = true; continue; }
        if (a == "--unfused") { g_matmul_fuse_rows = false, KVCacheCuda::kDecodeOneLaunch = false, g_pdl = false; continue; }
        if (a == "--no-pdl") { g_pdl = false; continue; }
        if (a == "--no-row-fusion") { g_matmul_fuse_rows = false; continue; }
        if (a == "--four-launches") { KVCacheCuda::kDecodeOneLaunch = false; continue; }
        if (a == "--breakdown") { breakdown = true; continue; }
        if (a == "--graph-only") { graph_only = true; continue; }
        if (i + 1 >= argc) fatal("bench_kv_cache: %s needs a value", a.c_str());
        const std::string v = argv[++i];
        if (a == "--contexts") contexts = v;
        else if (a == "--chunk") chunk = std::stoi(v);
        else if (a == "--decode") decode = std::stoi(v);
        else if (a == "--batches") batches = v;
        else if (a == "--piece-rows") KVCacheCuda::kDecodePieces.segment_rows = std::stoi(v);
        else if (a == "--dense-piece-rows") KVCacheCuda::kDecodePieces.dense_rows = std::stoi(v);
        else if (a == "--dense-pieces") KVCacheCuda::kDecodePieces.dense_max = std::stoi(v);
        else if (a == "--prefetch-rows") g_decode_prefetch_rows = std::stoi(v);
        else if (a == "--out") out_path = v;
        else fatal("bench_kv_cache: unknown flag %s", a.c_str());
    }
    const DecodePieces& cut = KVCacheCuda::kDecodePieces;
    if (cut.segment_rows < 1 || cut.dense_rows < 1 || cut.dense_max < 1 || g_decode_prefetch_rows < 0 || decode < 1)
        fatal("bench_kv_cache: --piece-rows, --dense-piece-rows, --dense-pieces and --decode must be >= 1, --prefetch-rows >= 0");
    if (!dense)
        cfg.layer_attn.assign(cfg.n_layer, dilated_pattern(true, {2048, 4096, 8192, 16384, 32768}, {1, 2, 4, 6, 12}));
    if (breakdown) {
        decode_breakdown(cfg, cfg.attn(0), 1048575);
        return 0;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    CudaBackend model(cfg, AttnBackend::Flash);
    model.init_weights(1);
    std::string table;
    char line[640];
    snprintf(line, sizeof line,
             "KV cache inference, %s: %d layers, width %d, %d heads, vocab %d, %s, chunk %d; decoding %d tokens from "
             "position context + 2\n\n",
             prop.name, cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.vocab_size, dense ? "dense causal" : "dilated w 2048..32768 r 1..12",
             chunk, decode);
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
                copies.reset(new KVCacheCuda(model, nb, 1));  // it only decodes, as in infer
                copies->reserve((long long)T + 4 * decode + 8);
                copies->replicate(cache);
            }
            KVCacheCuda& c = nb > 1 ? *copies : cache;
            std::vector<int> toks(nb);
            double rate[2] = {0, 0};
            for (int graph : {1, 0}) {
                if (!graph && graph_only) continue;
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
            char pre[64] = " | ";  // prefill columns: on the batch-1 row only
            if (nb == 1) snprintf(pre, sizeof pre, "%.3f | %.0f", prefill, T / prefill);
            char per_kernel[32] = "-";  // --graph-only: not run
            if (!graph_only) snprintf(per_kernel, sizeof per_kernel, "%.1f", rate[0]);
            snprintf(line, sizeof line, "| %d | %d | %s | %.1f | %s | %.3f | %.3f |\n", T, nb, pre, rate[1], per_kernel,
                     c.bytes() / 1073741824.0, c.unpack_bytes() / 1073741824.0);
            table += line;
            std::fputs(line, stdout);
            std::fflush(stdout);
        }
    }
    write_table(out_path, table);
    return 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
