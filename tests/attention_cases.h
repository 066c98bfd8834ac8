// The one list of attention cases every attention test reads, CPU and GPU alike:
//   every-backend cases (no sizes): every registered pattern kind, causal and not, with and
//     without documents; tests/test_attention_cpu.cpp and test_ring_cpu.cpp on the CPU,
//     tests/gpu/test_attention_naive.cu and test_attention_two_sided.cu on the GPU run each at
//     the sizes they pick (attn_cases());
//   sized cases: shapes, positions (offset, gaps, repeats), documents with rows that attend
//     nothing, layouts, scales, the backward's dQ chunks, extra checks (determinism, negative
//     controls, the spec's identities); the GPU harness tests/gpu/test_attention.cu runs them
//     all on every backend (attn_sized_cases(), --small: the compute-sanitizer subset), the CPU
//     test the ones small enough for float64 in a second (attn_cpu_cases()).
// Also the R-block splits of a sequence's keys and the seed. A new pattern adds its cases here.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include "core/rng.h"
#include "layers/attention_pattern.h"
#include "layers/patterns/block_sparse.h"

enum class Docs { None, Several, SeveralAndEmptyRows };

// "This case's pattern equals that pattern" (the spec's identities), optionally with a document
// every `doc_every` tokens on the other side and L shifted by l_shift.
struct Identity {
    std::string what;
    AttnPattern other;
    int doc_every = 0;
    double l_shift = 0;
};

struct AttnCase {
    int B = 0, N = 0, H = 0, D = 0;  // 0: an every-backend case, run at the sizes each test picks
    AttnPattern pattern;
    int pos0 = 0;          // position of token 0 (a later chunk of a sequence)
    bool gaps = false;     // positions increase by 1..3 instead of 1
    bool repeats = false;  // positions increase by 0..2: tokens sharing a position see each other
    Docs docs = Docs::None;
    bool packed = true;    // Q, K, V slices of one (B, N, 3, H, D) buffer; else three (B, N, H, D) blocks
    float scale_mul = 1;   // scale = scale_mul / sqrt(D)
    long long min_chunk = 0;  // flash::dilated_min_chunk_tokens for the backward (0: default)
    bool determinism = false, negative_controls = false;
    std::optional<AttnPattern> near_miss;  // a slightly wrong pattern the comparison must catch
    std::optional<Identity> identity;
    std::string name;      // an every-backend case's name (a sized case's is attn_case_name())
    bool has_docs() const { return docs != Docs::None; }
};

inline AttnPattern attn_dense(bool causal) {
    AttnPattern p;
    p.causal = causal;
    return p;
}
inline AttnPattern attn_dilated(bool causal, std::vector<std::pair<int, int>> branches) {  // (w, r)
    AttnPattern p;
    p.kind = AttnKind::Dilated;
    p.causal = causal;
    for (auto [w, r] : branches) p.dilated.segments.push_back(w), p.dilated.dilations.push_back(r);
    return p;
}

// Block-sparse of block b: window W, global g, dilated blocks (r, V), random blocks per row.
inline AttnPattern attn_block_sparse(bool causal, int b, int W, int g, int r = 0, int V = 0, int random = 0) {
    AttnPattern p;
    p.kind = AttnKind::BlockSparse;
    p.causal = causal;
    p.block_sparse.block = b, p.block_sparse.window = W, p.block_sparse.global = g, p.block_sparse.dilated_r = r, p.block_sparse.dilated_window = V, p.block_sparse.random_count = random, p.block_sparse.random_seed = 11;
    return p;
}
// The same pattern's block rules written out as an explicit per-head layout (BlockLayout).
inline AttnPattern attn_block_sparse_as_layout(const AttnPattern& p, int N, int H) {
    auto L = std::make_shared<BlockLayout>();
    L->n_blocks = (N + p.block_sparse.block - 1) / p.block_sparse.block, L->heads = H, L->row_ptr = {0}, L->source = "test";
    for (int h = 0; h < H; h++)
        for (int qb = 0; qb < L->n_blocks; qb++) {
            for (int kb : BlockSparsePattern::active_blocks(p, h, qb, N)) L->cols.push_back(kb);
            L->row_ptr.push_back((int)L->cols.size());
        }
    AttnPattern out = p;
    out.block_sparse.dilated_r = out.block_sparse.dilated_window = out.block_sparse.random_count = 0;
    out.block_sparse.layout = L;
    return out;
}

// Fixed (Sparse Transformer): blocks of l tokens, the last c of each seen by later blocks.
inline AttnPattern attn_fixed(int l, int c) {
    AttnPattern p;
    p.kind = AttnKind::Fixed;
    p.fixed.stride = l, p.fixed.summary = c;
    return p;
}

inline std::string attn_pattern_name(const AttnPattern& p) {
    std::string s = attn_kind_name(p.kind);
    s += p.causal ? " causal" : " full";
    for (int i = 0; i < p.dilated.branches(); i++) s += " (" + std::to_string(p.dilated.segment(i)) + "," + std::to_string(p.dilated.dilations[i]) + ")";
    if (p.kind == AttnKind::BlockSparse) {
        s += " b" + std::to_string(p.block_sparse.block);
        if (p.block_sparse.window) s += " window " + std::to_string(p.block_sparse.window);
        if (p.block_sparse.global) s += " global " + std::to_string(p.block_sparse.global);
        if (p.block_sparse.dilated_r) s += " blocks r" + std::to_string(p.block_sparse.dilated_r) + " within " + std::to_string(p.block_sparse.dilated_window);
        if (p.block_sparse.random_count) s += " random " + std::to_string(p.block_sparse.random_count);
        if (p.block_sparse.layout) s += " layout";
    }
    if (p.kind == AttnKind::Fixed) s += " l" + std::to_string(p.fixed.stride) + " c" + std::to_string(p.fixed.summary);
    return s;
}

inline std::string attn_case_name(const AttnCase& c) {
    std::string s = "B" + std::to_string(c.B) + " N" + std::to_string(c.N) + " H" + std::to_string(c.H) + " D" +
                    std::to_string(c.D) + " " + attn_pattern_name(c.pattern);
    if (c.pos0) s += " pos+" + std::to_string(c.pos0);
    if (c.gaps) s += " gaps";
    if (c.repeats) s += " repeats";
    if (c.docs != Docs::None) s += c.docs == Docs::Several ? " docs" : " docs+empty";
    if (!c.packed) s += " unpacked";
    if (c.scale_mul != 1.f) s += " scale*" + std::to_string(c.scale_mul).substr(0, 3);
    if (c.min_chunk) s += " chunk>=" + std::to_string(c.min_chunk);
    return s;
}


// Dilated segments of a few dozen tokens that do not divide the test lengths (about 100 to
// 400), one longer than the sequence, and a pattern with no branch of dilation 1 (rows that
// attend no key at all).
inline void add_every_backend_cases(std::vector<AttnCase>& out) {
    auto add = [&](const std::string& name, const AttnPattern& p, bool docs) {
        AttnCase c;
        c.pattern = p, c.docs = docs ? Docs::Several : Docs::None, c.name = name;
        out.push_back(std::move(c));
    };
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
        add("dense " + c, dense, false);
        add("dense " + c + " docs", dense, true);
        add("dilated (32,1)(80,2)(4096,4) " + c, dil, false);
        add("dilated (32,1)(80,2)(4096,4) " + c + " docs", dil, true);
        add("dilated (48,2)(96,4) " + c, dil2, false);
        // Block-sparse: token rules that cut blocks (a window of 20, 5 global tokens) with
        // documents; block rules (dilated blocks, random blocks per head); an explicit layout.
        AttnPattern bs;
        bs.kind = AttnKind::BlockSparse;
        bs.causal = causal;
        bs.block_sparse.block = 8, bs.block_sparse.window = 20, bs.block_sparse.global = 5;
        add("block-sparse b8 window 20 global 5 " + c + " docs", bs, true);
        AttnPattern bs2 = bs;
        bs2.block_sparse.block = 16, bs2.block_sparse.window = 0, bs2.block_sparse.global = 0, bs2.block_sparse.dilated_r = 2, bs2.block_sparse.dilated_window = 64;
        bs2.block_sparse.random_count = 2, bs2.block_sparse.random_seed = 7;
        add("block-sparse b16 dilated blocks (2, 64) random 2 " + c, bs2, false);
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
        add("block-sparse b8 layout per head " + c, bs3, false);
        // Fixed (causal only): small blocks with a summary that cuts them, with documents; a
        // summary of the whole block (every earlier key); blocks of 128, which the kernels walk
        // by computed tiles, not masks everywhere.
        if (causal) {
            AttnPattern fx;
            fx.kind = AttnKind::Fixed;
            fx.fixed.stride = 16, fx.fixed.summary = 5;
            add("fixed l16 c5 causal docs", fx, true);
            AttnPattern fx2 = fx;
            fx2.fixed.stride = 24, fx2.fixed.summary = 24;
            add("fixed l24 c24 causal", fx2, false);
            AttnPattern fx3 = fx;
            fx3.fixed.stride = 128, fx3.fixed.summary = 8;
            add("fixed l128 c8 causal", fx3, false);
        }
    }
}


// (The sized cases are written as positional aggregates: B, N, H, D, pattern, pos0; the fields
// after those keep their defaults.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
inline void add_sized_cases(std::vector<AttnCase>& v, bool small) {
    const Docs DS = Docs::Several, DE = Docs::SeveralAndEmptyRows;
    using BR = std::vector<std::pair<int, int>>;
    const BR scaled = {{256, 3}, {160, 2}, {1280, 4}};  // the spec's (8,3),(5,2),(40,4) at tile sizes
    const BR longnet = {{2048, 1}, {4096, 2}, {8192, 4}};
    auto add = [&](AttnCase c) -> AttnCase& { return v.emplace_back(std::move(c)), v.back(); };
    if (small) {
        add({2, 100, 3, 64, attn_dense(true), 5000}).docs = DE;
        AttnCase& u = add({1, 257, 1, 128, attn_dense(false)});
        u.docs = DS, u.packed = false;
        add({2, 300, 5, 64, attn_dilated(true, {{64, 1}, {40, 2}})}).min_chunk = 100;  // dQ chunks per branch
        AttnCase& d = add({2, 300, 5, 128, attn_dilated(false, {{64, 2}, {96, 3}})});      // no r = 1 branch
        d.docs = DE, d.min_chunk = 64;
        add({2, 300, 5, 64, attn_dilated(true, {{64, 1}, {300, 12}})}).docs = DE;  // r = 12: folded TMA maps
        add({2, 300, 3, 64, attn_block_sparse(true, 64, 100, 16, 2, 256)}).docs = DE;  // tile lists, element masks
        add({1, 300, 3, 128, attn_fixed(128, 16)});                                 // computed tiles, summary cut
        return;
    }
    // Dense: odd sizes, one token, later chunks (positions offset, with gaps), documents with rows
    // that attend nothing, unpacked Q/K/V, sharp softmaxes.
    add({1, 1, 1, 64, attn_dense(true)});
    add({1, 1, 3, 128, attn_dense(false), 5000});
    add({2, 17, 3, 128, attn_dense(true), 5000}).determinism = true;
    add({1, 17, 12, 64, attn_dense(false)}).packed = false;
    add({1, 100, 12, 64, attn_dense(false)}).negative_controls = true;
    add({3, 100, 12, 128, attn_dense(true)}).docs = DS;
    AttnCase& c6 = add({3, 257, 3, 128, attn_dense(true), 5000});
    c6.docs = DE, c6.determinism = true;
    add({2, 257, 1, 64, attn_dense(false)}).docs = DE;
    AttnCase& c8 = add({2, 257, 3, 64, attn_dense(true)});
    c8.packed = false, c8.scale_mul = 4;
    add({1, 1000, 3, 64, attn_dense(true), 5000}).gaps = true;
    add({1, 1000, 3, 64, attn_dense(true), 5000}).repeats = true;  // the causal diagonal by positions, not rows
    add({2, 300, 2, 128, attn_dense(true)}).repeats = true;
    add({1, 1000, 1, 128, attn_dense(false)}).packed = false;
    add({1, 1000, 12, 128, attn_dense(true)});
    add({2, 2085, 1, 64, attn_dense(true)}).docs = DS;
    add({1, 2085, 3, 128, attn_dense(true), 5000}).determinism = true;
    add({1, 2085, 1, 64, attn_dense(false)}).scale_mul = 4;
    // Dense shapes cuDNN takes: a non-default scale with positions offset, and a plain one.
    for (int D : {64, 128})
        for (bool causal : {true, false}) {
            add({2, 257, 3, D, attn_dense(causal), 4096}).scale_mul = 2;
            add({2, 1000, 3, D, attn_dense(causal)});
        }
    // Dilated: r not dividing w, H = 5 not a multiple of r, N not a multiple of w, a segment
    // longer than N, r = w, branches with and without an r = 1 branch, documents, the backward's
    // dQ chunks (grouped and per branch), the LongNet configuration at 10K tokens.
    AttnCase& d0 = add({2, 1000, 5, 64, attn_dilated(true, scaled)});  // no r = 1 branch; a segment longer than N
    d0.negative_controls = true, d0.near_miss = attn_dilated(true, {{255, 3}, {160, 2}, {1280, 4}});
    add({2, 1000, 5, 128, attn_dilated(false, scaled)});
    add({2, 2085, 5, 64, attn_dilated(false, scaled)}).min_chunk = 1000;  // dQ in two grouped chunks of 1280
    add({2, 2085, 5, 128, attn_dilated(true, scaled)}).determinism = true;
    add({2, 2085, 5, 64, attn_dilated(true, {{300, 1}, {256, 2}})}).min_chunk = 500;  // dQ chunks per branch
    add({2, 1000, 5, 64, attn_dilated(true, {{256, 2}, {512, 1}, {7, 7}})}).docs = DE;
    AttnCase& d6 = add({2, 1000, 5, 128, attn_dilated(false, {{100, 3}, {64, 64}})});
    d6.docs = DE, d6.min_chunk = 200;
    // Dilations past the TMA's stride of 8, read through folded maps (tma_rows.cuh: ws_fold): r = 12
    // over 2048 tokens (fold 4) with documents, the 12 offsets of r = 12 at D = 128 with dQ in
    // chunks, r = 9 (fold 9), and r = 12 over 1001 tokens, which no fold divides (no TMA).
    add({2, 2048, 5, 64, attn_dilated(true, {{512, 1}, {1536, 12}})}).docs = DS;
    add({1, 4096, 12, 128, attn_dilated(true, {{1024, 1}, {4096, 12}})}).min_chunk = 1024;
    add({2, 999, 5, 64, attn_dilated(true, {{333, 1}, {999, 9}})}).docs = DE;
    add({2, 1001, 5, 64, attn_dilated(false, {{143, 1}, {1001, 12}})});
    add({2, 1500, 5, 64, attn_dilated(true, {{4096, 1}})}).identity = Identity{"(w>=N,1) == dense", attn_dense(true)};
    add({2, 1500, 5, 128, attn_dilated(false, {{1500, 1}})}).identity = Identity{"(w=N,1) == dense", attn_dense(false)};
    // A document per segment is block-diagonal only under the causal mask.
    add({2, 1500, 5, 64, attn_dilated(true, {{384, 1}})}).identity =
        Identity{"(w<N,1) causal == dense with a document per segment", attn_dense(true), 384};
    add({2, 1500, 5, 128, attn_dilated(false, {{384, 1}})});  // block-diagonal, non-causal
    add({2, 1500, 5, 64, attn_dilated(true, {{384, 1}, {384, 1}})}).identity =
        Identity{"(w,1),(w,1) == (w,1) once, L + ln 2", attn_dilated(true, {{384, 1}}), 0, std::log(2.0)};
    add({1, 4099, 12, 64, attn_dilated(true, {{512, 1}, {1024, 2}, {2048, 4}})});
    AttnCase& d13 = add({2, 10007, 5, 64, attn_dilated(true, longnet)});  // dQ in chunks of 8192
    d13.min_chunk = 1000, d13.negative_controls = true, d13.near_miss = attn_dilated(true, {{2047, 1}, {4096, 2}, {8192, 4}});
    add({2, 10007, 5, 128, attn_dilated(false, longnet)});
    // Block-sparse (the naive kernel until the flash kernels take it): token rules that cut
    // blocks (window, global), block rules (dilated blocks, random blocks per head), an explicit
    // per-head layout; odd N, documents with rows that attend nothing.
    add({2, 1000, 5, 64, attn_block_sparse(true, 64, 300, 70)}).docs = DE;
    add({2, 1000, 5, 128, attn_block_sparse(false, 64, 300, 70)});
    add({2, 2085, 3, 64, attn_block_sparse(true, 128, 0, 0, 3, 4096, 2)}).identity =
        Identity{"every block near the diagonal (dilated blocks r=3 within 4096) vs itself as a layout", attn_block_sparse_as_layout(attn_block_sparse(true, 128, 0, 0, 3, 4096, 2), 2085, 3)};
    add({1, 1500, 4, 128, attn_block_sparse(true, 64, 0, 0, 1, 1 << 20)}).identity = Identity{"all blocks active == dense", attn_dense(true)};
    add({2, 1500, 4, 64, attn_block_sparse(true, 64, 0, 0, 1, 64)}).identity =
        Identity{"the diagonal block alone == dilated (w = b, r = 1)", attn_dilated(true, {{64, 1}})};
    // Fixed: computed tiles (l a multiple of both key tiles) with summaries that start inside a
    // tile, with documents; a summary of whole tiles at D = 128; l = 64, computed for 64-key
    // tiles and masked for 128; l = 100, masked everywhere; odd N throughout.
    add({2, 1000, 5, 64, attn_fixed(128, 16)}).docs = DE;
    add({2, 2085, 3, 128, attn_fixed(256, 128)});
    add({1, 1500, 4, 64, attn_fixed(64, 8)});
    add({2, 1000, 3, 128, attn_fixed(100, 7)}).docs = DE;
    add({1, 1300, 4, 64, attn_fixed(128, 128)}).identity = Identity{"summary = stride == dense", attn_dense(true)};
    add({1, 1300, 4, 128, attn_fixed(2048, 64)}).identity = Identity{"one block (l > N) == dense", attn_dense(true)};
}
#pragma GCC diagnostic pop

// The list: the every-backend cases, then the sized ones (small: the compute-sanitizer subset of
// the sized cases).
inline std::vector<AttnCase> attention_cases(bool small = false) {
    std::vector<AttnCase> out;
    add_every_backend_cases(out);
    add_sized_cases(out, small);
    return out;
}

// The every-backend cases (each test picks the sizes).
inline std::vector<AttnCase> attn_cases() {
    std::vector<AttnCase> out;
    for (AttnCase& c : attention_cases())
        if (c.N == 0) out.push_back(std::move(c));
    return out;
}

// The sized cases (the GPU harness).
inline std::vector<AttnCase> attn_sized_cases(bool small = false) {
    std::vector<AttnCase> out;
    for (AttnCase& c : attention_cases(small))
        if (c.N > 0) out.push_back(std::move(c));
    return out;
}

// The sized cases the CPU runs in float64: at most max_work multiply-adds of Q.K^T (B H N^2 D).
inline std::vector<AttnCase> attn_cpu_cases(double max_work = 7e8) {
    std::vector<AttnCase> out;
    for (AttnCase& c : attn_sized_cases())
        if ((double)c.B * c.H * c.N * c.N * c.D <= max_work) out.push_back(std::move(c));
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
