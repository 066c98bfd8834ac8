// The GPU attention harness: every case on every backend (tests/gpu/attention_backends.cuh:
// our flash kernels in each tile variant, the same kernels through the two-sided interface,
// cuDNN, the plain CUDA kernel), in a test mode and a perf mode (ggml's test-backend-ops).
//
// Test mode, per case, on fresh seeded random inputs (bf16 values, so the references see what
// the kernels see):
//   reference   one float64 reference, layers/attention.h: one softmax per query over its key
//               multiset, driven by key_multiplicity (so any registered pattern);
//   budget      a plain bf16 implementation (tests/attention_branchwise.h: the spec branch by
//               branch, every stored value rounded to bf16); a kernel passes when its error is
//               within 3x the plain one's plus a small floor (flash-attention's rule). The same
//               code in double without rounding must equal the reference (checked per case up
//               to 4K tokens), so the budget is that of an implementation that is right;
//   forward     O and L against the reference, outputs poisoned (NaN bytes) first; rows with no
//               key give exactly O = 0, L = -inf;
//   backward    dQ, dK, dV from the same (bf16 O, fp32 L) for every backend, the dQKV buffer
//               poisoned as a whole and every element written;
//   extra       bit-identical reruns (forward; deterministic backwards), negative controls (a 2%
//               wrong scale, a near-miss pattern) that the comparison must catch, and the spec's
//               identities (a pattern equal to another one, e.g. dilated (w >= N, 1) == dense),
//               each held to the plain bf16 error.
// A new pattern adds its cases to cases() and nothing else; a new backend is an entry in
// attention_backends().
//
// Perf mode (--perf): forward and backward time (median of cudaEvent-timed runs) and TFLOP/s of
// every backend on a few large shapes, FLOPs counted over the pairs the pattern keeps
// (4 D per pair forward, 10 D backward: docs/attention-spec.md#flops). The README's tables come
// from the benchmarks (tests/gpu/bench_attention*.cu); this mode compares backends side by side.
//
// Usage: test_attention [--seed N] [--small] [--perf] [--filter TEXT] [--backend TEXT]
//   --small: six small cases (for compute-sanitizer); --filter: the cases whose name contains
//   TEXT; --backend: the backends whose name contains TEXT.
// Output: PASS/FAIL lines, then "N passed, M failed"; exit 1 on failure; with no GPU, a skip
// message and "0 passed, 0 failed".
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "layers/attention.h"
#include "tests/attention_branchwise.h"
#include "tests/gpu/attention_backends.cuh"
#include "tests/gpu/bench_common.cuh"
#include "tests/gpu/attention_test_common.cuh"
#include "tests/gradcheck.h"

// ------------------------------------------------------------------------------------------------
// Cases.

enum class Docs { None, Several, SeveralAndEmptyRows };

// "This case's pattern equals that pattern" (the spec's identities), optionally with a document
// every `doc_every` tokens on the other side and L shifted by l_shift.
struct Identity {
    std::string what;
    AttnPattern other;
    int doc_every = 0;
    double l_shift = 0;
};

struct Case {
    int B, N, H, D;
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
};

static AttnPattern dense(bool causal) {
    AttnPattern p;
    p.causal = causal;
    return p;
}
static AttnPattern dilated(bool causal, std::vector<std::pair<int, int>> branches) {  // (w, r)
    AttnPattern p;
    p.kind = AttnKind::Dilated;
    p.causal = causal;
    for (auto [w, r] : branches) p.dilated.segments.push_back(w), p.dilated.dilations.push_back(r);
    return p;
}

// Block-sparse of block b: window W, global g, dilated blocks (r, V), random blocks per row.
static AttnPattern block_sparse(bool causal, int b, int W, int g, int r = 0, int V = 0, int random = 0) {
    AttnPattern p;
    p.kind = AttnKind::BlockSparse;
    p.causal = causal;
    p.block_sparse.block = b, p.block_sparse.window = W, p.block_sparse.global = g, p.block_sparse.dilated_r = r, p.block_sparse.dilated_window = V, p.block_sparse.random_count = random, p.block_sparse.random_seed = 11;
    return p;
}
// The same pattern's block rules written out as an explicit per-head layout (BlockLayout).
static AttnPattern block_sparse_as_layout(const AttnPattern& p, int N, int H) {
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
static AttnPattern fixed(int l, int c) {
    AttnPattern p;
    p.kind = AttnKind::Fixed;
    p.fixed.stride = l, p.fixed.summary = c;
    return p;
}

static std::string pattern_name(const AttnPattern& p) {
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

static std::string case_name(const Case& c) {
    std::string s = "B" + std::to_string(c.B) + " N" + std::to_string(c.N) + " H" + std::to_string(c.H) + " D" +
                    std::to_string(c.D) + " " + pattern_name(c.pattern);
    if (c.pos0) s += " pos+" + std::to_string(c.pos0);
    if (c.gaps) s += " gaps";
    if (c.repeats) s += " repeats";
    if (c.docs != Docs::None) s += c.docs == Docs::Several ? " docs" : " docs+empty";
    if (!c.packed) s += " unpacked";
    if (c.scale_mul != 1.f) s += " scale*" + std::to_string(c.scale_mul).substr(0, 3);
    if (c.min_chunk) s += " chunk>=" + std::to_string(c.min_chunk);
    return s;
}

static std::vector<Case> cases(bool small) {
    const Docs DS = Docs::Several, DE = Docs::SeveralAndEmptyRows;
    using BR = std::vector<std::pair<int, int>>;
    const BR scaled = {{256, 3}, {160, 2}, {1280, 4}};  // the spec's (8,3),(5,2),(40,4) at tile sizes
    const BR longnet = {{2048, 1}, {4096, 2}, {8192, 4}};
    std::vector<Case> v;
    auto add = [&](Case c) -> Case& { return v.emplace_back(std::move(c)), v.back(); };
    if (small) {
        add({2, 100, 3, 64, dense(true), 5000}).docs = DE;
        Case& u = add({1, 257, 1, 128, dense(false)});
        u.docs = DS, u.packed = false;
        add({2, 300, 5, 64, dilated(true, {{64, 1}, {40, 2}})}).min_chunk = 100;  // dQ chunks per branch
        Case& d = add({2, 300, 5, 128, dilated(false, {{64, 2}, {96, 3}})});      // no r = 1 branch
        d.docs = DE, d.min_chunk = 64;
        add({2, 300, 3, 64, block_sparse(true, 64, 100, 16, 2, 256)}).docs = DE;  // tile lists, element masks
        add({1, 300, 3, 128, fixed(128, 16)});                                 // computed tiles, summary cut
        return v;
    }
    // Dense: odd sizes, one token, later chunks (positions offset, with gaps), documents with rows
    // that attend nothing, unpacked Q/K/V, sharp softmaxes.
    add({1, 1, 1, 64, dense(true)});
    add({1, 1, 3, 128, dense(false), 5000});
    add({2, 17, 3, 128, dense(true), 5000}).determinism = true;
    add({1, 17, 12, 64, dense(false)}).packed = false;
    add({1, 100, 12, 64, dense(false)}).negative_controls = true;
    add({3, 100, 12, 128, dense(true)}).docs = DS;
    Case& c6 = add({3, 257, 3, 128, dense(true), 5000});
    c6.docs = DE, c6.determinism = true;
    add({2, 257, 1, 64, dense(false)}).docs = DE;
    Case& c8 = add({2, 257, 3, 64, dense(true)});
    c8.packed = false, c8.scale_mul = 4;
    add({1, 1000, 3, 64, dense(true), 5000}).gaps = true;
    add({1, 1000, 3, 64, dense(true), 5000}).repeats = true;  // the causal diagonal by positions, not rows
    add({2, 300, 2, 128, dense(true)}).repeats = true;
    add({1, 1000, 1, 128, dense(false)}).packed = false;
    add({1, 1000, 12, 128, dense(true)});
    add({2, 2085, 1, 64, dense(true)}).docs = DS;
    add({1, 2085, 3, 128, dense(true), 5000}).determinism = true;
    add({1, 2085, 1, 64, dense(false)}).scale_mul = 4;
    // Dense shapes cuDNN takes: a non-default scale with positions offset, and a plain one.
    for (int D : {64, 128})
        for (bool causal : {true, false}) {
            add({2, 257, 3, D, dense(causal), 4096}).scale_mul = 2;
            add({2, 1000, 3, D, dense(causal)});
        }
    // Dilated: r not dividing w, H = 5 not a multiple of r, N not a multiple of w, a segment
    // longer than N, r = w, branches with and without an r = 1 branch, documents, the backward's
    // dQ chunks (grouped and per branch), the LongNet configuration at 10K tokens.
    Case& d0 = add({2, 1000, 5, 64, dilated(true, scaled)});  // no r = 1 branch; a segment longer than N
    d0.negative_controls = true, d0.near_miss = dilated(true, {{255, 3}, {160, 2}, {1280, 4}});
    add({2, 1000, 5, 128, dilated(false, scaled)});
    add({2, 2085, 5, 64, dilated(false, scaled)}).min_chunk = 1000;  // dQ in two grouped chunks of 1280
    add({2, 2085, 5, 128, dilated(true, scaled)}).determinism = true;
    add({2, 2085, 5, 64, dilated(true, {{300, 1}, {256, 2}})}).min_chunk = 500;  // dQ chunks per branch
    add({2, 1000, 5, 64, dilated(true, {{256, 2}, {512, 1}, {7, 7}})}).docs = DE;
    Case& d6 = add({2, 1000, 5, 128, dilated(false, {{100, 3}, {64, 64}})});
    d6.docs = DE, d6.min_chunk = 200;
    add({2, 1500, 5, 64, dilated(true, {{4096, 1}})}).identity = Identity{"(w>=N,1) == dense", dense(true)};
    add({2, 1500, 5, 128, dilated(false, {{1500, 1}})}).identity = Identity{"(w=N,1) == dense", dense(false)};
    // A document per segment is block-diagonal only under the causal mask.
    add({2, 1500, 5, 64, dilated(true, {{384, 1}})}).identity =
        Identity{"(w<N,1) causal == dense with a document per segment", dense(true), 384};
    add({2, 1500, 5, 128, dilated(false, {{384, 1}})});  // block-diagonal, non-causal
    add({2, 1500, 5, 64, dilated(true, {{384, 1}, {384, 1}})}).identity =
        Identity{"(w,1),(w,1) == (w,1) once, L + ln 2", dilated(true, {{384, 1}}), 0, std::log(2.0)};
    add({1, 4099, 12, 64, dilated(true, {{512, 1}, {1024, 2}, {2048, 4}})});
    Case& d13 = add({2, 10007, 5, 64, dilated(true, longnet)});  // dQ in chunks of 8192
    d13.min_chunk = 1000, d13.negative_controls = true, d13.near_miss = dilated(true, {{2047, 1}, {4096, 2}, {8192, 4}});
    add({2, 10007, 5, 128, dilated(false, longnet)});
    // Block-sparse (the naive kernel until the flash kernels take it): token rules that cut
    // blocks (window, global), block rules (dilated blocks, random blocks per head), an explicit
    // per-head layout; odd N, documents with rows that attend nothing.
    add({2, 1000, 5, 64, block_sparse(true, 64, 300, 70)}).docs = DE;
    add({2, 1000, 5, 128, block_sparse(false, 64, 300, 70)});
    add({2, 2085, 3, 64, block_sparse(true, 128, 0, 0, 3, 4096, 2)}).identity =
        Identity{"every block near the diagonal (dilated blocks r=3 within 4096) vs itself as a layout", block_sparse_as_layout(block_sparse(true, 128, 0, 0, 3, 4096, 2), 2085, 3)};
    add({1, 1500, 4, 128, block_sparse(true, 64, 0, 0, 1, 1 << 20)}).identity = Identity{"all blocks active == dense", dense(true)};
    add({2, 1500, 4, 64, block_sparse(true, 64, 0, 0, 1, 64)}).identity =
        Identity{"the diagonal block alone == dilated (w = b, r = 1)", dilated(true, {{64, 1}})};
    // Fixed: computed tiles (l a multiple of both key tiles) with summaries that start inside a
    // tile, with documents; a summary of whole tiles at D = 128; l = 64, computed for 64-key
    // tiles and masked for 128; l = 100, masked everywhere; odd N throughout.
    add({2, 1000, 5, 64, fixed(128, 16)}).docs = DE;
    add({2, 2085, 3, 128, fixed(256, 128)});
    add({1, 1500, 4, 64, fixed(64, 8)});
    add({2, 1000, 3, 128, fixed(100, 7)}).docs = DE;
    add({1, 1300, 4, 64, fixed(128, 128)}).identity = Identity{"summary = stride == dense", dense(true)};
    add({1, 1300, 4, 128, fixed(2048, 64)}).identity = Identity{"one block (l > N) == dense", dense(true)};
    return v;
}

// ------------------------------------------------------------------------------------------------
// One case.

// The inputs: (B, N, 3, H, D) on the host in double and float (the same bf16 values), positions,
// documents, dO; and on the device in the case's layout.
struct Inputs {
    std::vector<bf16> qkv_dev;       // the device layout (packed or three blocks)
    std::vector<double> qkv;         // (B, N, 3, H, D)
    std::vector<float> qkv_f;
    std::vector<bf16> dout_h;        // (B, N, H, D)
    std::vector<double> dout;
    std::vector<float> dout_f;
    std::vector<int> pos, doc;       // (N), (B, N) or empty
};

static Inputs make_inputs(const Case& c, gc::Rng& rng) {
    const int B = c.B, N = c.N, HD = c.H * c.D;
    const size_t nqkv = (size_t)B * N * 3 * HD, no = (size_t)B * N * HD;
    Inputs in;
    in.qkv_dev.resize(nqkv);
    in.dout_h.resize(no);
    for (auto& x : in.qkv_dev) x = __float2bfloat16((float)rng.normal());
    for (auto& x : in.dout_h) x = __float2bfloat16((float)rng.normal());
    in.pos.resize(N);
    for (int i = 0; i < N; i++) in.pos[i] = i == 0 ? c.pos0 : in.pos[i - 1] + (c.gaps ? rng.randint(1, 3) : c.repeats ? rng.randint(0, 2) : 1);
    if (c.docs != Docs::None) {
        in.doc.resize((size_t)B * N);
        for (int b = 0; b < B; b++) {
            int start = in.pos[0];
            for (int i = 0; i < N; i++) {
                if (i > 0 && rng.uniform() < 4.0 / N) start = in.pos[i];  // about 4 documents per row
                in.doc[(size_t)b * N + i] = start;
            }
            if (c.docs == Docs::SeveralAndEmptyRows)
                for (int k = 0; k < 3; k++) {  // rows that attend no key: a document starting after them
                    const int i = rng.randint(0, N - 1);
                    in.doc[(size_t)b * N + i] = c.pattern.causal ? in.pos[i] + 1 : in.pos[N - 1] + 1;
                }
        }
    }
    in.qkv_f.resize(nqkv);
    for (size_t t = 0; t < (size_t)B * N; t++)
        for (int w = 0; w < 3; w++)
            for (int x = 0; x < HD; x++) {
                const size_t src = c.packed ? (t * 3 + w) * HD + x : (size_t)w * no + t * HD + x;
                in.qkv_f[(t * 3 + w) * HD + x] = __bfloat162float(in.qkv_dev[src]);
            }
    in.qkv = to_double(in.qkv_f);
    in.dout_f = to_float(in.dout_h);
    in.dout = to_double(in.dout_f);
    return in;
}

// What every backend is compared with: the float64 reference and the plain bf16 errors.
struct Expected {
    std::vector<double> O, L, dgrad[3];   // reference; dgrad (B, N, H, D) each
    Err O_plain, L_plain, d_plain[3];     // the plain bf16 implementation's errors
    std::vector<bf16> O_in;               // the backward's O: the reference rounded to bf16
    std::vector<float> L_in;              // and its L in fp32
};

static const char* kGradName[3] = {"dQ", "dK", "dV"};

static Expected expected(const Case& c, const Inputs& in, float scale, const std::string& name) {
    const int B = c.B, N = c.N, H = c.H, D = c.D, HD = H * D;
    const size_t no = (size_t)B * N * HD, nl = (size_t)B * H * N;
    const AttnShape s3{B, N, H, D, 3 * HD};
    const int* doc = in.doc.empty() ? nullptr : in.doc.data();
    const double* q = in.qkv.data();
    Expected e;
    e.O.resize(no);
    e.L.resize(nl);
    attention_forward<double>(e.O.data(), e.L.data(), q, q + HD, q + 2 * HD, in.pos.data(), doc, c.pattern, s3, scale);
    e.O_in = to_bf16(e.O);
    e.L_in.resize(nl);
    for (size_t i = 0; i < nl; i++) e.L_in[i] = (float)e.L[i];
    const std::vector<double> O_in = to_double(to_float(e.O_in)), L_in = to_double(e.L_in);
    std::vector<double> dqkv(in.qkv.size(), 0.0);
    attention_backward<double>(dqkv.data(), dqkv.data() + HD, dqkv.data() + 2 * HD, in.dout.data(), O_in.data(),
                               L_in.data(), q, q + HD, q + 2 * HD, in.pos.data(), doc, c.pattern, s3, scale);
    for (int w = 0; w < 3; w++) {
        e.dgrad[w].resize(no);
        for (size_t t = 0; t < (size_t)B * N; t++)
            for (int x = 0; x < HD; x++) e.dgrad[w][t * HD + x] = dqkv[(t * 3 + w) * HD + x];
    }
    if (N <= 4096) {  // the budget's implementation, unrounded, is the reference
        auto exact = [](double x) { return x; };
        std::vector<double> o(no), l(nl), g[3] = {std::vector<double>(no), std::vector<double>(no), std::vector<double>(no)};
        branchwise_forward(o.data(), l.data(), q, q + HD, q + 2 * HD, in.pos.data(), doc, c.pattern, s3, (double)scale, exact);
        branchwise_backward(g[0].data(), g[1].data(), g[2].data(), in.dout.data(), O_in.data(), L_in.data(), q, q + HD,
                            q + 2 * HD, in.pos.data(), doc, c.pattern, s3, (double)scale, exact);
        double worst = std::max(error_vs(o.data(), e.O.data(), no).maxabs, error_vs(l.data(), e.L.data(), nl).maxabs);
        for (int w = 0; w < 3; w++) worst = std::max(worst, error_vs(g[w].data(), e.dgrad[w].data(), no).maxabs);
        check(worst < 1e-9, "budget: the spec branch by branch (double) == reference, fwd and bwd " + name);
    }
    const float* qf = in.qkv_f.data();
    auto round = [](float x) { return bf(x); };
    std::vector<float> o(no), l(nl), g[3] = {std::vector<float>(no), std::vector<float>(no), std::vector<float>(no)};
    branchwise_forward(o.data(), l.data(), qf, qf + HD, qf + 2 * HD, in.pos.data(), doc, c.pattern, s3, scale, round);
    const std::vector<float> O_in_f = to_float(e.O_in);
    branchwise_backward(g[0].data(), g[1].data(), g[2].data(), in.dout_f.data(), O_in_f.data(), e.L_in.data(), qf,
                        qf + HD, qf + 2 * HD, in.pos.data(), doc, c.pattern, s3, scale, round);
    e.O_plain = error_vs(o.data(), e.O.data(), no);
    e.L_plain = error_vs(l.data(), e.L.data(), nl);
    for (int w = 0; w < 3; w++) e.d_plain[w] = error_vs(g[w].data(), e.dgrad[w].data(), no);
    return e;
}

// The case's buffers on the device, and the two calls every check goes through.
struct Device {
    const Case& c;
    size_t no, nl, nqkv, koff, voff;
    DevBuf qkv, out, lse, dout, oin, lin, dqkv, pos, doc;
    AttnDevCase view;
    Device(const Case& c_, const Inputs& in, const Expected& e)
        : c(c_), no((size_t)c.B * c.N * c.H * c.D), nl((size_t)c.B * c.H * c.N), nqkv(3 * no),
          koff(c.packed ? (size_t)c.H * c.D : no), voff(2 * koff), qkv(nqkv * 2), out(no * 2), lse(nl * 4),
          dout(no * 2), oin(no * 2), lin(nl * 4), dqkv(nqkv * 2), pos(c.N * 4), doc(std::max<size_t>(in.doc.size(), 1) * 4) {
        upload(qkv, in.qkv_dev.data(), nqkv * 2);
        upload(dout, in.dout_h.data(), no * 2);
        upload(oin, e.O_in.data(), no * 2);
        upload(lin, e.L_in.data(), nl * 4);
        upload(pos, in.pos.data(), c.N * 4);
        if (!in.doc.empty()) upload(doc, in.doc.data(), in.doc.size() * 4);
        const bf16* q = qkv.as<bf16>();
        const int stride = c.packed ? 3 * c.H * c.D : c.H * c.D;
        view = AttnDevCase{q, q + koff, q + voff, pos.as<int>(), AttnShape{c.B, c.N, c.H, c.D, stride},
                           c.gaps || c.repeats ? -1 : c.pos0, dout.as<bf16>(), oin.as<bf16>()};
    }
    static void upload(DevBuf& d, const void* h, size_t bytes) {
        CUDA_CHECK(cudaMemcpy(d.p, h, bytes, cudaMemcpyHostToDevice));
    }
    const int* docs() const { return c.docs == Docs::None ? nullptr : doc.as<int>(); }

    void forward(const AttnBackend& be, const AttnPattern& p, const int* docs, float scale, std::vector<float>& o,
                 std::vector<float>& l) {
        CUDA_CHECK(cudaMemset(out.p, 0xff, no * 2));  // NaN bytes: an unwritten element fails
        CUDA_CHECK(cudaMemset(lse.p, 0xff, nl * 4));
        be.forward(out.as<bf16>(), lse.as<float>(), view, p, docs, scale);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<bf16> oh(no);
        l.resize(nl);
        CUDA_CHECK(cudaMemcpy(oh.data(), out.p, no * 2, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(l.data(), lse.p, nl * 4, cudaMemcpyDeviceToHost));
        o = to_float(oh);
    }
    // The whole dQKV allocation (poisoned first) and dQ, dK, dV as (B, N, H, D).
    void backward(const AttnBackend& be, const AttnPattern& p, const int* docs, const float* l_in, float scale,
                  std::vector<bf16>& all, std::vector<float> (&g)[3]) {
        CUDA_CHECK(cudaMemset(dqkv.p, 0xff, nqkv * 2));
        bf16* d = dqkv.as<bf16>();
        be.backward(d, d + koff, d + voff, l_in, view, p, docs, scale);
        CUDA_CHECK(cudaDeviceSynchronize());
        all.resize(nqkv);
        CUDA_CHECK(cudaMemcpy(all.data(), dqkv.p, nqkv * 2, cudaMemcpyDeviceToHost));
        const std::vector<float> f = to_float(all);
        const size_t HD = (size_t)c.H * c.D;
        for (int w = 0; w < 3; w++) {
            g[w].resize(no);
            for (size_t t = 0; t < (size_t)c.B * c.N; t++)
                for (size_t x = 0; x < HD; x++)
                    g[w][t * HD + x] = f[c.packed ? (t * 3 + w) * HD + x : (size_t)w * no + t * HD + x];
        }
    }
};

static double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    const std::vector<double> bd(b.begin(), b.end());
    return error_vs(a.data(), bd.data(), a.size()).norm;
}

static void run_case(const Case& c, uint64_t seed, const std::vector<AttnBackend>& backends) {
    const std::string name = case_name(c);
    gc::Rng rng(seed);
    const float scale = c.scale_mul / std::sqrt((float)c.D);
    const long long chunk_default = flash::dilated_min_chunk_tokens;
    if (c.min_chunk) flash::dilated_min_chunk_tokens = c.min_chunk;
    const Inputs in = make_inputs(c, rng);
    const Expected e = expected(c, in, scale, name);
    Device dev(c, in, e);
    const size_t no = dev.no, nl = dev.nl;
    const int B = c.B, N = c.N, H = c.H, D = c.D;

    // The identity's other side: its documents (one every doc_every tokens) and its L.
    std::vector<int> id_docs;
    DevBuf id_doc_dev((size_t)B * N * 4), id_lin(nl * 4);
    if (c.identity) {
        if (c.identity->doc_every) {
            id_docs.resize((size_t)B * N);
            for (size_t t = 0; t < id_docs.size(); t++) id_docs[t] = (int)(t % N) / c.identity->doc_every * c.identity->doc_every;
            Device::upload(id_doc_dev, id_docs.data(), id_docs.size() * 4);
        }
        std::vector<float> l(e.L_in);
        for (float& x : l) x = x == -INFINITY ? x : (float)(x - c.identity->l_shift);
        Device::upload(id_lin, l.data(), nl * 4);
    }
    const int* id_docs_p = id_docs.empty() ? dev.docs() : id_doc_dev.as<int>();

    for (const AttnBackend& be : backends) {
        const std::string why = be.refuses(c.pattern, dev.view, c.docs != Docs::None);
        const std::string tag = name + " [" + be.name + "]";
        if (!why.empty()) {
            std::printf("SKIP %s: %s\n", tag.c_str(), why.c_str());
            continue;
        }
        const bool id_ok = c.identity && be.refuses(c.identity->other, dev.view, !id_docs.empty() || c.docs != Docs::None).empty();
        if (be.forward) {
            std::vector<float> o, l;
            dev.forward(be, c.pattern, dev.docs(), scale, o, l);
            if (!compare("fwd O " + tag, error_vs(o.data(), e.O.data(), no), e.O_plain, e.O.data(), no, 1e-4, 1.0 / 512))
                print_worst("O", o.data(), e.O.data(), B, N, H, D, (size_t)H * D);
            compare("fwd L " + tag, error_vs(l.data(), e.L.data(), nl), e.L_plain, e.L.data(), nl, 1e-5, 2e-5);
            if (c.determinism) {
                std::vector<float> o2, l2;
                dev.forward(be, c.pattern, dev.docs(), scale, o2, l2);
                check(gc::count_bit_mismatch(o.data(), o2.data(), no) == 0 && gc::count_bit_mismatch(l.data(), l2.data(), nl) == 0,
                      "fwd bit-identical rerun " + tag);
            }
            if (c.docs == Docs::SeveralAndEmptyRows) {  // rows with no key: exactly O = 0 and L = -inf
                int rows = 0, bad = 0;
                for (int b = 0; b < B; b++)
                    for (int h = 0; h < H; h++)
                        for (int i = 0; i < N; i++) {
                            if (e.L[((size_t)b * H + h) * N + i] != -INFINITY) continue;
                            rows++;
                            bad += l[((size_t)b * H + h) * N + i] != -INFINITY;
                            for (int x = 0; x < D; x++) bad += o[(((size_t)b * N + i) * H + h) * D + x] != 0.f;
                        }
                check(rows > 0 && bad == 0, "fwd empty rows O=0 L=-inf " + tag + " (" + std::to_string(rows) + " rows)");
            }
            if (c.negative_controls) {  // the comparison must catch a slightly wrong kernel
                std::vector<float> o2, l2;
                dev.forward(be, c.pattern, dev.docs(), scale * 1.02f, o2, l2);
                check(!(error_vs(o2.data(), e.O.data(), no).norm <= 3 * e.O_plain.norm + 1e-4),
                      "negative control: 2% wrong scale is detected " + tag);
                if (c.near_miss) {
                    dev.forward(be, *c.near_miss, dev.docs(), scale, o2, l2);
                    check(!(error_vs(o2.data(), e.O.data(), no).norm <= 3 * e.O_plain.norm + 1e-4),
                          "negative control: near miss " + pattern_name(*c.near_miss) + " is detected " + tag);
                }
            }
            if (id_ok) {  // held to the plain bf16 error: what two correct bf16 implementations may differ by
                std::vector<float> o1, l1;
                dev.forward(be, c.identity->other, id_docs_p, scale, o1, l1);
                double lmax = 0;
                for (size_t i = 0; i < nl; i++)
                    if (std::isfinite(l[i]) || l[i] != l1[i]) lmax = std::max(lmax, std::fabs(l[i] - (l1[i] + c.identity->l_shift)));
                const double od = rel_diff(o, o1);
                check(od <= e.O_plain.norm + 1e-5 && lmax <= 1e-4,
                      "identity " + c.identity->what + " fwd: O rel diff " + std::to_string(od) + " (plain bf16 err " +
                          std::to_string(e.O_plain.norm) + "), L max diff " + std::to_string(lmax) + " " + tag);
            }
        }
        if (be.backward) {
            std::vector<bf16> all;
            std::vector<float> g[3];
            dev.backward(be, c.pattern, dev.docs(), dev.lin.as<float>(), scale, all, g);
            bool all_written = true;
            for (const bf16& x : all) all_written &= !std::isnan(__bfloat162float(x));
            for (int w = 0; w < 3; w++)
                if (!compare(std::string("bwd ") + kGradName[w] + " " + tag, error_vs(g[w].data(), e.dgrad[w].data(), no),
                             e.d_plain[w], e.dgrad[w].data(), no, 1e-4, 1.0 / 512))
                    print_worst(kGradName[w], g[w].data(), e.dgrad[w].data(), B, N, H, D, (size_t)H * D);
            check(all_written, "bwd writes every element of dQKV " + tag);
            if (c.determinism) {
                std::vector<bf16> all2;
                std::vector<float> g2[3];
                dev.backward(be, c.pattern, dev.docs(), dev.lin.as<float>(), scale, all2, g2);
                const size_t diff = gc::count_bit_mismatch(all.data(), all2.data(), all.size());
                if (be.deterministic_backward)
                    check(diff == 0, "bwd bit-identical rerun " + tag);
                else
                    std::printf("INFO bwd rerun %s: %zu of %zu elements differ (atomic adds: not deterministic)\n",
                                tag.c_str(), diff, all.size());
            }
            if (id_ok) {  // the other pattern's backward takes its own L
                std::vector<bf16> all1;
                std::vector<float> g1[3];
                dev.backward(be, c.identity->other, id_docs_p, id_lin.as<float>(), scale, all1, g1);
                for (int w = 0; w < 3; w++) {
                    const double gd = rel_diff(g[w], g1[w]);
                    check(gd <= e.d_plain[w].norm + 1e-5, "identity " + c.identity->what + " bwd " + kGradName[w] +
                                                              ": rel diff " + std::to_string(gd) + " (plain bf16 err " +
                                                              std::to_string(e.d_plain[w].norm) + ") " + tag);
                }
            }
        }
    }
    flash::dilated_min_chunk_tokens = chunk_default;
}

// cuDNN's refusals, each with its reason (the verdict is taken before the message is built).
static void check_cudnn_refusals() {
    std::string why;
    const AttnShape ok{2, 1000, 3, 128, 3 * 3 * 128};
    bool good = attention_cudnn_supports(dense(true), ok, false, &why) && why.empty();
    check(good, "cudnn supports dense causal D=128");
    AttnShape d96 = ok;
    d96.D = 96;
    d96.stride = 3 * 3 * 96;
    good = !attention_cudnn_supports(dense(true), d96, false, &why) && !why.empty();
    check(good, "cudnn refuses D=96: " + why);
    why.clear();
    good = !attention_cudnn_supports(dense(true), ok, true, &why) && !why.empty();
    check(good, "cudnn refuses a document mask: " + why);
    AttnShape odd = ok;
    odd.stride = 3 * 3 * 128 + 4;
    why.clear();
    good = !attention_cudnn_supports(dense(false), odd, false, &why) && !why.empty();
    check(good, "cudnn refuses a row stride that breaks 16-byte alignment: " + why);
    why.clear();
    good = !attention_cudnn_supports(dilated(true, {{64, 2}}), ok, false, &why) && !why.empty();
    check(good, "cudnn refuses a dilated pattern: " + why);
}

// ------------------------------------------------------------------------------------------------
// Perf mode.

// B * N = 64K tokens and H * D = 2048 (the benchmarks' shapes); the naive kernel only up to 8K.
static int run_perf(const std::string& filter, const std::string& backend) {
    struct Shape {
        int N, D;
        AttnPattern p;
    };
    const std::vector<Shape> shapes = {
        {8192, 64, dense(true)},   {8192, 128, dense(true)},  {32768, 128, dense(true)},
        {32768, 64, dilated(true, {{2048, 1}, {4096, 2}, {8192, 4}})},
        {32768, 128, dilated(true, {{2048, 1}, {4096, 2}, {8192, 4}})},
    };
    std::printf("%-44s %-28s %9s %8s %9s %8s\n", "case", "backend", "fwd ms", "TFLOP/s", "bwd ms", "TFLOP/s");
    for (const Shape& sh : shapes) {
        const int N = sh.N, D = sh.D, H = 2048 / D, B = 65536 / N, HD = H * D;
        const std::string name = "B" + std::to_string(B) + " N" + std::to_string(N) + " H" + std::to_string(H) + " D" +
                                 std::to_string(D) + " " + pattern_name(sh.p);
        if (!filter.empty() && name.find(filter) == std::string::npos) continue;
        const size_t no = (size_t)B * N * HD, nl = (size_t)B * H * N;
        DevBuf qkv(3 * no * 2), out(no * 2), lse(nl * 4), dout(no * 2), dqkv(3 * no * 2), pos(N * 4);
        fill_normal_bf16<<<1024, 256>>>(qkv.as<bf16>(), 3 * no, 1);
        fill_normal_bf16<<<1024, 256>>>(dout.as<bf16>(), no, 2);
        std::vector<int> ph(N);
        for (int i = 0; i < N; i++) ph[i] = i;
        CUDA_CHECK(cudaMemcpy(pos.p, ph.data(), N * 4, cudaMemcpyHostToDevice));
        const bf16* q = qkv.as<bf16>();
        const AttnDevCase view{q, q + HD, q + 2 * HD, pos.as<int>(), AttnShape{B, N, H, D, 3 * HD}, 0, dout.as<bf16>(),
                               out.as<bf16>()};
        const float scale = 1.f / std::sqrt((float)D);
        const double pairs = B * pairs_kept(sh.p, N, H);
        attention_forward_cuda(out.as<bf16>(), lse.as<float>(), view.q, view.k, view.v, view.pos, nullptr, sh.p, view.s,
                               scale, 0);  // O and L for the backward
        Timer timer;
        for (const AttnBackend& be : attention_backends(D)) {
            if (be.name.find(backend) == std::string::npos) continue;
            if (!be.refuses(sh.p, view, false).empty() || (be.name == "naive" && N > 8192)) continue;
            double fms = NAN, bms = NAN;
            DevBuf o2(no * 2), l2(nl * 4);
            if (be.forward)
                fms = timer.median_ms([&] { be.forward(o2.as<bf16>(), l2.as<float>(), view, sh.p, nullptr, scale); }, 1, 5);
            bf16* d = dqkv.as<bf16>();
            if (be.backward)
                bms = timer.median_ms([&] { be.backward(d, d + HD, d + 2 * HD, lse.as<float>(), view, sh.p, nullptr, scale); }, 1, 5);
            std::printf("%-44s %-28s %9.3f %8.1f %9.3f %8.1f\n", name.c_str(), be.name.c_str(), fms,
                        4.0 * D * pairs / (fms * 1e9), bms, 10.0 * D * pairs / (bms * 1e9));
            std::fflush(stdout);
        }
    }
    return 0;
}

// ------------------------------------------------------------------------------------------------

static int main_body(int argc, char** argv) {
    uint64_t seed = 20261121;
    bool small = false, perf = false;
    std::string filter, backend;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--small")) small = true;
        else if (!std::strcmp(argv[i], "--perf")) perf = true;
        else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
        else if (!std::strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
        else fatal("usage: test_attention [--seed N] [--small] [--perf] [--filter TEXT] [--backend TEXT] (got '%s')", argv[i]);
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        std::printf("SKIP test_attention: no CUDA device\n0 passed, 0 failed\n");
        return 0;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("test_attention: %s, seed %llu%s%s\n", prop.name, (unsigned long long)seed, small ? " (small)" : "",
                perf ? " (perf)" : "");
    if (perf) return run_perf(filter, backend);
    if (!small && filter.empty() && backend.empty()) check_cudnn_refusals();
    const std::vector<Case> all = cases(small);
    for (size_t i = 0; i < all.size(); i++) {
        const std::string name = case_name(all[i]);
        if (!filter.empty() && name.find(filter) == std::string::npos) continue;
        const uint64_t cs = seed * 1000003ull + i;
        std::printf("case %zu: %s (seed %llu)\n", i, name.c_str(), (unsigned long long)cs);
        std::fflush(stdout);
        std::vector<AttnBackend> backends;
        for (const AttnBackend& be : attention_backends(all[i].D))
            if (be.name.find(backend) != std::string::npos) backends.push_back(be);
        run_case(all[i], cs, backends);
    }
    return check_report();
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
