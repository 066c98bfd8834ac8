// GPU test of the flash attention kernels (layers/cuda/attention_flash.cuh) against the CPU
// reference (layers/attention.h instantiated in double on the bf16-rounded inputs).
//
// For every case and every tile variant, on fresh seeded random inputs:
//   fwd   O and L of the kernel vs the double reference: ||x - ref|| / ||ref|| and max |x - ref|.
//   bwd   dQ, dK, dV likewise, from the same (bf16 O, fp32 L) inputs for all implementations.
// The bound is set by what bf16 storage costs: a plain bf16 implementation emulated on the CPU
// (S in fp32, P rounded to bf16 before P V / P^T dO, dS rounded to bf16, outputs rounded to bf16)
// is compared with the same reference, and the kernel passes if its error <= 3x the plain one's
// plus a small floor (flash-attention style). Outputs are poisoned (NaN bytes) before every run,
// so an unwritten element fails; dQKV is poisoned as a whole buffer. Also: forward and the
// deterministic backward run twice are bit-identical; a kernel run with a 2% wrong scale must be
// caught by the same comparison (the test can fail); rows with no allowed key give O = 0, L = -inf.
//
// Usage: test_attention [--seed N] [--small]   (--small: two small cases, for compute-sanitizer)
// Output: PASS/FAIL lines, then "N passed, M failed"; exit 1 on failure; exit 0 with a skip
// message and "0 passed, 0 failed" when there is no GPU.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "layers/attention.h"
#include "layers/cuda/attention_flash.h"
#include "layers/cuda/attention_flash_variants.h"  // every tile variant
#include "tests/gpu/attention_test_common.cuh"
#include "tests/gradcheck.h"

// ------------------------------------------------------------------------------------------------
// Plain bf16 attention on the CPU: the accuracy a straightforward bf16 GPU implementation has.

static void plain_forward(float* out, float* lse, const float* qkv, const int* pos, const int* doc,
                          const AttnPattern& pat, const AttnShape& s, float scale) {
    const int B = s.B, N = s.N, H = s.H, D = s.D, HD = H * D;
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) {
            std::vector<float> sc(N), e(N);
            for (int h = 0; h < H; h++) {
                const float* qi = qkv + ((size_t)b * N + i) * s.stride + h * D;
                float mx = -INFINITY;
                for (int j = 0; j < N; j++) {
                    sc[j] = -INFINITY;
                    if (!attn_multiplicity(pat, s, pos, doc, b, h, i, j)) continue;
                    const float* kj = qkv + ((size_t)b * N + j) * s.stride + HD + h * D;
                    float dot = 0;
                    for (int d = 0; d < D; d++) dot += qi[d] * kj[d];
                    sc[j] = dot * scale;
                    mx = std::max(mx, sc[j]);
                }
                float* oi = out + ((size_t)b * N + i) * HD + h * D;
                float* li = lse + ((size_t)b * H + h) * N + i;
                for (int d = 0; d < D; d++) oi[d] = 0;
                if (mx == -INFINITY) {
                    *li = -INFINITY;
                    continue;
                }
                float l = 0;
                for (int j = 0; j < N; j++) l += (e[j] = std::exp(sc[j] - mx));
                std::vector<float> acc(D, 0.f);
                for (int j = 0; j < N; j++) {
                    if (e[j] == 0) continue;
                    const float p = bf(e[j] / l);
                    const float* vj = qkv + ((size_t)b * N + j) * s.stride + 2 * HD + h * D;
                    for (int d = 0; d < D; d++) acc[d] += p * vj[d];
                }
                for (int d = 0; d < D; d++) oi[d] = bf(acc[d]);
                *li = mx + std::log(l);
            }
        }
}

// dqkv (B, N, 3, H, D) overwritten. Two passes (dQ over queries, dK/dV over keys) so that both
// parallelize over rows.
static void plain_backward(float* dqkv, const float* dout, const float* out, const float* lse, const float* qkv,
                           const int* pos, const int* doc, const AttnPattern& pat, const AttnShape& s, float scale) {
    const int B = s.B, N = s.N, H = s.H, D = s.D, HD = H * D;
    auto Q = [&](int b, int i, int h) { return qkv + ((size_t)b * N + i) * s.stride + h * D; };
    auto K = [&](int b, int j, int h) { return qkv + ((size_t)b * N + j) * s.stride + HD + h * D; };
    auto V = [&](int b, int j, int h) { return qkv + ((size_t)b * N + j) * s.stride + 2 * HD + h * D; };
    auto dO = [&](int b, int i, int h) { return dout + (((size_t)b * N + i) * H + h) * D; };
    std::vector<float> delta((size_t)B * H * N);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++)
            for (int h = 0; h < H; h++) {
                float d = 0;
                for (int x = 0; x < D; x++) d += dO(b, i, h)[x] * out[(((size_t)b * N + i) * H + h) * D + x];
                delta[((size_t)b * H + h) * N + i] = d;
            }
    // P (fp32) and dS (rounded to bf16) of the pair, or false if masked.
    auto pair = [&](int b, int h, int i, int j, float& p, float& ds) {
        const float L = lse[((size_t)b * H + h) * N + i];
        if (L == -INFINITY || !attn_multiplicity(pat, s, pos, doc, b, h, i, j)) return false;
        float dot = 0, dp = 0;
        for (int x = 0; x < D; x++) {
            dot += Q(b, i, h)[x] * K(b, j, h)[x];
            dp += dO(b, i, h)[x] * V(b, j, h)[x];
        }
        p = std::exp(dot * scale - L);
        ds = bf(p * (dp - delta[((size_t)b * H + h) * N + i]) * scale);
        return true;
    };
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++)
            for (int h = 0; h < H; h++) {
                std::vector<float> acc(D, 0.f);
                for (int j = 0; j < N; j++) {
                    float p, ds;
                    if (!pair(b, h, i, j, p, ds)) continue;
                    for (int x = 0; x < D; x++) acc[x] += ds * K(b, j, h)[x];
                }
                float* dq = dqkv + ((size_t)b * N + i) * s.stride + h * D;
                for (int x = 0; x < D; x++) dq[x] = bf(acc[x]);
            }
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++)
        for (int j = 0; j < N; j++)
            for (int h = 0; h < H; h++) {
                std::vector<float> ak(D, 0.f), av(D, 0.f);
                for (int i = 0; i < N; i++) {
                    float p, ds;
                    if (!pair(b, h, i, j, p, ds)) continue;
                    const float pb = bf(p);
                    for (int x = 0; x < D; x++) {
                        av[x] += pb * dO(b, i, h)[x];
                        ak[x] += ds * Q(b, i, h)[x];
                    }
                }
                float* dk = dqkv + ((size_t)b * N + j) * s.stride + HD + h * D;
                float* dv = dk + HD;
                for (int x = 0; x < D; x++) dk[x] = bf(ak[x]), dv[x] = bf(av[x]);
            }
}

// ------------------------------------------------------------------------------------------------
// Cases.

enum class Docs { None, Several, SeveralAndEmptyRows };

struct Case {
    int B, N, H, D;
    bool causal;
    int pos0;        // position of token 0 (global positions of a later chunk)
    bool pos_gaps;   // positions increase by 1..3 instead of 1
    Docs docs;
    bool packed;     // Q, K, V slices of one (B, N, 3, H, D) buffer; else three (B, N, H, D) blocks
    float scale_mul; // scale = scale_mul / sqrt(D): > 1 sharpens the softmax
};

static std::string case_name(const Case& c) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "B%d N%d H%d D%d %s%s%s%s%s", c.B, c.N, c.H, c.D, c.causal ? "causal" : "full",
                  c.pos0 ? " pos+5000" : "", c.pos_gaps ? " gaps" : "",
                  c.docs == Docs::None ? "" : c.docs == Docs::Several ? " docs" : " docs+empty",
                  c.packed ? "" : " unpacked");
    std::string s = buf;
    if (c.scale_mul != 1.f) s += " sharp";
    return s;
}

static void run_case(const Case& c, uint64_t seed, bool determinism, bool negative_control) {
    const std::string name = case_name(c);
    gc::Rng rng(seed);
    const int B = c.B, N = c.N, H = c.H, D = c.D, HD = H * D;
    // Packed: one (B, N, 3, H, D) buffer, stride 3HD. Unpacked: Q, K, V as three contiguous
    // (B, N, H, D) blocks of the same allocation, stride HD.
    const int stride = c.packed ? 3 * HD : HD;
    const size_t nqkv = (size_t)B * N * 3 * HD, no = (size_t)B * N * HD, nl = (size_t)B * H * N;
    const size_t koff = c.packed ? HD : no, voff = c.packed ? 2 * HD : 2 * no;
    const AttnShape s{B, N, H, D, stride};
    AttnPattern pat;
    pat.causal = c.causal;
    const float scale = c.scale_mul / std::sqrt((float)D);

    std::vector<bf16> qkv_h(nqkv), dout_h(no);
    for (auto& x : qkv_h) x = __float2bfloat16((float)rng.normal());
    for (auto& x : dout_h) x = __float2bfloat16((float)rng.normal());
    std::vector<int> pos(N), doc;
    for (int i = 0; i < N; i++) pos[i] = c.pos0 + (i == 0 ? 0 : pos[i - 1] - c.pos0 + (c.pos_gaps ? rng.randint(1, 3) : 1));
    if (c.docs != Docs::None) {
        doc.resize((size_t)B * N);
        for (int b = 0; b < B; b++) {
            int start = pos[0];
            for (int i = 0; i < N; i++) {
                if (i > 0 && rng.uniform() < 4.0 / N) start = pos[i];  // about 4 documents per row
                doc[(size_t)b * N + i] = start;
            }
            if (c.docs == Docs::SeveralAndEmptyRows) {
                // Rows that attend no key: a document starting after every key (non-causal) or
                // after the query itself (causal).
                for (int k = 0; k < 3; k++) {
                    const int i = rng.randint(0, N - 1);
                    doc[(size_t)b * N + i] = c.causal ? pos[i] + 1 : pos[N - 1] + 1;
                }
            }
        }
    }
    const int* doc_h = doc.empty() ? nullptr : doc.data();

    // The same numbers in the layout the CPU functions take (a (B, N, 3, H, D) buffer).
    std::vector<float> qkv_f(nqkv);
    {
        const std::vector<float> raw = to_float(qkv_h);
        for (int b = 0; b < B; b++)
            for (int n = 0; n < N; n++)
                for (int w = 0; w < 3; w++)
                    for (int x = 0; x < HD; x++) {
                        const size_t src = c.packed ? (((size_t)b * N + n) * 3 + w) * HD + x
                                                    : (size_t)w * no + ((size_t)b * N + n) * HD + x;
                        qkv_f[(((size_t)b * N + n) * 3 + w) * HD + x] = raw[src];
                    }
    }
    const std::vector<double> qkv_d = to_double(qkv_f);
    const std::vector<float> dout_f = to_float(dout_h);
    const std::vector<double> dout_d = to_double(dout_f);
    const AttnShape s3{B, N, H, D, 3 * HD};

    // References: double, and plain bf16.
    std::vector<double> o_ref(no), l_ref(nl);
    attention_forward<double>(o_ref.data(), l_ref.data(), qkv_d.data(), qkv_d.data() + HD, qkv_d.data() + 2 * HD,
                              pos.data(), doc_h, pat, s3, (double)scale);
    std::vector<float> o_pl(no), l_pl(nl);
    plain_forward(o_pl.data(), l_pl.data(), qkv_f.data(), pos.data(), doc_h, pat, s3, scale);

    // Backward inputs shared by everyone: O rounded to bf16, L in fp32.
    const std::vector<bf16> o_in_h = to_bf16(o_ref);
    const std::vector<float> o_in_f = to_float(o_in_h);
    const std::vector<double> o_in_d = to_double(o_in_f);
    std::vector<float> l_in_f(nl);
    for (size_t i = 0; i < nl; i++) l_in_f[i] = (float)l_ref[i];
    const std::vector<double> l_in_d = to_double(l_in_f);
    std::vector<double> dqkv_ref(nqkv, 0.0);
    attention_backward<double>(dqkv_ref.data(), dqkv_ref.data() + HD, dqkv_ref.data() + 2 * HD, dout_d.data(),
                               o_in_d.data(), l_in_d.data(), qkv_d.data(), qkv_d.data() + HD, qkv_d.data() + 2 * HD,
                               pos.data(), doc_h, pat, s3, (double)scale);
    std::vector<float> dqkv_pl(nqkv);
    plain_backward(dqkv_pl.data(), dout_f.data(), o_in_f.data(), l_in_f.data(), qkv_f.data(), pos.data(), doc_h, pat,
                   s3, scale);

    // Views of the (B, N, 3, H, D) CPU buffers as one (B, N, H, D) tensor each.
    auto slice = [&](const auto& buf, int w) {
        std::vector<double> out(no);
        for (size_t t = 0; t < (size_t)B * N; t++)
            for (int x = 0; x < HD; x++) out[t * HD + x] = (double)buf[(t * 3 + w) * HD + x];
        return out;
    };
    std::vector<double> dref[3], dpl[3];
    for (int w = 0; w < 3; w++) dref[w] = slice(dqkv_ref, w), dpl[w] = slice(dqkv_pl, w);
    const Err e_o_pl = error_vs(o_pl.data(), o_ref.data(), no), e_l_pl = error_vs(l_pl.data(), l_ref.data(), nl);
    Err e_d_pl[3];
    for (int w = 0; w < 3; w++) e_d_pl[w] = error_vs(dpl[w].data(), dref[w].data(), no);

    // Device buffers.
    DevBuf d_qkv(nqkv * 2), d_out(no * 2), d_lse(nl * 4), d_dout(no * 2), d_oin(no * 2), d_lin(nl * 4),
        d_dqkv(nqkv * 2), d_pos(N * 4), d_doc(std::max<size_t>(doc.size(), 1) * 4),
        d_ws(attention_backward_workspace_bytes(s));
    CUDA_CHECK(cudaMemcpy(d_qkv.p, qkv_h.data(), nqkv * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_dout.p, dout_h.data(), no * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_oin.p, o_in_h.data(), no * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_lin.p, l_in_f.data(), nl * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_pos.p, pos.data(), N * 4, cudaMemcpyHostToDevice));
    if (!doc.empty()) CUDA_CHECK(cudaMemcpy(d_doc.p, doc.data(), doc.size() * 4, cudaMemcpyHostToDevice));
    const int* d_doc_p = doc.empty() ? nullptr : d_doc.as<int>();
    const bf16* q = d_qkv.as<bf16>();
    const bf16 *k = q + koff, *v = q + voff;

    auto forward = [&](int variant, float sc, std::vector<float>& o, std::vector<float>& l) {
        CUDA_CHECK(cudaMemset(d_out.p, 0xff, no * 2));  // NaN bytes
        CUDA_CHECK(cudaMemset(d_lse.p, 0xff, nl * 4));
        attention_forward_cuda_variant(variant, d_out.as<bf16>(), d_lse.as<float>(), q, k, v, d_pos.as<int>(), d_doc_p,
                                       pat, s, sc, 0);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<bf16> oh(no);
        l.resize(nl);
        CUDA_CHECK(cudaMemcpy(oh.data(), d_out.p, no * 2, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(l.data(), d_lse.p, nl * 4, cudaMemcpyDeviceToHost));
        o = to_float(oh);
    };
    // Returns the whole dQKV allocation (poisoned first), and dq, dk, dv as (B, N, H, D).
    auto backward = [&](int variant, std::vector<bf16>& all, std::vector<float> (&g)[3]) {
        CUDA_CHECK(cudaMemset(d_dqkv.p, 0xff, nqkv * 2));
        CUDA_CHECK(cudaMemset(d_ws.p, 0xff, attention_backward_workspace_bytes(s)));
        bf16* dq = d_dqkv.as<bf16>();
        attention_backward_cuda_variant(variant, dq, dq + koff, dq + voff, d_dout.as<bf16>(), d_oin.as<bf16>(),
                                        d_lin.as<float>(), q, k, v, d_pos.as<int>(), d_doc_p, pat, s, scale,
                                        d_ws.as<float>(), 0);
        CUDA_CHECK(cudaDeviceSynchronize());
        all.resize(nqkv);
        CUDA_CHECK(cudaMemcpy(all.data(), d_dqkv.p, nqkv * 2, cudaMemcpyDeviceToHost));
        const std::vector<float> f = to_float(all);
        for (int w = 0; w < 3; w++) {
            g[w].resize(no);
            for (size_t t = 0; t < (size_t)B * N; t++)
                for (int x = 0; x < HD; x++) {
                    const size_t src = c.packed ? (t * 3 + w) * HD + x : (size_t)w * no + t * HD + x;
                    g[w][t * HD + x] = f[src];
                }
        }
    };

    int nfwd = 0, nbwd = 0;
    const flash::Variant* fv = flash::forward_variants(D, &nfwd);
    const flash::Variant* bv = flash::backward_variants(D, &nbwd);
    for (int vi = 0; vi < nfwd; vi++) {
        std::vector<float> o, l;
        forward(vi, scale, o, l);
        const std::string tag = name + " [" + fv[vi].name + "]";
        if (!compare("fwd O " + tag, error_vs(o.data(), o_ref.data(), no), e_o_pl, o_ref.data(), no, 1e-4, 1.0 / 512))
            print_worst("O", o.data(), o_ref.data(), B, N, H, D, HD);
        compare("fwd L " + tag, error_vs(l.data(), l_ref.data(), nl), e_l_pl, l_ref.data(), nl, 1e-5, 2e-5);
        if (determinism) {
            std::vector<float> o2, l2;
            forward(vi, scale, o2, l2);
            check(gc::count_bit_mismatch(o.data(), o2.data(), no) == 0 &&
                      gc::count_bit_mismatch(l.data(), l2.data(), nl) == 0,
                  "fwd bit-identical rerun " + tag);
        }
    }
    if (c.docs == Docs::SeveralAndEmptyRows) {
        // Rows with no key: exactly O = 0 and L = -inf (no NaN).
        std::vector<float> o, l;
        forward(0, scale, o, l);
        int rows = 0, bad = 0;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < N; i++) {
                    if (l_ref[((size_t)b * H + h) * N + i] != -INFINITY) continue;
                    rows++;
                    bad += l[((size_t)b * H + h) * N + i] != -INFINITY;
                    for (int x = 0; x < D; x++) bad += o[(((size_t)b * N + i) * H + h) * D + x] != 0.f;
                }
        check(rows > 0 && bad == 0, "fwd empty rows O=0 L=-inf " + name + " (" + std::to_string(rows) + " rows)");
    }
    if (negative_control) {
        // The comparison must catch a kernel that is slightly wrong: run with a 2% larger scale.
        std::vector<float> o, l;
        forward(0, scale * 1.02f, o, l);
        const Err e = error_vs(o.data(), o_ref.data(), no);
        const bool caught = !(e.norm <= 3 * e_o_pl.norm + 1e-4);
        check(caught, "negative control: 2% wrong scale is detected " + name);
    }
    static const char* gname[3] = {"dQ", "dK", "dV"};
    for (int vi = 0; vi < nbwd; vi++) {
        std::vector<bf16> all;
        std::vector<float> g[3];
        backward(vi, all, g);
        const std::string tag = name + " [" + bv[vi].name + "]";
        bool all_written = true;
        for (const bf16& x : all) all_written &= !std::isnan(__bfloat162float(x));
        for (int w = 0; w < 3; w++)
            if (!compare(std::string("bwd ") + gname[w] + " " + tag, error_vs(g[w].data(), dref[w].data(), no),
                         e_d_pl[w], dref[w].data(), no, 1e-4, 1.0 / 512))
                print_worst(gname[w], g[w].data(), dref[w].data(), B, N, H, D, HD);
        check(all_written, "bwd writes every element of dQKV " + tag);
        if (determinism) {
            std::vector<bf16> all2;
            std::vector<float> g2[3];
            backward(vi, all2, g2);
            const size_t diff = gc::count_bit_mismatch(all.data(), all2.data(), nqkv);
            const bool atomic = std::strstr(bv[vi].name, "atomic") != nullptr;
            if (atomic)  // fp32 atomics: dQ summation order varies; reported, not required
                std::printf("INFO bwd rerun %s: %zu of %zu elements differ (atomic dQ is not deterministic)\n",
                            tag.c_str(), diff, nqkv);
            else
                check(diff == 0, "bwd bit-identical rerun " + tag);
        }
    }
}

static int main_body(int argc, char** argv) {
    uint64_t seed = 20261121;
    bool small = false;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--small")) small = true;
        else fatal("usage: test_attention [--seed N] [--small]");
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        std::printf("SKIP test_attention: no CUDA device\n0 passed, 0 failed\n");
        return 0;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("test_attention: %s, seed %llu%s\n", prop.name, (unsigned long long)seed, small ? " (small)" : "");

    const Docs NO = Docs::None, DS = Docs::Several, DE = Docs::SeveralAndEmptyRows;
    // B, N, H, D, causal, pos0, gaps, docs, packed, scale_mul
    const std::vector<Case> full = {
        {1, 1, 1, 64, true, 0, false, NO, true, 1},
        {1, 1, 3, 128, false, 5000, false, NO, true, 1},
        {2, 17, 3, 128, true, 5000, false, NO, true, 1},
        {1, 17, 12, 64, false, 0, false, NO, false, 1},
        {1, 100, 12, 64, false, 0, false, NO, true, 1},
        {3, 100, 12, 128, true, 0, false, DS, true, 1},
        {3, 257, 3, 128, true, 5000, false, DE, true, 1},
        {2, 257, 1, 64, false, 0, false, DE, true, 1},
        {2, 257, 3, 64, true, 0, false, NO, false, 4},
        {1, 1000, 3, 64, true, 5000, true, NO, true, 1},
        {1, 1000, 1, 128, false, 0, false, NO, false, 1},
        {1, 1000, 12, 128, true, 0, false, NO, true, 1},
        {2, 2085, 1, 64, true, 0, false, DS, true, 1},
        {1, 2085, 3, 128, true, 5000, false, NO, true, 1},
        {1, 2085, 1, 64, false, 0, false, NO, true, 4},
    };
    const std::vector<Case> smallset = {
        {2, 100, 3, 64, true, 5000, false, DE, true, 1},
        {1, 257, 1, 128, false, 0, false, DS, false, 1},
    };
    const std::vector<Case>& cases = small ? smallset : full;
    for (size_t i = 0; i < cases.size(); i++) {
        const uint64_t cs = seed * 1000003ull + i;
        std::printf("case %zu: %s (seed %llu)\n", i, case_name(cases[i]).c_str(), (unsigned long long)cs);
        run_case(cases[i], cs, /*determinism=*/!small && (i == 2 || i == 6 || i == 13), /*negative_control=*/i == 4);
    }
    std::printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
