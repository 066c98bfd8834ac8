// The attention cases every two-sided attention test runs (tests/test_attention_cpu.cpp on the
// CPU, tests/gpu/test_attention_naive.cu and test_attention_two_sided.cu on the GPU): every
// registered pattern kind, causal and not, with and without documents; the R-block splits of a
// sequence's keys; the seed. A new pattern adds its cases here.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "data/rng.h"
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
        dil.segments = {32, 80, 4096};
        dil.dilations = {1, 2, 4};
        AttnPattern dil2 = dil;
        dil2.segments = {48, 96};
        dil2.dilations = {2, 4};
        out.push_back({"dense " + c, dense, false});
        out.push_back({"dense " + c + " docs", dense, true});
        out.push_back({"dilated (32,1)(80,2)(4096,4) " + c, dil, false});
        out.push_back({"dilated (32,1)(80,2)(4096,4) " + c + " docs", dil, true});
        out.push_back({"dilated (48,2)(96,4) " + c, dil2, false});
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
