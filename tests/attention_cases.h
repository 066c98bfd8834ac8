// The attention cases every two-sided attention test runs (tests/test_attention_cpu.cpp on the
// CPU, tests/gpu/test_attention_naive.cu and test_attention_two_sided.cu on the GPU): every
// registered pattern kind, causal and not, with and without documents; the R-block splits of a
// sequence's keys; the seed. A new pattern adds its cases here.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "core/rng.h"
#include "layers/attention_pattern.h"

struct AttnCase {
    std::string name;
    AttnPattern pattern;
    bool docs;
};

// Dilated segments of a few dozen tokens that do not divide the test lengths (about 100 to
// 400), one longer than the sequence, and a pattern with no branch of dilation 1 (rows that
// attend no key at all).
inline std::vector<AttnCase> attn_cases() {
    std::vector<AttnCase> out;
    for (bool causal : {true, false}) {
        const std::string c = causal ? "causal" : "non-causal";
        AttnPattern dense;
        dense.causal = causal;
        AttnPattern dil;
        dil.kind = AttnKind::Dilated;
        dil.causal = causal;
        dil.dilated.segments = {32, 80, 4096};
        dil.dilated.dilations = {1, 2, 4};
        AttnPattern dil2 = dil;
        dil2.dilated.segments = {48, 96};
        dil2.dilated.dilations = {2, 4};
        out.push_back({"dense " + c, dense, false});
        out.push_back({"dense " + c + " docs", dense, true});
        out.push_back({"dilated (32,1)(80,2)(4096,4) " + c, dil, false});
        out.push_back({"dilated (32,1)(80,2)(4096,4) " + c + " docs", dil, true});
        out.push_back({"dilated (48,2)(96,4) " + c, dil2, false});
        // Block-sparse: token rules that cut blocks (a window of 20, 5 global tokens) with
        // documents; block rules (dilated blocks, random blocks per head); an explicit layout.
        AttnPattern bs;
        bs.kind = AttnKind::BlockSparse;
        bs.causal = causal;
        bs.block_sparse.block = 8, bs.block_sparse.window = 20, bs.block_sparse.global = 5;
        out.push_back({"block-sparse b8 window 20 global 5 " + c + " docs", bs, true});
        AttnPattern bs2 = bs;
        bs2.block_sparse.block = 16, bs2.block_sparse.window = 0, bs2.block_sparse.global = 0, bs2.block_sparse.dilated_r = 2, bs2.block_sparse.dilated_window = 64;
        bs2.block_sparse.random_count = 2, bs2.block_sparse.random_seed = 7;
        out.push_back({"block-sparse b16 dilated blocks (2, 64) random 2 " + c, bs2, false});
        AttnPattern bs3 = bs;
        bs3.block_sparse.window = 0, bs3.block_sparse.global = 0;
        auto L = std::make_shared<BlockLayout>();  // 2 heads' rows over 13 blocks: diagonal, and block 0 on even rows
        L->n_blocks = 13, L->heads = 2, L->row_ptr = {0};
        for (int h = 0; h < 2; h++)
            for (int qb = 0; qb < 13; qb++) {
                if (h == 0 && qb % 2 == 0 && qb > 0) L->cols.push_back(0);
                if (h == 1 && qb >= 3) L->cols.push_back(qb - 3);
                L->cols.push_back(qb);
                L->row_ptr.push_back((int)L->cols.size());
            }
        bs3.block_sparse.layout = L;
        out.push_back({"block-sparse b8 layout per head " + c, bs3, false});
        // Fixed (causal only): small blocks with a summary that cuts them, with documents; a
        // summary of the whole block (every earlier key); blocks of 128, which the kernels walk
        // by computed tiles, not masks everywhere.
        if (causal) {
            AttnPattern fx;
            fx.kind = AttnKind::Fixed;
            fx.fixed.stride = 16, fx.fixed.summary = 5;
            out.push_back({"fixed l16 c5 causal docs", fx, true});
            AttnPattern fx2 = fx;
            fx2.fixed.stride = 24, fx2.fixed.summary = 24;
            out.push_back({"fixed l24 c24 causal", fx2, false});
            AttnPattern fx3 = fx;
            fx3.fixed.stride = 128, fx3.fixed.summary = 8;
            out.push_back({"fixed l128 c8 causal", fx3, false});
        }
    }
    return out;
}

// R uneven blocks covering [0, N): their cut points.
inline std::vector<int> attn_cuts(SplitMix64& rng, int N, int R) {
    std::vector<int> c = {0};
    for (int r = 1; r < R; r++) c.push_back(std::max(c.back() + 1, (int)(N * r / R + rng.below(9)) - 4));
    c.push_back(N);
    return c;
}

// A fresh seed each run unless one is given (the first argument that is not a --flag), printed
// so a failure can be rerun.
inline uint64_t attn_test_seed(int argc, char** argv) {
    uint64_t seed = (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count();
    for (int i = 1; i < argc; i++)
        if (argv[i][0] != '-') {
            seed = std::strtoull(argv[i], nullptr, 10);
            break;
        }
    std::printf("seed %llu (rerun with: %s %llu)\n", (unsigned long long)seed, argv[0], (unsigned long long)seed);
    return seed;
}

// Rows of R key blocks, each (B, n_r, width), back in sequence order as (B, N, width).
inline std::vector<double> attn_blocks_in_order(const std::vector<std::vector<double>>& blocks, const std::vector<int>& cut,
                                                int B, int width) {
    std::vector<double> out;
    for (int b = 0; b < B; b++)
        for (size_t r = 0; r < blocks.size(); r++) {
            const size_t n = (size_t)(cut[r + 1] - cut[r]) * width;
            out.insert(out.end(), blocks[r].begin() + b * n, blocks[r].begin() + (b + 1) * n);
        }
    return out;
}
