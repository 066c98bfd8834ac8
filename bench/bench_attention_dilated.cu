// Benchmark of dilated (LongNet) attention (layers/patterns/dilated_launch.cuh through
// attention_forward_cuda / attention_backward_cuda): B = 1, H = 12, D = 64, bf16, causal,
// branches (w, r) = (2048,1), (4096,2), (8192,4), Q/K/V read in place from a (B, N, 3, H, D)
// buffer as the model does, for N = 16K .. 8M (up to the largest that fits in memory).
//   FLOPs (docs/attention-spec.md#flops): forward 4*B*D*pairs_kept, forward+backward 3.5x that.
//   Memory: cudaMemGetInfo before and after allocating everything one layer's forward+backward
//   needs (QKV, O, L, dO, dQKV, positions, the backward workspace), per 1K tokens.
// Also our dense kernel at the same B, H, D at 16K and 64K (for the ratio), and the deterministic
// backward variant (no dQ accumulator) at a few sizes.
// Time: median of --reps timed runs (cudaEvents) after --warmup runs, inputs random normal.
//
// Usage: bench_attention_dilated [--out FILE] [--reps N] [--warmup N] [--max-n N] [--variants]
//                                [--segments w,.. --dilations r,..] [--sizes N,..] [--branches]
//                                [--doc-tokens L,..]
//   --variants also times every forward and backward tile variant on the dilated pattern at 1M.
//   --segments/--dilations: another pattern (the 91M model's: 2048,4096,8192,16384,32768 and
//   1,2,4,6,12); --sizes: these N only; --branches: each branch alone too, so that a slow branch
//   and the cost of merging them show (the branches' times against the whole's); --doc-tokens:
//   the same again with documents of L tokens masked (the model's --doc-mask), row "docs L".
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "layers/cuda/attention_flash.h"
#include "layers/cuda/attention_flash_variants.h"  // every tile variant
#include "layers/patterns/dilated_tuning.h"          // flash::dilated_forward_group, dilated_backward_group
#include "bench/bench_pattern.cuh"
#include "core/error.h"

static int main_body(int argc, char** argv) {
    const char* out_path = nullptr;
    int reps = 5, warmup = 2;
    long long max_n = 8LL << 20;
    bool variants = false, branches = false;
    std::vector<int> segments = {2048, 4096, 8192}, dilations = {1, 2, 4};
    std::vector<int> doc_lengths;
    std::vector<long long> sizes = {16LL << 10, 64LL << 10, 256LL << 10, 1LL << 20, 2LL << 20, 4LL << 20, 8LL << 20};
    auto list = [](const char* text) {
        std::vector<long long> out;
        for (const char* p = text; *p;) {
            char* end = nullptr;
            const long long v = std::strtoll(p, &end, 10);
            if (end == p || v <= 0 || (*end && *end != ',')) fatal("bench_attention_dilated: \"%s\" is not a comma list of positive integers", text);
            out.push_back(v);
            p = *end ? end + 1 : end;
        }
        return out;
    };
    auto ints = [&](const char* text) {
        std::vector<int> out;
        for (long long v : list(text)) {
            if (v > (1LL << 30)) fatal("bench_attention_dilated: %lld is too large in \"%s\"", v, text);
            out.push_back((int)v);
        }
        return out;
    };
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--max-n") && i + 1 < argc) max_n = std::atoll(argv[++i]);
        else if (!std::strcmp(argv[i], "--variants")) variants = true;
        else if (!std::strcmp(argv[i], "--branches")) branches = true;
        else if (!std::strcmp(argv[i], "--segments") && i + 1 < argc) segments = ints(argv[++i]);
        else if (!std::strcmp(argv[i], "--dilations") && i + 1 < argc) dilations = ints(argv[++i]);
        else if (!std::strcmp(argv[i], "--sizes") && i + 1 < argc) sizes = list(argv[++i]);
        else if (!std::strcmp(argv[i], "--doc-tokens") && i + 1 < argc) doc_lengths = ints(argv[++i]);
        else fatal("usage: bench_attention_dilated [--out FILE] [--reps N] [--warmup N] [--max-n N] [--variants] "
                   "[--segments w,.. --dilations r,..] [--sizes N,..] [--branches] [--doc-tokens L,..]");
    }
    {  // a bad pattern is refused with or without a GPU
        AttnPattern p;
        p.kind = AttnKind::Dilated, p.causal = true, p.dilated.segments = segments, p.dilated.dilations = dilations;
        if (const std::string e = pattern_error(p); !e.empty()) fatal("bench_attention_dilated: %s", e.c_str());
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        std::printf("SKIP bench_attention_dilated: no CUDA device\n");
        return 0;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const int B = 1, H = 12, D = 64;
    AttnPattern dil;
    dil.kind = AttnKind::Dilated;
    dil.causal = true;
    dil.dilated.segments = segments;
    dil.dilated.dilations = dilations;
    std::string branch_list;
    for (size_t i = 0; i < segments.size(); i++) branch_list += strf("%s(%d,%d)", i ? "," : "", segments[i], dilations[i]);
    AttnPattern dense;
    dense.causal = true;

    std::string table;
    char line[512];
    auto emit = [&](const char* text) {
        table += text;
        std::printf("%s", text);
        std::fflush(stdout);
    };
    std::snprintf(line, sizeof line,
                  "# dilated attention, causal, bf16, B=%d H=%d D=%d, (w,r) = %s, %s\n"
                  "# TF/s = 4*B*D*pairs_kept / time (x3.5 for fwd+bwd); MiB/1K = device memory of one layer's "
                  "fwd+bwd per 1K tokens\n",
                  B, H, D, branch_list.c_str(), prop.name);
    emit(line);
    std::snprintf(line, sizeof line, "%-8s %-13s %9s %9s %9s %10s %10s %9s %9s %9s\n", "N", "pattern", "fwd ms",
                  "fwd TF/s", "f+b ms", "f+b TF/s", "Mtok/s f+b", "us/1Ktok", "bwd TF/s", "MiB/1K");
    emit(line);
    auto row = [&](long long N, const char* name, const Result& r) {
        std::snprintf(line, sizeof line, "%-8lld %-13s %9.3f %9.1f %9.3f %10.1f %10.2f %9.2f %9.1f %9.2f\n", N, name,
                      r.fwd_ms, r.fwd_tf, r.fb_ms, r.fb_tf, N / r.fb_ms * 1e-3, r.fb_ms * 1e3 / (N / 1024.0),
                      2.5 / 3.5 * r.fb_tf * r.fb_ms / (r.fb_ms - r.fwd_ms), r.mib_per_1k);
        emit(line);
    };
    for (long long N : {16LL << 10, 64LL << 10}) {
        const AttnShape s{B, (int)N, H, D, 3 * H * D};
        row(N, "dense", time_pattern(s, dense, 0, 0, warmup, reps));
    }
    for (long long N : sizes) {
        if (N > max_n) break;
        if (N > (1LL << 30)) fatal("bench_attention_dilated: N = %lld is past the kernels' int sizes", N);
        const AttnShape s{B, (int)N, H, D, 3 * H * D};
        size_t free_b = 0, total = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
        if (Buffers::need(s, dil) > free_b - (256ull << 20)) {
            std::snprintf(line, sizeof line, "# N = %lld does not fit (%.1f GiB needed, %.1f GiB free): stop\n", N,
                          Buffers::need(s, dil) / 1073741824.0, free_b / 1073741824.0);
            emit(line);
            break;
        }
        const int w = N >= (4LL << 20) ? 1 : warmup, n = N >= (4LL << 20) ? 3 : reps;  // the largest take seconds
        std::vector<int> docs = {0};  // 0: no documents
        docs.insert(docs.end(), doc_lengths.begin(), doc_lengths.end());
        for (int L : docs) {
            row(N, L ? strf("docs %d", L).c_str() : "dilated", time_pattern(s, dil, 0, 0, w, n, L));
            for (size_t b = 0; branches && b < segments.size(); b++) {  // each branch alone
                AttnPattern one = dil;
                one.dilated.segments = {segments[b]};
                one.dilated.dilations = {dilations[b]};
                row(N, strf("w%d r%d", segments[b], dilations[b]).c_str(), time_pattern(s, one, 0, 0, w, n, L));
            }
        }
        if (N == (64LL << 10) || N == (1LL << 20)) {
            row(N, "dilated det", time_pattern(s, dil, 0, flash::kDeterministicBackwardVariant, w, n));
            // The plain grid order (no launch-order groups, resolve_block), for comparison.
            const int gf = flash::dilated_forward_group, gb = flash::dilated_backward_group;
            flash::dilated_forward_group = flash::dilated_backward_group = 0;
            row(N, "dil grid ord", time_pattern(s, dil, 0, 0, w, n));
            flash::dilated_forward_group = gf;
            flash::dilated_backward_group = gb;
        }
        if (variants && N == (1LL << 20)) {
            // Each forward variant with the default backward, then each backward with the default
            // forward: the fwd columns of the first rows and the bwd column of the last rows count.
            int nf = 0, nb = 0;
            const flash::Variant* fv = flash::forward_variants(D, &nf);
            const flash::Variant* bv = flash::backward_variants(D, &nb);
            for (int i = 1; i < nf; i++) {
                std::snprintf(line, sizeof line, "#   fwd variant %d: %s\n", i, fv[i].name);
                emit(line);
                row(N, ("dil fwd v" + std::to_string(i)).c_str(), time_pattern(s, dil, i, 0, 1, 3));
            }
            for (int i = 1; i < nb; i++) {
                std::snprintf(line, sizeof line, "#   bwd variant %d: %s\n", i, bv[i].name);
                emit(line);
                row(N, ("dil bwd v" + std::to_string(i)).c_str(), time_pattern(s, dil, 0, i, 1, 3));
            }
        }
    }
    emit("# bwd TF/s = 2.5*fwd FLOPs / (f+b ms - fwd ms); 'dilated det' = deterministic backward variant; "
         "'dil grid ord' = without launch-order groups\n");
    if (out_path) {
        FILE* f = std::fopen(out_path, "w");
        if (!f) fatal("cannot write %s", out_path);
        std::fputs(table.c_str(), f);
        std::fclose(f);
    }
    return 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
