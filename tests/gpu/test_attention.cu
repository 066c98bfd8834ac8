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
// The cases are the sized ones of tests/attention_cases.h (the one list every attention test
// reads): a new pattern adds its cases there and nothing else; a new backend is an entry in
// attention_backends().
//
// Perf mode (--perf): forward and backward time (median of cudaEvent-timed runs) and TFLOP/s of
// every backend on a few large shapes, FLOPs counted over the pairs the pattern keeps
// (4 D per pair forward, 10 D backward: docs/attention-spec.md#flops). The README's tables come
// from the benchmarks (bench/bench_attention*.cu); this mode compares backends side by side.
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
#include "tests/attention_cases.h"
#include "tests/gpu/attention_backends.cuh"
#include "bench/bench_common.cuh"
#include "tests/gpu/attention_test_common.cuh"
#include "tests/gradcheck.h"
#include "layers/cuda/attention/tma_rows.cuh"  // check_tma_folds
#include "layers/patterns/dilated_tuning.h"       // flash::dilated_min_chunk_tokens

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

static Inputs make_inputs(const AttnCase& c, gc::Rng& rng) {
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

static Expected expected(const AttnCase& c, const Inputs& in, float scale, const std::string& name) {
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
    const AttnCase& c;
    size_t no, nl, nqkv, koff, voff;
    DevBuf qkv, out, lse, dout, oin, lin, dqkv, pos, doc;
    AttnDevCase view;
    Device(const AttnCase& c_, const Inputs& in, const Expected& e)
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

static void run_case(const AttnCase& c, uint64_t seed, const std::vector<AttnBackend>& backends) {
    const std::string name = attn_case_name(c);
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
                          "negative control: near miss " + attn_pattern_name(*c.near_miss) + " is detected " + tag);
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
    bool good = attention_cudnn_supports(attn_dense(true), ok, false, &why) && why.empty();
    check(good, "cudnn supports dense causal D=128");
    AttnShape d96 = ok;
    d96.D = 96;
    d96.stride = 3 * 3 * 96;
    good = !attention_cudnn_supports(attn_dense(true), d96, false, &why) && !why.empty();
    check(good, "cudnn refuses D=96: " + why);
    why.clear();
    good = !attention_cudnn_supports(attn_dense(true), ok, true, &why) && !why.empty();
    check(good, "cudnn refuses a document mask: " + why);
    AttnShape odd = ok;
    odd.stride = 3 * 3 * 128 + 4;
    why.clear();
    good = !attention_cudnn_supports(attn_dense(false), odd, false, &why) && !why.empty();
    check(good, "cudnn refuses a row stride that breaks 16-byte alignment: " + why);
    why.clear();
    good = !attention_cudnn_supports(attn_dilated(true, {{64, 2}}), ok, false, &why) && !why.empty();
    check(good, "cudnn refuses a dilated pattern: " + why);
}

// The forward's TMA reads a dilated branch's rows past step 8 through folded 4-D maps
// (tma_rows.cuh, ws_fold): which fold a launch takes, and that the driver encodes such maps
// (were it to refuse them, those launches would quietly run the kernel without TMA, correct
// and slower).
static void check_tma_folds() {
    check(flash::ws_fold(12, 262144, 262144) == 4, "ws_fold: r = 12 over 2^k tokens folds by 4 (stride 3, boxes of 64)");
    check(flash::ws_fold(6, 1000, 1000) == 1, "ws_fold: a step up to 8 is not folded");
    check(flash::ws_fold(64, 1000, 1000) == 8, "ws_fold: r = 64 over 1000 tokens folds by 8 (16 does not divide 1000)");
    check(flash::ws_fold(12, 1001, 1001) == 0, "ws_fold: no fold of 12 divides 1001 tokens (the kernels without TMA)");
    check(flash::ws_fold(12, 4096, 1001) == 0, "ws_fold: the fold must divide both sides' tokens");
    const int N = 4096, HD = 768;
    bf16* rows = nullptr;
    CUDA_CHECK(cudaMalloc(&rows, (size_t)N * 3 * HD * sizeof(bf16)));
    CUtensorMap m;
    check(flash::make_row_tensor_map(&m, rows, HD, N, 3 * HD, 1, 64, 12, 4), "a folded row map (r = 12, fold 4) encodes");
    check(!flash::make_row_tensor_map(&m, rows, HD, N - 2, 3 * HD, 1, 64, 12, 4), "a fold that does not divide the tokens is refused");
    check(!flash::make_row_tensor_map(&m, rows, HD, N, 3 * HD, 1, 64, 12, 1), "r = 12 unfolded is refused (stride over 8)");
    CUDA_CHECK(cudaFree(rows));
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
        {8192, 64, attn_dense(true)},   {8192, 128, attn_dense(true)},  {32768, 128, attn_dense(true)},
        {32768, 64, attn_dilated(true, {{2048, 1}, {4096, 2}, {8192, 4}})},
        {32768, 128, attn_dilated(true, {{2048, 1}, {4096, 2}, {8192, 4}})},
    };
    std::printf("%-44s %-28s %9s %8s %9s %8s\n", "case", "backend", "fwd ms", "TFLOP/s", "bwd ms", "TFLOP/s");
    for (const Shape& sh : shapes) {
        const int N = sh.N, D = sh.D, H = 2048 / D, B = 65536 / N, HD = H * D;
        const std::string name = "B" + std::to_string(B) + " N" + std::to_string(N) + " H" + std::to_string(H) + " D" +
                                 std::to_string(D) + " " + attn_pattern_name(sh.p);
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
    if (filter.empty() && backend.empty()) check_tma_folds();
    const std::vector<AttnCase> all = attn_sized_cases(small);
    for (size_t i = 0; i < all.size(); i++) {
        const std::string name = attn_case_name(all[i]);
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
