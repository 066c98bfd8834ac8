// Benchmark of block-sparse attention (layers/patterns/block_sparse.cuh through
// attention_forward_cuda / attention_backward_cuda): the issue's pattern, a causal local window
// of 2048 tokens plus 128 global tokens, blocks of 64 (and 128), B = 1, H = 12, D = 64, bf16,
// Q/K/V read in place from a (B, N, 3, H, D) buffer as the model does, N = 16K .. 1M (and up to
// --max-n while it fits).
//   FLOPs (docs/attention-spec.md#flops): forward 4*B*D*pairs_kept, forward+backward 3.5x that,
//   pairs_kept counted exactly by the pattern module (BlockSparsePattern::pairs_kept).
//   Memory: one layer's forward+backward buffers plus the tile lists the launchers cache, per 1K
//   tokens (bench_pattern.cuh).
//   Tiles: of the forward's 128 x 64 tile pairs under the causal mask, the share listed, and of
//   those the share the pattern cuts (masked element by element); the rest run unmasked.
// scripts/bench_flex_attention.py times PyTorch's FlexAttention on the same pattern (same device
// call in `make bench`): the two tables sit side by side in the README.
// Time: median of --reps timed runs (cudaEvents) after --warmup runs, inputs random normal.
//
// Also: dense attention and the same pattern as block-sparse (every block active) at 16K and 64K,
// the overhead of walking tile lists at equal work; --variants times every forward and backward
// tile variant on the pattern at 1M.
// Usage: bench_attention_block_sparse [--out FILE] [--reps N] [--warmup N] [--max-n N] [--variants]
#include <cstring>
#include <string>
#include "layers/cuda/attention_flash.h"
#include "layers/cuda/attention_flash_variants.h"  // every tile variant (--variants)
#include "layers/patterns/block_sparse_tiles.h"
#include "bench/bench_pattern.cuh"

// The seed project's block-sparse module, forward at 256K tokens on an H200: tokens/s.
constexpr double kSeedProjectFwdTokPerS = 0.17e6;

static AttnPattern window_global(int block, int window, int global) {
    AttnPattern p = make_pattern(AttnKind::BlockSparse, true);
    p.block_sparse.block = block, p.block_sparse.window = window, p.block_sparse.global = global;
    return p;
}

static int main_body(int argc, char** argv) {
    const char* out_path = nullptr;
    int reps = 5, warmup = 2;
    long long max_n = 1LL << 20;
    bool variants = false;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--max-n") && i + 1 < argc) max_n = std::atoll(argv[++i]);
        else if (!std::strcmp(argv[i], "--variants")) variants = true;
        else fatal("usage: bench_attention_block_sparse [--out FILE] [--reps N] [--warmup N] [--max-n N] [--variants]");
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        std::printf("SKIP bench_attention_block_sparse: no CUDA device\n");
        return 0;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const int B = 1, H = 12, D = 64, W = 2048, G = 128;

    std::string table;
    char line[1024];
    auto emit = [&](const char* text) {
        table += text;
        std::printf("%s", text);
        std::fflush(stdout);
    };
    std::snprintf(line, sizeof line,
                  "# block-sparse attention, causal window %d + %d global tokens, bf16, B=%d H=%d D=%d, %s\n"
                  "# TF/s = 4*B*D*pairs_kept / time (x3.5 for fwd+bwd); Mtok/s = N / time; MiB/1K = device memory of "
                  "one layer's fwd+bwd per 1K tokens (tile lists included)\n"
                  "# tiles = listed 128x64 tile pairs / causal ones; cut = listed pairs masked element by element\n",
                  W, G, B, H, D, prop.name);
    emit(line);
    std::snprintf(line, sizeof line, "%-8s %-14s %12s %7s %6s %9s %9s %9s %9s %9s %9s %8s\n", "N", "pattern", "pairs kept",
                  "tiles", "cut", "fwd ms", "fwd Mt/s", "fwd TF/s", "f+b ms", "f+b Mt/s", "f+b TF/s", "MiB/1K");
    emit(line);
    auto row = [&](long long N, const char* name, const AttnPattern& pat, const AttnShape& s, const Result& r) {
        double tiles = 1, cut = 0;
        if (pat.kind == AttnKind::BlockSparse) {
            const TileLists t = block_sparse_tile_lists(pat, (int)N, H, 128, 64);
            long long n_cut = 0;
            for (char c : t.k_of_q_cut) n_cut += c;
            tiles = t.density(), cut = t.k_of_q.empty() ? 0 : (double)n_cut / t.k_of_q.size();
        }
        std::snprintf(line, sizeof line, "%-8lld %-14s %12.4g %6.2f%% %5.1f%% %9.3f %9.3f %9.1f %9.3f %9.3f %9.1f %8.2f\n", N,
                      name, pairs_kept(pat, s.N, s.H) * s.B, 100 * tiles, 100 * cut, r.fwd_ms, N / r.fwd_ms * 1e-3,
                      r.fwd_tf, r.fb_ms, N / r.fb_ms * 1e-3, r.fb_tf, r.mib_per_1k);
        emit(line);
        return r;
    };
    const AttnPattern dense = make_pattern(AttnKind::Dense, true);
    const AttnPattern b64 = window_global(64, W, G), b128 = window_global(128, W, G);
    AttnPattern all_blocks = make_pattern(AttnKind::BlockSparse, true);  // every block: dense attention
    all_blocks.block_sparse.block = 64, all_blocks.block_sparse.dilated_r = 1, all_blocks.block_sparse.dilated_window = 1 << 30;
    double fwd_256k = 0;
    for (long long N : {16LL << 10, 64LL << 10, 256LL << 10, 1LL << 20, 2LL << 20, 4LL << 20}) {
        if (N > max_n) break;
        const AttnShape s{B, (int)N, H, D, 3 * H * D};
        size_t free_b = 0, total = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
        if (Buffers::need(s, b64) > free_b - (1ull << 30)) {
            std::snprintf(line, sizeof line, "# N = %lld does not fit: stop\n", N);
            emit(line);
            break;
        }
        if (N <= (64LL << 10)) {  // the same work as dense, walked through tile lists: their overhead
            row(N, "dense", dense, s, time_pattern(s, dense, 0, 0, warmup, reps));
            row(N, "b64 all blocks", all_blocks, s, time_pattern(s, all_blocks, 0, 0, warmup, reps));
        }
        const Result r = row(N, "b64 w2048 g128", b64, s, time_pattern(s, b64, 0, 0, warmup, reps));
        if (N == (256LL << 10)) fwd_256k = N / r.fwd_ms * 1e3;
        if (N == (256LL << 10) || N == (1LL << 20)) row(N, "b128 w2048 g128", b128, s, time_pattern(s, b128, 0, 0, warmup, reps));
        if (variants && N == (1LL << 20)) {  // each forward variant, then each backward, on the pattern
            int nf = 0, nb = 0;
            const flash::Variant* fv = flash::forward_variants(D, &nf);
            const flash::Variant* bv = flash::backward_variants(D, &nb);
            for (int i = 1; i < nf + nb - 1; i++) {
                const bool fwd = i < nf;
                std::snprintf(line, sizeof line, "#   %s variant %d: %s\n", fwd ? "fwd" : "bwd", fwd ? i : i - nf + 1,
                              fwd ? fv[i].name : bv[i - nf + 1].name);
                emit(line);
                row(N, fwd ? "  fwd variant" : "  bwd variant", b64, s,
                    time_pattern(s, b64, fwd ? i : 0, fwd ? 0 : i - nf + 1, 1, 3));
            }
            // Variant 0's forward with a block per query tile instead of its persistent walk.
            emit("#   fwd variant 0, a block per query tile (flash::ws_persistent_max_query_tiles = 0)\n");
            const int keep = flash::ws_persistent_max_query_tiles;
            flash::ws_persistent_max_query_tiles = 0;
            row(N, "  fwd variant", b64, s, time_pattern(s, b64, 0, 0, 1, 3));
            flash::ws_persistent_max_query_tiles = keep;
        }
    }
    if (fwd_256k > 0) {
        std::snprintf(line, sizeof line,
                      "# at 256K, forward: %.3f Mtok/s here vs the seed project's block-sparse module's 0.17 Mtok/s "
                      "(an H200): x%.0f\n",
                      fwd_256k * 1e-6, fwd_256k / kSeedProjectFwdTokPerS);
        emit(line);
    }
    if (out_path) {
        FILE* f = std::fopen(out_path, "w");
        if (!f) fatal("bench_attention_block_sparse: cannot write %s", out_path);
        std::fputs(table.c_str(), f);
        std::fclose(f);
    }
    return 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
