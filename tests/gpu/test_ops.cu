// GPU op harness, in the spirit of ggml's test-backend-ops: every CUDA kernel of layers/cuda/
// (attention aside) against the CPU reference of layers/*.h (the T=double instantiation, run on the
// same bf16-rounded inputs), forward and backward, on fresh random inputs (seeded; the seed is
// printed; --seed picks it), with every output poisoned (NaN bytes) before each run, at sizes that
// are not powers of two.
//
// Tolerances by dtype:
//   bf16 outputs  the flash-attention rule: the kernel's error against the exact (double)
//                 reference must be within 3x the error of a plain bf16 implementation (the
//                 reference with its outputs and stored intermediates rounded to bf16), in both
//                 the norm metric ||a-b||/||b|| and the elementwise one (gc::rel_error, floored
//                 at 1e-3 of the tensor's scale).
//   fp32 outputs  against double: norm and elementwise bounds at fp32-accumulation level.
//   "+=" outputs  start from random values; the increment (result - start) is what is compared.
// Plus: bit-exact gathers, determinism of the reductions (two runs, identical bits), the
// in-place variants the API allows, the scalar fallbacks for misaligned buffers, that cuBLASLt's
// fused GELU is the tanh approximation, and that the checker itself rejects a wrong answer.
//
// Usage: test_ops [--seed N] [--filter OP] [--small] [--perf] [--out FILE]
//   --small  tiny shapes (for compute-sanitizer);  --perf  timing table at the GPT-2 124M shape
//   (B*T = 32768, C = 768, V = 50257) instead of the checks; --out FILE also writes that table.
// Output: "PASS|FAIL <check> <op> <shape> ..." lines, then "<n> passed, <m> failed"; exit 1 on
// any failure; with no GPU, a SKIP line, "0 passed, 0 failed" and exit 0.
#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "layers/classifier.h"
#include "layers/encoder.h"
#include "layers/gelu.h"
#include "layers/layernorm.h"
#include "layers/matmul.h"
#include "layers/qk_conv.h"
#include "layers/attn_sink.h"
#include "layers/pointer.h"
#include "layers/residual.h"
#include "layers/rope.h"
#include "tests/check.h"
#include "tests/gradcheck.h"

#include "optim/adamw.cuh"
#include "optim/clip.cuh"
#include "layers/cuda/classifier.cuh"
#include "layers/cuda/encoder.cuh"
#include "layers/cuda/gelu.cuh"
#include "layers/cuda/layernorm.cuh"
#include "layers/cuda/matmul.cuh"
#include "layers/cuda/qk_conv.cuh"
#include "layers/cuda/attn_sink.cuh"
#include "layers/cuda/pointer.cuh"
#include "layers/cuda/residual.cuh"
#include "layers/cuda/rope.cuh"
#include "bench/ceilings.cuh"

typedef std::vector<float> VF;
typedef std::vector<double> VD;

// ------------------------------------------------------------------------------------------------
// Reporting

static uint64_t g_seed = 1234;
static bool g_small = false;
static std::string g_filter;

static bool report(bool ok, const char* check, const std::string& op, const std::string& shape, const std::string& detail) {
    return ::check(ok, strf("%-5s %-22s %-34s %s", check, op.c_str(), shape.c_str(), detail.c_str()));
}

// ------------------------------------------------------------------------------------------------
// Host data and device buffers

static float bfr(double x) { return __bfloat162float(__float2bfloat16((float)x)); }  // round to bf16
static VF rand_bf16(size_t n, gc::Rng& rng, double lo, double hi) {
    VF v(n);
    for (size_t i = 0; i < n; i++) v[i] = bfr(rng.uniform(lo, hi));
    return v;
}
static VF rand_f32(size_t n, gc::Rng& rng, double lo, double hi) {
    VF v(n);
    for (size_t i = 0; i < n; i++) v[i] = (float)rng.uniform(lo, hi);
    return v;
}
static VD to_d(const VF& v) { return VD(v.begin(), v.end()); }
static VD round_bf16(const VD& v) {
    VD r(v.size());
    for (size_t i = 0; i < v.size(); i++) r[i] = bfr(v[i]);
    return r;
}

template <class T>
struct DBuf {
    T* p = nullptr;
    size_t n = 0;
    explicit DBuf(size_t count) : n(count) { CUDA_CHECK(cudaMalloc((void**)&p, std::max<size_t>(count, 1) * sizeof(T))); }
    ~DBuf() { cudaFree(p); }
    DBuf(const DBuf&) = delete;
    DBuf& operator=(const DBuf&) = delete;
    void poison() { CUDA_CHECK(cudaMemset(p, 0xFF, n * sizeof(T))); }  // all-ones bytes: NaN in bf16 and fp32
};
static void up(DBuf<bf16>& d, const VF& h, size_t at = 0) {
    std::vector<bf16> t(h.size());
    for (size_t i = 0; i < h.size(); i++) t[i] = __float2bfloat16(h[i]);
    CUDA_CHECK(cudaMemcpy(d.p + at, t.data(), t.size() * sizeof(bf16), cudaMemcpyHostToDevice));
}
static void up(DBuf<float>& d, const VF& h, size_t at = 0) {
    CUDA_CHECK(cudaMemcpy(d.p + at, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
}
static void up(DBuf<int>& d, const std::vector<int>& h) {
    CUDA_CHECK(cudaMemcpy(d.p, h.data(), h.size() * sizeof(int), cudaMemcpyHostToDevice));
}
static VF down(const bf16* p, size_t n) {
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<bf16> t(n);
    CUDA_CHECK(cudaMemcpy(t.data(), p, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    VF r(n);
    for (size_t i = 0; i < n; i++) r[i] = __bfloat162float(t[i]);
    return r;
}
static VF down(const float* p, size_t n) {
    CUDA_CHECK(cudaDeviceSynchronize());
    VF r(n);
    CUDA_CHECK(cudaMemcpy(r.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
    return r;
}
static VF down(const DBuf<bf16>& d) { return down(d.p, d.n); }
static VF down(const DBuf<float>& d) { return down(d.p, d.n); }

static size_t bit_mismatch(const VF& a, const VF& b) {
    if (a.size() != b.size()) return (size_t)-1;
    return gc::count_bit_mismatch(a.data(), b.data(), a.size());
}
static VD minus(const VF& a, const VF& b) {  // a - b in double (exact for fp32 operands)
    VD r(a.size());
    for (size_t i = 0; i < a.size(); i++) r[i] = (double)a[i] - (double)b[i];
    return r;
}

// ------------------------------------------------------------------------------------------------
// Checks

struct Metric {
    double norm, elem;
};
template <class TA>
static Metric metric(const TA* a, const double* ref, size_t n) {
    return {gc::norm_rel_error(a, ref, n), gc::rel_error(a, ref, n, 1e-3)};
}

// gpu vs exact ref, judged against base (a plain bf16 implementation): err <= factor * base_err.
// The 1e-6 absolute slack only matters where the baseline is exact (base error 0).
template <class TA>
static bool judge_vs_base(const TA* gpu, const VD& ref, const VD& base, double factor, Metric* g, Metric* b) {
    *g = metric(gpu, ref.data(), ref.size());
    *b = metric(base.data(), ref.data(), ref.size());
    return g->norm <= factor * b->norm + 1e-6 && g->elem <= factor * b->elem + 1e-6;
}
template <class TA>
static bool check_vs_base(const char* check, const std::string& op, const std::string& shape, const std::vector<TA>& gpu,
                          const VD& ref, const VD& base, double factor = 3.0) {
    Metric g{-1, -1}, b{-1, -1};
    bool ok = gpu.size() == ref.size() && judge_vs_base(gpu.data(), ref, base, factor, &g, &b);
    return report(ok, check, op, shape,
                  strf("err norm %.3g elem %.3g | bf16 baseline norm %.3g elem %.3g (tol %gx)", g.norm, g.elem, b.norm,
                      b.elem, factor));
}
template <class TA>
static bool check_f32(const char* check, const std::string& op, const std::string& shape, const std::vector<TA>& gpu,
                      const VD& ref, double tol_norm, double tol_elem) {
    Metric g = metric(gpu.data(), ref.data(), ref.size());
    bool ok = gpu.size() == ref.size() && g.norm <= tol_norm && g.elem <= tol_elem;
    return report(ok, check, op, shape, strf("err norm %.3g elem %.3g (tol %.3g, %.3g)", g.norm, g.elem, tol_norm, tol_elem));
}
// An fp32 optimizer step p1 = p0 - u against the double one: per element, the error in units of
// what fp32 cannot avoid: ulp(p0) + ulp(p1) + 1e-6 |u| (the update itself computed in fp32).
// A missing term of the update (weight decay: lr * wd * p0 ~ 3e-5 p0) is hundreds of such units.
static double ulp32(double x) { return x == 0 ? 1e-45 : std::ldexp(1.0, std::ilogb((float)x) - 23); }
static bool check_adam(const char* check, const std::string& op, const std::string& shape, const VF& gpu, const VD& ref,
                       const VD& before) {
    double worst = gpu.size() == ref.size() ? 0 : INFINITY;
    for (size_t i = 0; i < gpu.size() && i < ref.size(); i++) {
        const double unit = ulp32(before[i]) + ulp32(ref[i]) + 1e-6 * std::fabs(ref[i] - before[i]);
        const double e = std::fabs((double)gpu[i] - ref[i]) / unit;
        if (!(e <= worst)) worst = e;  // NaN sticks
    }
    return report(worst <= 2.0, check, op, shape, strf("max error %.3g units of fp32 rounding (tol 2)", worst));
}

static bool check_bits(const char* check, const std::string& op, const std::string& shape, size_t mismatches,
                       const char* what) {
    return report(mismatches == 0, check, op, shape, strf("%zu elements differ (%s)", mismatches, what));
}

static bool selected(const char* op) { return g_filter.empty() || std::string(op).find(g_filter) != std::string::npos; }
static gc::Rng case_rng(const char* op, int variant) {  // each case draws from its own stream
    uint64_t h = g_seed * 0x9E3779B97F4A7C15ull + (uint64_t)variant;
    for (const char* c = op; *c; c++) h = (h ^ (uint64_t)*c) * 0x100000001B3ull;
    return gc::Rng(h);
}
static int S(int full, int small) { return g_small ? small : full; }

static cudaStream_t g_stream = 0;

// ------------------------------------------------------------------------------------------------
// encoder

static void test_encoder() {
    if (!selected("encoder")) return;
    const int Cs[2] = {768, 96};
    for (int variant = 0; variant < 2; variant++) {
        gc::Rng rng = case_rng("encoder", variant);
        const int B = 3, T = S(337, 41), C = Cs[variant], V = S(1003, 53), N = B * T;
        const std::string shape = strf("B=%d T=%d C=%d V=%d", B, T, C, V);
        std::vector<int> tok(N);
        // A heavy token (70% of positions) makes one long run (the block-per-run kernel); the rest
        // spread over V (warp-per-run kernel). At full size, tokens 11 and 12 appear exactly 64 and
        // 65 times: the two sides of the short/long boundary.
        for (int i = 0; i < N; i++) tok[i] = rng.uniform() < 0.7 ? 7 : rng.randint(0, V - 1);
        for (int i = 0; i < N; i++)
            if (!g_small && (tok[i] == 11 || tok[i] == 12)) tok[i] = 13;
        for (int k = 0; !g_small && k < 64 + 65; k++) {
            int at;
            do at = rng.randint(0, N - 2);
            while (tok[at] == 11 || tok[at] == 12);
            tok[at] = k < 64 ? 11 : 12;
        }
        tok[N - 1] = V - 1;
        VF wte = rand_bf16((size_t)V * C, rng, -1, 1), dout = rand_bf16((size_t)N * C, rng, -1, 1);
        DBuf<int> d_tok(N);
        DBuf<bf16> d_wte((size_t)V * C), d_out((size_t)N * C), d_dout((size_t)N * C);
        DBuf<float> d_dwte((size_t)V * C);
        up(d_tok, tok), up(d_wte, wte), up(d_dout, dout);

        d_out.poison();
        encoder_forward_cuda(d_out.p, d_tok.p, d_wte.p, B, T, C, g_stream);
        VF out = down(d_out), ref_out((size_t)N * C);
        encoder_forward(ref_out.data(), tok.data(), wte.data(), B, T, C);
        check_bits("fwd", "encoder", shape, bit_mismatch(out, ref_out), "gather must be exact");

        VD dref((size_t)V * C, 0.0);
        VD dout_d = to_d(dout);
        encoder_backward(dref.data(), dout_d.data(), tok.data(), B, T, C);
        VF init = rand_f32((size_t)V * C, rng, -1, 1);
        up(d_dwte, init);
        encoder_backward_cuda(d_dwte.p, d_dout.p, d_tok.p, B, T, C, g_stream);
        VF dwte1 = down(d_dwte);
        check_f32("bwd", "encoder.dwte", shape, minus(dwte1, init), dref, 2e-6, 2e-5);
        up(d_dwte, init);
        encoder_backward_cuda(d_dwte.p, d_dout.p, d_tok.p, B, T, C, g_stream);
        check_bits("det", "encoder.dwte", shape, bit_mismatch(down(d_dwte), dwte1), "two runs");
    }
}

// ------------------------------------------------------------------------------------------------
// layernorm

static void test_layernorm() {
    if (!selected("layernorm")) return;
    const int Cs[2] = {768, 96};
    for (int variant = 0; variant < 2; variant++) {
        gc::Rng rng = case_rng("layernorm", variant);
        const int N = S(1007, 37), C = Cs[variant];
        const std::string shape = strf("N=%d C=%d", N, C);
        const size_t NC = (size_t)N * C;
        // An offset of 1 makes the mean matter (a one-pass variance would lose digits).
        VF x = rand_bf16(NC, rng, 0, 2), w = rand_bf16(C, rng, 0.5, 1.5), b = rand_bf16(C, rng, -0.5, 0.5);
        VF dout = rand_bf16(NC, rng, -1, 1), dinp0 = rand_bf16(NC, rng, -1, 1);
        DBuf<bf16> d_x(NC), d_w(C), d_b(C), d_out(NC), d_dout(NC), d_dinp(NC);
        DBuf<float> d_mean(N), d_rstd(N), d_dw(C), d_db(C), d_scratch(layernorm_backward_scratch_bytes(N, C) / 4);
        up(d_x, x), up(d_w, w), up(d_b, b), up(d_dout, dout);

        VD xd = to_d(x), wd = to_d(w), bd = to_d(b), ref(NC), mean(N), rstd(N);
        layernorm_forward(ref.data(), mean.data(), rstd.data(), xd.data(), wd.data(), bd.data(), N, C);
        d_out.poison(), d_mean.poison(), d_rstd.poison();
        layernorm_forward_cuda(d_out.p, d_mean.p, d_rstd.p, d_x.p, d_w.p, d_b.p, N, C, g_stream);
        check_vs_base("fwd", "layernorm.out", shape, down(d_out), ref, round_bf16(ref));
        check_f32("fwd", "layernorm.mean", shape, down(d_mean), mean, 2e-6, 1e-5);
        check_f32("fwd", "layernorm.rstd", shape, down(d_rstd), rstd, 2e-6, 1e-5);

        // Backward on the float statistics the forward kept (both sides use the same ones).
        VF meanf(mean.begin(), mean.end()), rstdf(rstd.begin(), rstd.end());
        up(d_mean, meanf), up(d_rstd, rstdf);
        VD dx(NC, 0.0), dw(C, 0.0), db(C, 0.0), doutd = to_d(dout), meand = to_d(meanf), rstdd = to_d(rstdf);
        layernorm_backward(dx.data(), dw.data(), db.data(), doutd.data(), xd.data(), wd.data(), meand.data(), rstdd.data(), N, C);
        VD dinp_ref(NC);
        for (size_t i = 0; i < NC; i++) dinp_ref[i] = dinp0[i] + dx[i];
        VF dw0 = rand_f32(C, rng, -1, 1), db0 = rand_f32(C, rng, -1, 1);
        VF dinp_gpu[2], dw_gpu[2], db_gpu[2];
        for (int run = 0; run < 2; run++) {
            up(d_dinp, dinp0), up(d_dw, dw0), up(d_db, db0);
            d_scratch.poison();
            layernorm_backward_cuda(d_dinp.p, d_dw.p, d_db.p, d_dout.p, d_x.p, d_w.p, d_mean.p, d_rstd.p, N, C, d_scratch.p,
                                    g_stream);
            dinp_gpu[run] = down(d_dinp), dw_gpu[run] = down(d_dw), db_gpu[run] = down(d_db);
        }
        check_vs_base("bwd", "layernorm.dinp(+=)", shape, dinp_gpu[0], dinp_ref, round_bf16(dinp_ref));
        check_f32("bwd", "layernorm.dweight", shape, minus(dw_gpu[0], dw0), dw, 1e-5, 1e-4);
        check_f32("bwd", "layernorm.dbias", shape, minus(db_gpu[0], db0), db, 1e-5, 1e-4);
        check_bits("det", "layernorm.bwd", shape,
                   bit_mismatch(dinp_gpu[0], dinp_gpu[1]) + bit_mismatch(dw_gpu[0], dw_gpu[1]) + bit_mismatch(db_gpu[0], db_gpu[1]),
                   "two runs");
    }
}

// ------------------------------------------------------------------------------------------------
// matmul

// The CPU reference's GELU and its derivative over whole arrays: one OpenMP region a call (a
// region an element stalls for minutes when other processes keep the host's cores busy).
template <typename V>
static VD gelu_all(const V& x) {
    VD in(x.begin(), x.end()), out(x.size());
    gelu_forward(out.data(), in.data(), in.size());
    return out;
}
template <typename V>
static VD gelu_grad_all(const V& x) {
    VD in(x.begin(), x.end()), out(x.size(), 0.0), one(x.size(), 1.0);
    gelu_backward(out.data(), in.data(), one.data(), in.size());
    return out;
}

struct MatmulCase {
    int C, OC;
    bool bias, gelu, fused;
    int rows = 0;  // 0: the test's size (cuBLASLt); 1..4: a few rows (matmul_rows_kernel, decoding)
};

static void test_matmul_forward() {
    if (!selected("matmul")) return;
    const MatmulCase cases[] = {{768, 2304, true, false, true}, {96, 384, true, false, true},  {768, 768, false, false, true},
                                {768, 3072, true, true, true},  {96, 384, true, true, true},   {96, 384, true, true, false},
                                {96, 200, false, true, true},
                                {768, 2304, true, false, true, 1}, {3072, 768, true, false, true, 1}, {768, 3072, true, true, true, 1},
                                {96, 200, false, true, true, 3},   {776, 104, true, false, true, 4}};
    int variant = 0;
    for (const MatmulCase& mc : cases) {
        gc::Rng rng = case_rng("matmul_forward", variant++);
        const int N = mc.rows ? mc.rows : S(1007, 37), C = mc.C, OC = mc.OC;
        const std::string op = std::string(mc.rows ? "matmul(rows)" : "matmul") + (mc.gelu ? (mc.fused ? "+gelu(fused)" : "+gelu(kernel)") : "");
        const std::string shape = strf("N=%d C=%d OC=%d%s", N, C, OC, mc.bias ? " bias" : "");
        // Weights scaled so outputs have std ~2: the GELU then sees x in [-5, -3], where the tanh
        // and erf GELUs differ by 10-50%.
        const double a = 6.0 / std::sqrt((double)C);
        VF x = rand_bf16((size_t)N * C, rng, -1, 1), w = rand_bf16((size_t)OC * C, rng, -a, a), b = rand_bf16(OC, rng, -1, 1);
        DBuf<bf16> d_x((size_t)N * C), d_w((size_t)OC * C), d_b(OC), d_out((size_t)N * OC), d_pre((size_t)N * OC);
        up(d_x, x), up(d_w, w), up(d_b, b);
        VD xd = to_d(x), wd = to_d(w), bd = to_d(b), ref((size_t)N * OC);
        matmul_forward(ref.data(), xd.data(), wd.data(), mc.bias ? bd.data() : (const double*)nullptr, N, C, OC);
        d_out.poison(), d_pre.poison();
        g_matmul_fuse_gelu = mc.fused;
        matmul_forward_cuda(d_out.p, d_x.p, d_w.p, mc.bias ? d_b.p : nullptr, N, C, OC, g_stream, mc.gelu ? d_pre.p : nullptr);
        g_matmul_fuse_gelu = true;
        if (!mc.gelu) {
            check_vs_base("fwd", op + ".out", shape, down(d_out), ref, round_bf16(ref));
            continue;
        }
        const VF pre = down(d_pre), out = down(d_out);
        check_vs_base("fwd", op + ".pre_gelu", shape, pre, ref, round_bf16(ref));
        const VD gref = gelu_all(ref), gelu_of_rounded = gelu_all(round_bf16(ref));
        VD gbase(ref.size());
        for (size_t i = 0; i < ref.size(); i++) gbase[i] = bfr(gelu_of_rounded[i]);
        check_vs_base("fwd", op + ".out", shape, out, gref, gbase);
        // Which GELU: over outputs whose input lies in [-5.5, -2.5], the mean relative distance of
        // out to gelu_tanh(pre) and to the exact erf GELU.
        const VD gelu_pre = gelu_all(pre);
        double e_tanh = 0, e_erf = 0;
        int cnt = 0;
        for (size_t i = 0; i < pre.size(); i++) {
            const double p = pre[i];
            if (p < -5.5 || p > -2.5) continue;
            const double t = gelu_pre[i], e = 0.5 * p * (1 + std::erf(p / std::sqrt(2.0)));
            e_tanh += std::fabs(out[i] - t) / std::fabs(t), e_erf += std::fabs(out[i] - e) / std::fabs(e), cnt++;
        }
        e_tanh /= std::max(cnt, 1), e_erf /= std::max(cnt, 1);
        // Passes when out is at least 3x closer to the tanh GELU than to the erf one. (How close it
        // is measures the tail accuracy: with tanh rounding to -1 in fp32, 0.5x(1+tanh) has no
        // correct digit below x = -4; gelu.cuh's sigmoid form keeps them.)
        report(cnt > 20 && e_tanh < e_erf / 3, "kind", op, shape,
               strf("mean rel. distance over %d outputs at x in [-5.5,-2.5]: to tanh-GELU %.3g, to erf-GELU %.3g", cnt, e_tanh, e_erf));
    }
}

// Decoding's fused products (matmul.cuh: layernorm_matmul_forward_cuda, matmul_residual_forward_cuda):
// against the float64 composition (LayerNorm, its bf16 output, the product; the product, its bf16
// rounding, the residual add), and bit for bit against the two launches they replace, at 1 and 2
// rows (the fused kernel, odd widths included); at 3, 4 and 6 rows they are those two launches
// (kMatmulFuseRowsMax), checked against float64 only (a bit check there would compare them with
// themselves).
static void test_matmul_fused_rows() {
    if (!selected("matmul")) return;
    struct FusedCase {
        int N, C, OC;
        bool resid, gelu;
    };
    const FusedCase cases[] = {{1, 768, 2304, false, false}, {2, 768, 3072, false, true}, {2, 776, 104, false, false},
                               {3, 96, 200, false, true},    {6, 96, 200, false, true},   {1, 768, 768, true, false},
                               {2, 3072, 768, true, false},  {1, 96, 200, true, false},   {4, 776, 104, true, false}};
    int variant = 0;
    for (const FusedCase& fc : cases) {
        gc::Rng rng = case_rng("matmul_fused", variant++);
        const int N = fc.N, C = fc.C, OC = fc.OC;
        const std::string op = fc.resid ? "matmul+residual(rows)" : fc.gelu ? "layernorm+matmul+gelu(rows)" : "layernorm+matmul(rows)";
        const std::string shape = strf("N=%d C=%d OC=%d", N, C, OC);
        const double a = 6.0 / std::sqrt((double)C);
        // The residual stream with an offset and scale of its own (LayerNorm's two passes matter).
        VF x = rand_bf16((size_t)N * C, rng, 2, 5), w = rand_bf16((size_t)OC * C, rng, -a, a), b = rand_bf16(OC, rng, -1, 1);
        VF lw = rand_bf16(C, rng, 0.5, 1.5), lb = rand_bf16(C, rng, -0.5, 0.5), xo = rand_bf16((size_t)N * OC, rng, -3, 3);
        DBuf<bf16> d_x((size_t)N * C), d_w((size_t)OC * C), d_b(OC), d_lw(C), d_lb(C), d_ln((size_t)N * C);
        DBuf<bf16> d_out((size_t)N * OC), d_pre((size_t)N * OC), d_tmp((size_t)N * OC), d_out2((size_t)N * OC), d_pre2((size_t)N * OC);
        DBuf<float> d_mean(N), d_rstd(N);
        up(d_x, x), up(d_w, w), up(d_b, b), up(d_lw, lw), up(d_lb, lb);
        VD ref((size_t)N * OC), base;
        if (fc.resid) {
            matmul_forward(ref.data(), to_d(x).data(), to_d(w).data(), to_d(b).data(), N, C, OC);
            base = round_bf16(ref);
            for (size_t i = 0; i < ref.size(); i++) ref[i] += xo[i], base[i] = bfr(base[i] + xo[i]);
            up(d_out, xo), up(d_out2, xo);
            matmul_residual_forward_cuda(d_out.p, d_tmp.p, d_x.p, d_w.p, d_b.p, N, C, OC, g_stream);
            matmul_forward_cuda(d_tmp.p, d_x.p, d_w.p, d_b.p, N, C, OC, g_stream);  // the two launches
            residual_forward_cuda(d_out2.p, d_out2.p, d_tmp.p, (size_t)N * OC, g_stream);
        } else {
            VD ln((size_t)N * C), mean(N), rstd(N);
            layernorm_forward(ln.data(), mean.data(), rstd.data(), to_d(x).data(), to_d(lw).data(), to_d(lb).data(), N, C);
            matmul_forward(ref.data(), round_bf16(ln).data(), to_d(w).data(), to_d(b).data(), N, C, OC);
            if (fc.gelu) ref = gelu_all(ref);
            base = round_bf16(ref);
            d_out.poison(), d_pre.poison(), d_out2.poison(), d_pre2.poison();
            bf16* pre = fc.gelu ? d_pre.p : nullptr;
            layernorm_matmul_forward_cuda(d_out.p, d_ln.p, d_mean.p, d_rstd.p, d_x.p, d_lw.p, d_lb.p, d_w.p, d_b.p, N, C, OC, g_stream, pre);
            layernorm_forward_cuda(d_ln.p, d_mean.p, d_rstd.p, d_x.p, d_lw.p, d_lb.p, N, C, g_stream);  // the two launches
            matmul_forward_cuda(d_out2.p, d_ln.p, d_w.p, d_b.p, N, C, OC, g_stream, fc.gelu ? d_pre2.p : nullptr);
        }
        check_vs_base("fwd", op + ".out", shape, down(d_out), ref, base);
        if (N > kMatmulFuseRowsMax) continue;
        check_bits("bits", op + ".out", shape, bit_mismatch(down(d_out), down(d_out2)), "against the two launches");
        if (fc.gelu) check_bits("bits", op + ".pre_gelu", shape, bit_mismatch(down(d_pre), down(d_pre2)), "against the two launches");
    }
}

static void test_matmul_backward() {
    if (!selected("matmul")) return;
    // C here is the layer's input width: the gelu cases are the MLP projection (C = 4 * 768 -> 768).
    const MatmulCase cases[] = {{768, 2304, true, false, true}, {96, 384, true, false, true},  {768, 768, false, false, true},
                                {3072, 768, true, true, true},  {384, 96, true, true, true},   {384, 96, true, true, false}};
    int variant = 0;
    for (const MatmulCase& mc : cases) {
        gc::Rng rng = case_rng("matmul_backward", variant++);
        const int N = S(1007, 37), C = mc.C, OC = mc.OC;
        const std::string op = std::string("matmul") + (mc.gelu ? (mc.fused ? "+dgelu(fused)" : "+dgelu(kernel)") : "");
        const std::string shape = strf("N=%d C=%d OC=%d%s", N, C, OC, mc.bias ? " dbias" : "");
        const size_t NC = (size_t)N * C, NO = (size_t)N * OC, OCC = (size_t)OC * C;
        VF x = rand_bf16(NC, rng, -1, 1), w = rand_bf16(OCC, rng, -1, 1), dout = rand_bf16(NO, rng, -1, 1);
        VF pre = rand_bf16(NC, rng, -4, 4);
        DBuf<bf16> d_x(NC), d_w(OCC), d_dout(NO), d_dinp(NC), d_pre(NC);
        DBuf<float> d_dw(OCC), d_db(OC);
        up(d_x, x), up(d_w, w), up(d_dout, dout), up(d_pre, pre);
        VD xd = to_d(x), wd = to_d(w), doutd = to_d(dout), dx(NC, 0.0), dw(OCC, 0.0), db(OC, 0.0);
        matmul_backward(dx.data(), dw.data(), db.data(), doutd.data(), xd.data(), wd.data(), N, C, OC);
        VD dx_ref = dx, dx_base = round_bf16(dx);
        if (mc.gelu) {
            const VD grad = gelu_grad_all(pre);
            for (size_t i = 0; i < NC; i++) {
                const double g = grad[i];
                dx_ref[i] = dx[i] * g;
                dx_base[i] = bfr(dx_base[i] * g);  // a plain implementation rounds dout @ W first
            }
        }
        VF dw0 = rand_f32(OCC, rng, -1, 1), db0 = rand_f32(OC, rng, -1, 1);
        VF db_gpu[2];
        for (int run = 0; run < 2; run++) {
            up(d_dw, dw0), up(d_db, db0);
            d_dinp.poison();
            g_matmul_fuse_gelu = mc.fused;
            matmul_backward_cuda(d_dinp.p, d_dw.p, mc.bias ? d_db.p : nullptr, d_dout.p, d_x.p, d_w.p, N, C, OC, g_stream,
                                 mc.gelu ? d_pre.p : nullptr);
            g_matmul_fuse_gelu = true;
            db_gpu[run] = down(d_db);
            if (run == 1) break;
            check_vs_base("bwd", op + ".dinp", shape, down(d_dinp), dx_ref, dx_base);
            // Tensor-core fp32 accumulation is not IEEE-exact: ~1e-6 of the tensor's scale per element.
            check_f32("bwd", op + ".dweight(+=)", shape, minus(down(d_dw), dw0), dw, 1e-5, 1e-3);
            if (mc.bias) check_f32("bwd", op + ".dbias(+=)", shape, minus(db_gpu[0], db0), db, 1e-5, 1e-4);
            else check_bits("bwd", op + ".dbias", shape, bit_mismatch(db_gpu[0], db0), "nullptr: untouched");
        }
        if (mc.bias) check_bits("det", op + ".dbias", shape, bit_mismatch(db_gpu[0], db_gpu[1]), "two runs");
    }
}

// ------------------------------------------------------------------------------------------------
// rope

static void test_rope() {
    if (!selected("rope")) return;
    struct RopeCase {
        int D, offset, T;  // T 0: the test's size; 1: one token per sequence (decoding: a thread per head)
        float theta;       // 0: a NoPE layer (nothing rotates)
    };
    const RopeCase cases[] = {{64, 0, 0, 1e4f},       {128, 0, 0, 1e4f}, {64, 1000000, 0, 1e4f}, {128, 1000000, 0, 1e4f},
                              {64, 1048575, 1, 1e4f}, {128, 7, 1, 1e4f}, {64, 1000, 0, 0.0f},    {128, 5, 1, 0.0f}};
    int variant = 0;
    for (const RopeCase& rc : cases) {
        gc::Rng rng = case_rng("rope", variant++);
        const int B = 2, T = rc.T ? rc.T : S(301, 11), H = 5, D = rc.D;
        const float theta = rc.theta;
        const std::string shape = strf("B=%d T=%d H=%d D=%d pos0=%d theta=%g", B, T, H, D, rc.offset, theta);
        const size_t n = (size_t)B * T * 3 * H * D;
        std::vector<int> pos(T);
        for (int t = 0; t < T; t++) pos[t] = rc.offset + t + (t > T / 2 ? 17 : 0);  // a gap: positions are given, not implied
        VF x = rand_bf16(n, rng, -1, 1), dout = rand_bf16(n, rng, -1, 1);
        DBuf<int> d_pos(T);
        DBuf<bf16> d_x(n), d_out(n), d_dout(n), d_dinp(n);
        up(d_pos, pos), up(d_x, x), up(d_dout, dout);
        VD xd = to_d(x), ref(n), doutd = to_d(dout), dref(n, 0.0);
        rope_forward(ref.data(), xd.data(), pos.data(), B, T, H, D, theta);
        rope_backward(dref.data(), doutd.data(), pos.data(), B, T, H, D, theta);
        const VD base = round_bf16(ref), dbase = round_bf16(dref);

        d_out.poison();
        rope_forward_cuda(d_out.p, d_x.p, d_pos.p, B, T, H, D, theta, g_stream);
        check_vs_base("fwd", "rope", shape, down(d_out), ref, base);
        up(d_out, x);  // in place
        rope_forward_cuda(d_out.p, d_out.p, d_pos.p, B, T, H, D, theta, g_stream);
        check_vs_base("fwd", "rope(in place)", shape, down(d_out), ref, base);
        d_dinp.poison();
        rope_backward_cuda(d_dinp.p, d_dout.p, d_pos.p, B, T, H, D, theta, g_stream);
        check_vs_base("bwd", "rope", shape, down(d_dinp), dref, dbase);
        rope_backward_cuda(d_dout.p, d_dout.p, d_pos.p, B, T, H, D, theta, g_stream);
        check_vs_base("bwd", "rope(in place)", shape, down(d_dout), dref, dbase);
    }
}

// Log-n attention's query scaling (in place on q; k and v must come back untouched), with the
// base inside the rows (some scaled, some not), below them all, and a decoded token far out; then
// with learned slopes (one per head, one near 0 and one steep): the forward, dq (the same scaling
// on dq'), and the slopes' gradient against the reference in double from the same bf16 inputs,
// added into what dslope held, its scratch poisoned, two runs bit-identical.
static void test_logn_scale() {
    if (!selected("rope")) return;
    struct LognCase {
        int D, offset, T, base;
    };
    // Head dims past the model's 64 and 128 too: 32 and 256 put several tokens in a warp, or one token across it.
    const LognCase cases[] = {{64, 0, 0, 100}, {128, 1000000, 0, 131072}, {64, 1048575, 1, 32768}, {64, 50, 1, 4096}, {128, 3, 517, 64},
                              {32, 7, 300, 50}, {256, 90, 0, 100}};
    int variant = 0;
    for (const LognCase& lc : cases) {
        gc::Rng rng = case_rng("logn", variant++);
        const int B = 2, T = lc.T ? lc.T : S(301, 11), H = 5, D = lc.D;
        const std::string shape = strf("B=%d T=%d H=%d D=%d pos0=%d base=%d", B, T, H, D, lc.offset, lc.base);
        const size_t n = (size_t)B * T * 3 * H * D;
        std::vector<int> pos(T);
        for (int t = 0; t < T; t++) pos[t] = lc.offset + t;
        const VF x = rand_bf16(n, rng, -1, 1), dx = rand_bf16(n, rng, -1, 1);
        DBuf<int> d_pos(T);
        DBuf<bf16> d_x(n), d_dx(n), d_slope(H);
        up(d_pos, pos), up(d_x, x);
        VD ref = to_d(x);
        logn_scale_queries(ref.data(), pos.data(), B, T, H, D, lc.base);
        logn_scale_queries_cuda(d_x.p, d_pos.p, B, T, H, D, lc.base, g_stream);
        check_vs_base("fwd", "logn_scale_queries", shape, down(d_x), ref, round_bf16(ref));

        VF slope = rand_bf16(H, rng, 0.05, 1.5);
        slope[0] = (float)round_bf16(VD{0.001})[0], slope[H - 1] = (float)round_bf16(VD{3.0})[0];
        up(d_x, x), up(d_slope, slope);
        const VD slope_d = to_d(slope);
        ref = to_d(x);
        logn_scale_queries(ref.data(), pos.data(), B, T, H, D, lc.base, slope_d.data());
        logn_scale_queries_cuda(d_x.p, d_pos.p, B, T, H, D, lc.base, g_stream, d_slope.p);
        const VF q_scaled = down(d_x);
        check_vs_base("fwd", "logn_scale_queries(slopes)", shape, q_scaled, ref, round_bf16(ref));
        // The backward reads the GPU forward's scaled queries, as the model's does.
        VD dslope(H, 0.0);
        logn_slope_backward(dslope.data(), to_d(dx).data(), to_d(q_scaled).data(), slope_d.data(), pos.data(), B, T, H, D, lc.base);
        VD dref = to_d(dx);
        logn_scale_queries(dref.data(), pos.data(), B, T, H, D, lc.base, slope_d.data());
        const VF dslope0 = rand_f32(H, rng, -1, 1);
        DBuf<float> d_dslope(H), d_scratch(logn_slope_scratch_floats((long long)B * T, H));
        VF got[2];
        for (int run = 0; run < 2; run++) {
            up(d_dslope, dslope0), up(d_dx, dx);
            d_scratch.poison();
            logn_slope_backward_cuda(d_dslope.p, d_dx.p, d_x.p, d_pos.p, d_slope.p, B, T, H, D, lc.base, d_scratch.p, g_stream);
            got[run] = down(d_dslope);
        }
        check_f32("bwd", "logn_slope.dslope(+=)", shape, minus(got[0], dslope0), dslope, 1e-4, 1e-4);
        check_bits("det", "logn_slope.bwd", shape, bit_mismatch(got[0], got[1]), "two runs");
        logn_scale_queries_cuda(d_dx.p, d_pos.p, B, T, H, D, lc.base, g_stream, d_slope.p);
        check_vs_base("bwd", "logn_scale_queries(slopes).dq", shape, down(d_dx), dref, round_bf16(dref));
    }
}

// ------------------------------------------------------------------------------------------------
// qk_conv (the causal convolution on q and k)

struct QkConvCase {
    int C, W, pos0;
    bool hist, doc;  // a history before the window; document starts
    int T;           // 0: the test's size
};

// Document starts of a (B, T) batch: each row's first document began up to W positions before the
// window (never before position 0), and a new one starts at about one token in five, so cuts fall
// inside most windows of W tokens.
static std::vector<int> qk_conv_doc_starts(gc::Rng& rng, const std::vector<int>& pos, int B, int W) {
    const int T = (int)pos.size();
    std::vector<int> ds((size_t)B * T);
    for (int b = 0; b < B; b++) {
        int start = std::max(0, pos[0] - rng.randint(0, W));
        for (int t = 0; t < T; t++) {
            if (t > 0 && rng.uniform() < 0.2) start = pos[t];
            ds[(size_t)b * T + t] = start;
        }
    }
    return ds;
}

// Rows [t0, t0 + n) of every sequence of a (B, T, width) array.
template <class V>
static V qk_conv_rows(const V& a, int B, int T, size_t width, int t0, int n) {
    V r;
    for (int b = 0; b < B; b++) {
        const auto at = a.begin() + ((size_t)b * T + t0) * width;
        r.insert(r.end(), at, at + (size_t)n * width);
    }
    return r;
}

// The window in chunks, as decoding runs it: chunks of 1, 2 and W + 1 tokens and the rest, each
// reading the history qk_conv_keep_tail_cuda left after the one before (zeros before the first
// without a history), must give the whole window's output bit for bit (the same sums in the same
// order, of the same bf16 values).
static void qk_conv_chunks(const QkConvCase& qc, int B, int T, const VF& x, const VF& hist, const VF& w, const std::vector<int>& pos,
                           const std::vector<int>& ds, const VF& whole, const std::string& shape) {
    const int C = qc.C, W = qc.W;
    DBuf<bf16> d_hist((size_t)B * (W - 1) * 2 * C), d_w((size_t)W * 2 * C);
    DBuf<int> d_pos(T);
    up(d_w, w), up(d_pos, pos);
    if (qc.hist) up(d_hist, hist);
    else CUDA_CHECK(cudaMemset(d_hist.p, 0, d_hist.n * sizeof(bf16)));
    size_t mismatches = 0;
    int t0 = 0;
    for (int len : {1, 2, W + 1, T}) {
        const int n = std::min(len, T - t0);
        if (n <= 0) break;
        DBuf<bf16> d_x((size_t)B * n * 3 * C), d_out((size_t)B * n * 3 * C);
        DBuf<int> d_ds((size_t)B * n);
        up(d_x, qk_conv_rows(x, B, T, 3 * C, t0, n));
        if (qc.doc) up(d_ds, qk_conv_rows(ds, B, T, 1, t0, n));
        d_out.poison();
        const bf16* h = t0 == 0 && !qc.hist ? nullptr : d_hist.p;
        qk_conv_forward_cuda(d_out.p, nullptr, d_x.p, h, d_w.p, d_pos.p + t0, qc.doc ? d_ds.p : nullptr, B, n, C, W, g_stream);
        mismatches += bit_mismatch(down(d_out), qk_conv_rows(whole, B, T, 3 * C, t0, n));
        qk_conv_keep_tail_cuda(d_hist.p, d_x.p, B, n, C, W, g_stream);
        t0 += n;
    }
    check_bits("bits", "qk_conv(chunks)", shape, mismatches, "chunks of 1, 2, W+1, rest through keep_tail vs whole");
}

// The checker rejects the output against a reference with the weight rows in reverse order (the
// order of rows is what a wrong index in the kernels would get wrong).
static void qk_conv_reversed_rows(const VF& out, const VD& x, const VD* hist, const VD& w, const std::vector<int>& pos,
                                  const int* ds, int B, int T, int C, int W, const std::string& shape) {
    VD wrev(w.size()), bad(out.size());
    for (int j = 0; j < W; j++)
        std::copy(w.begin() + (size_t)(W - 1 - j) * 2 * C, w.begin() + (size_t)(W - j) * 2 * C, wrev.begin() + (size_t)j * 2 * C);
    qk_conv_forward(bad.data(), (double*)nullptr, x.data(), hist ? hist->data() : nullptr, wrev.data(), pos.data(), ds, B, T, C, W);
    Metric g, b;
    const bool caught = !judge_vs_base(out.data(), bad, round_bf16(bad), 3.0, &g, &b);
    report(caught, "meta", "qk_conv(rows reversed)", shape,
           strf("out against a reference with weight rows reversed: %s (err norm %.3g)", caught ? "rejected" : "NOT rejected", g.norm));
}

static void test_qk_conv_case(const QkConvCase& qc, int variant) {
    gc::Rng rng = case_rng("qk_conv", variant);
    const int B = 3, T = qc.T ? qc.T : S(37, 13), C = qc.C, W = qc.W;
    const std::string shape = strf("B=%d T=%d C=%d W=%d pos0=%d%s%s", B, T, C, W, qc.pos0, qc.hist ? " hist" : "", qc.doc ? " docs" : "");
    const size_t NX = (size_t)B * T * 3 * C, NR = (size_t)B * T * 2 * C, NH = (size_t)B * (W - 1) * 2 * C, NW = (size_t)W * 2 * C;
    std::vector<int> pos(T);
    for (int t = 0; t < T; t++) pos[t] = qc.pos0 + t;
    const std::vector<int> ds = qk_conv_doc_starts(rng, pos, B, W);
    VF x = rand_bf16(NX, rng, -1, 1), hist = rand_bf16(NH, rng, -1, 1), w = rand_bf16(NW, rng, -1, 1), dout = rand_bf16(NX, rng, -1, 1);
    DBuf<bf16> d_x(NX), d_hist(NH), d_w(NW), d_out(NX), d_raw(NR), d_dout(NX), d_dinp(NX);
    DBuf<int> d_pos(T), d_ds((size_t)B * T);
    up(d_x, x), up(d_hist, hist), up(d_w, w), up(d_dout, dout), up(d_pos, pos), up(d_ds, ds);
    const int* dsp = qc.doc ? ds.data() : nullptr;
    const int* d_dsp = qc.doc ? d_ds.p : nullptr;
    const bf16* d_histp = qc.hist ? d_hist.p : nullptr;

    VD xd = to_d(x), hd = to_d(hist), wd = to_d(w), ref(NX), raw(NR);
    qk_conv_forward(ref.data(), raw.data(), xd.data(), qc.hist ? hd.data() : nullptr, wd.data(), pos.data(), dsp, B, T, C, W);
    d_out.poison(), d_raw.poison();
    qk_conv_forward_cuda(d_out.p, d_raw.p, d_x.p, d_histp, d_w.p, d_pos.p, d_dsp, B, T, C, W, g_stream);
    const VF out = down(d_out);
    check_vs_base("fwd", "qk_conv.out", shape, out, ref, round_bf16(ref));
    check_bits("fwd", "qk_conv.raw", shape, bit_mismatch(down(d_raw), VF(raw.begin(), raw.end())), "a copy of q and k");
    d_out.poison();
    qk_conv_forward_cuda(d_out.p, nullptr, d_x.p, d_histp, d_w.p, d_pos.p, d_dsp, B, T, C, W, g_stream);
    check_bits("fwd", "qk_conv(raw nullptr)", shape, bit_mismatch(down(d_out), out), "vs the run with raw");
    qk_conv_chunks(qc, B, T, x, hist, w, pos, ds, out, shape);
    if (variant == 0) qk_conv_reversed_rows(out, xd, qc.hist ? &hd : nullptr, wd, pos, dsp, B, T, C, W, shape);

    // Backward on the GPU forward's raw (checked equal to the reference's above).
    VD dx(NX, 0.0), dw(NW, 0.0);
    qk_conv_backward(dx.data(), dw.data(), to_d(dout).data(), raw.data(), wd.data(), pos.data(), dsp, B, T, C, W);
    const VF dw0 = rand_f32(NW, rng, -1, 1);
    DBuf<float> d_dw(NW), d_scratch(qk_conv_backward_scratch_bytes(B, T, C, W) / sizeof(float));
    VF dinp_gpu[2], dw_gpu[2];
    for (int run = 0; run < 2; run++) {
        up(d_dw, dw0);
        d_dinp.poison(), d_scratch.poison();
        qk_conv_backward_cuda(d_dinp.p, d_dw.p, d_dout.p, d_raw.p, d_w.p, d_pos.p, d_dsp, B, T, C, W, d_scratch.p, g_stream);
        dinp_gpu[run] = down(d_dinp), dw_gpu[run] = down(d_dw);
    }
    check_vs_base("bwd", "qk_conv.dinp", shape, dinp_gpu[0], dx, round_bf16(dx));
    check_f32("bwd", "qk_conv.dweight(+=)", shape, minus(dw_gpu[0], dw0), dw, 1e-5, 1e-4);
    check_bits("det", "qk_conv.bwd", shape, bit_mismatch(dinp_gpu[0], dinp_gpu[1]) + bit_mismatch(dw_gpu[0], dw_gpu[1]), "two runs");
}

// The history after keep_tail against the reference, bit for bit (a copy): fewer new rows than it
// holds (the old rows that stay shift to the front, in place, source and destination overlapping),
// as many, and more.
static void test_qk_conv_keep_tail() {
    struct KeepCase {
        int C, W, n;
    };
    const KeepCase cases[] = {{40, 7, 2}, {40, 7, 6}, {40, 7, 9}, {24, 4, 1}, {13, 4, 1}, {22, 2, 1}, {13, 2, 3}, {24, 17, 5}};
    int variant = 0;
    for (const KeepCase& kc : cases) {
        gc::Rng rng = case_rng("qk_conv_keep_tail", variant++);
        const int B = 3, C = kc.C, W = kc.W, n = kc.n;
        const size_t NH = (size_t)B * (W - 1) * 2 * C, NX = (size_t)B * n * 3 * C;
        const VF hist = rand_bf16(NH, rng, -1, 1), x = rand_bf16(NX, rng, -1, 1);
        VF ref = hist;
        qk_conv_keep_tail(ref.data(), x.data(), B, n, C, W);
        DBuf<bf16> d_hist(NH), d_x(NX);
        up(d_hist, hist), up(d_x, x);
        qk_conv_keep_tail_cuda(d_hist.p, d_x.p, B, n, C, W, g_stream);
        check_bits("fwd", "qk_conv_keep_tail", strf("B=%d n=%d C=%d W=%d", B, n, C, W), bit_mismatch(down(d_hist), ref),
                   "the last W-1 raw rows");
    }
}

// C = 24, 40: 16-byte accesses; 22: 4-byte; 13: 2-byte. W = 11 spans two chunks of the dW partials'
// weight rows, 16 two whole ones, 33 five with one row over, 64 (QK_CONV_MAX_W) eight; T = 1001
// many slabs of rows, their edges inside sequences.
static void test_qk_conv() {
    if (!selected("qk_conv")) return;
    const QkConvCase cases[] = {{24, 2, 0, false, false, 0},   {40, 3, 0, false, true, 0},    {24, 3, 1000, false, true, 0},
                                {24, 4, 1000, true, false, 0},  {40, 7, 1000, true, true, 0},  {24, 7, 0, true, true, 0},
                                {22, 3, 1000, true, true, 0},   {13, 4, 1000, true, true, 0},  {40, 11, 1000, true, true, 0},
                                {40, 4, 0, false, true, S(1001, 37)}, {40, 16, 1000, true, true, 0}, {22, 33, 0, true, true, 0},
                                {40, 64, 1000, true, true, S(1001, 37)}};
    int variant = 0;
    for (const QkConvCase& qc : cases) test_qk_conv_case(qc, variant++);
    test_qk_conv_keep_tail();
}

// ------------------------------------------------------------------------------------------------
// attn_sink (layers/attn_sink.h): O and L of an attention made those of the softmax with a sink;
// the sink's gradient. Rows of no key (L = -inf) among them; N = 1100 with B = 2: rows of a head
// past one backward slab (1024), the slab's edge inside a sequence.

static void test_attn_sink_case(int B, int N, int H, int D, int variant) {
    gc::Rng rng = case_rng("attn_sink", variant);
    const std::string shape = strf("B=%d N=%d H=%d D=%d", B, N, H, D);
    const size_t NO = (size_t)B * N * H * D, NL = (size_t)B * H * N;
    const VF out = rand_bf16(NO, rng, -1, 1), dout = rand_bf16(NO, rng, -1, 1), sink = rand_bf16(H, rng, -1, 4);
    VF lse = rand_f32(NL, rng, -2, 6);
    for (size_t i = 0; i < NL; i += 97) lse[i] = -INFINITY;  // rows whose pattern kept no key
    VD o_ref = to_d(out);
    for (size_t i = 0; i < NL; i += 97) {  // such a row's O is 0 (layers/attention.h)
        const size_t b = i / ((size_t)H * N), h = i / N % H, t = i % N;
        for (int d = 0; d < D; d++) o_ref[((b * N + t) * H + h) * D + d] = 0;
    }
    const VF out_in(o_ref.begin(), o_ref.end());
    VD l_ref = to_d(lse);
    const VD sink_d = to_d(sink);
    attn_sink_forward(o_ref.data(), l_ref.data(), sink_d.data(), B, N, H, D);
    DBuf<bf16> d_out(NO), d_dout(NO), d_sink(H);
    DBuf<float> d_lse(NL), d_dsink(H), d_scratch(attn_sink_scratch_floats((long long)B * N, H));
    up(d_out, out_in), up(d_lse, lse), up(d_sink, sink), up(d_dout, dout);
    attn_sink_forward_cuda(d_out.p, d_lse.p, d_sink.p, B, N, H, D, g_stream);
    const VF out_gpu = down(d_out), lse_gpu = down(d_lse);
    check_vs_base("fwd", "attn_sink.out", shape, out_gpu, o_ref, round_bf16(o_ref));
    check_f32("fwd", "attn_sink.lse", shape, lse_gpu, l_ref, 1e-6, 1e-5);

    // The gradient from the GPU forward's O and L (bf16 O: the reference reads the same values).
    VD dsink(H, 0.0);
    const VD o_used = to_d(out_gpu), l_used = to_d(lse_gpu);
    attn_sink_backward(dsink.data(), to_d(dout).data(), o_used.data(), l_used.data(), sink_d.data(), B, N, H, D);
    const VF dsink0 = rand_f32(H, rng, -1, 1);
    VF got[2];
    for (int run = 0; run < 2; run++) {
        up(d_dsink, dsink0);
        d_scratch.poison();
        attn_sink_backward_cuda(d_dsink.p, d_dout.p, d_out.p, d_lse.p, d_sink.p, B, N, H, D, d_scratch.p, g_stream);
        got[run] = down(d_dsink);
    }
    check_f32("bwd", "attn_sink.dsink(+=)", shape, minus(got[0], dsink0), dsink, 1e-5, 1e-4);
    check_bits("det", "attn_sink.bwd", shape, bit_mismatch(got[0], got[1]), "two runs");
}

// The pointer (layers/cuda/pointer.cuh) against layers/pointer.h in double: its head's L and
// p_copy, then d[q | kp] and the gate's gradient for given w (0 where nothing is copied, and on
// some rows: their coefficient 0) and dloss, each launcher run on its own. Few ids, so that a
// sequence's groups of one id span several tiles at V = 2; targets of -1; odd T. The backward's
// output poisoned first; run twice under --deterministic, bit-identical.
static void test_pointer_case(int B, int T, int D, int V, int variant) {
    gc::Rng rng = case_rng("pointer", variant);
    const std::string shape = strf("B=%d,T=%d,D=%d,V=%d", B, T, D, V);
    const size_t BT = (size_t)B * T;
    const VF qk = rand_bf16(BT * 2 * D, rng, -1, 1), gate = rand_f32(BT, rng, -2, 2);
    std::vector<int> tokens(BT), targets(BT), pos(T);
    for (size_t i = 0; i < BT; i++) tokens[i] = rng.randint(0, V - 1), targets[i] = i % 7 == 3 ? -1 : rng.randint(0, V - 1);
    for (int t = 0; t < T; t++) pos[t] = t;
    // The reference: q and the shifted keys in double, the chains, the forward.
    VD q(BT * D), kp(BT * D), ks(BT * D), lse_ref(BT), pcopy_ref(BT);
    for (size_t r = 0; r < BT; r++)
        for (int c = 0; c < D; c++) q[r * D + c] = qk[r * 2 * D + c], kp[r * D + c] = qk[r * 2 * D + D + c];
    pointer_shift_keys(ks.data(), kp.data(), B, T, D);
    std::vector<int> fk(BT), pk(BT), fq(BT), nq(BT);
    pointer_links(fk.data(), pk.data(), fq.data(), nq.data(), tokens.data(), targets.data(), B, T, V);
    const double scale = 1.0 / std::sqrt((double)D);
    pointer_forward(lse_ref.data(), pcopy_ref.data(), q.data(), ks.data(), fk.data(), pk.data(), B, T, D, scale);
    VF w = rand_f32(BT, rng, 0.05, 0.95);
    for (size_t r = 0; r < BT; r++)
        if (targets[r] < 0 || !(pcopy_ref[r] > 0) || r % 5 == 1) w[r] = 0;
    const float dloss = 0.37f;
    VD dq(BT * D, 0.0), dks(BT * D, 0.0), dkp(BT * D, 0.0), dgate(BT, 0.0), dl(BT, dloss);
    pointer_backward(dq.data(), dks.data(), dgate.data(), q.data(), ks.data(), to_d(gate).data(), to_d(w).data(), lse_ref.data(),
                     pcopy_ref.data(), targets.data(), fk.data(), pk.data(), fq.data(), nq.data(), B, T, D, scale, dl.data());
    pointer_unshift_grad(dkp.data(), dks.data(), B, T, D);
    // The baseline a bf16 implementation of this split reaches: the dense term (every key's, as
    // the flash backward writes it) and the target's keys' term each rounded to bf16, then their
    // sum; where the two nearly cancel (p_copy near 1) no bf16 sum does better.
    VD dq_dense(BT * D, 0.0), dks_dense(BT * D, 0.0), dkp_dense(BT * D, 0.0), unused(BT, 0.0);
    const std::vector<int> none(BT, -1);
    pointer_backward(dq_dense.data(), dks_dense.data(), unused.data(), q.data(), ks.data(), to_d(gate).data(), to_d(w).data(),
                     lse_ref.data(), pcopy_ref.data(), targets.data(), none.data(), pk.data(), none.data(), nq.data(), B, T, D, scale,
                     dl.data());
    pointer_unshift_grad(dkp_dense.data(), dks_dense.data(), B, T, D);
    auto split_base = [](const VD& total, const VD& dense) {
        VD b(total.size());
        for (size_t i = 0; i < b.size(); i++) b[i] = bfr(bfr(dense[i]) + (double)bfr(total[i] - dense[i]));
        return b;
    };
    // The GPU: the head's rows, the tiles, the two launchers.
    PointerTiles pt;
    pointer_tiles(pt, tokens.data(), targets.data(), B, T, V);
    DBuf<bf16> d_qk(BT * 2 * D), d_qkv(BT * 3 * D), d_o(BT * D), d_dout(BT * D), d_dqkv(BT * 3 * D), d_dqk(BT * 2 * D);
    DBuf<float> d_lse(BT), d_pcopy(BT), d_gate(BT), d_w(BT), d_dgate(BT);
    DBuf<int> d_pos(T), d_targets(BT), d_qord(std::max<size_t>(pt.query_order.size(), 1)), d_kord(std::max<size_t>(pt.key_order.size(), 1)),
        d_qt(std::max<size_t>(pt.query_tiles.size(), 1)), d_kt(std::max<size_t>(pt.key_tiles.size(), 1));
    const AttnPattern dense{};
    DBuf<float> d_ws(attention_backward_workspace_bytes(pointer_attn_shape(B, T, D), dense) / sizeof(float) + 1);
    up(d_qk, qk), up(d_gate, gate), up(d_w, w), up(d_pos, pos), up(d_targets, targets);
    up(d_qord, pt.query_order), up(d_kord, pt.key_order), up(d_qt, pt.query_tiles), up(d_kt, pt.key_tiles);
    PointerTilesDevice tiles{d_qord.p, d_kord.p, d_qt.p, d_kt.p, pt.n_query_tiles(), pt.n_key_tiles()};
    pointer_pack_cuda(d_qkv.p, d_qk.p, B, T, D, g_stream);
    d_pcopy.poison();
    pointer_forward_cuda(d_lse.p, d_pcopy.p, d_o.p, d_qkv.p, d_pos.p, tiles, B, T, D, g_stream);
    check_f32("fwd", "pointer.lse", shape, down(d_lse), lse_ref, 1e-3, 1e-2);
    check_f32("fwd", "pointer.pcopy", shape, down(d_pcopy), pcopy_ref, 2e-2, 5e-2);
    VF got[2];
    for (int run = 0; run < 2; run++) {
        d_dqk.poison(), d_dgate.poison();
        pointer_backward_cuda(d_dqk.p, d_dgate.p, d_o.p, d_dout.p, d_dqkv.p, d_qkv.p, d_gate.p, d_w.p, d_lse.p, d_pcopy.p, d_targets.p,
                              d_pos.p, tiles, B, T, D, dloss, /*deterministic=*/true, d_ws.p, g_stream);
        got[run] = down(d_dqk);
    }
    VF gq(BT * D), gk(BT * D);
    for (size_t r = 0; r < BT; r++)
        for (int c = 0; c < D; c++) gq[r * D + c] = got[0][r * 2 * D + c], gk[r * D + c] = got[0][r * 2 * D + D + c];
    check_vs_base("bwd", "pointer.dq", shape, gq, dq, split_base(dq, dq_dense));
    check_vs_base("bwd", "pointer.dkp", shape, gk, dkp, split_base(dkp, dkp_dense));
    check_f32("bwd", "pointer.dgate", shape, down(d_dgate), dgate, 1e-5, 1e-4);
    check_bits("det", "pointer.bwd", shape, bit_mismatch(got[0], got[1]), "two deterministic runs");
}

static void test_pointer() {
    if (!selected("pointer")) return;
    test_pointer_case(2, S(37, 21), 64, 5, 0);
    test_pointer_case(3, S(201, 70), 128, 2, 1);  // a group of one id holds ~100 keys: two chunks, two query tiles
    test_pointer_case(1, S(130, 67), 64, 2, 2);
}

static void test_attn_sink() {
    if (!selected("attn_sink")) return;
    test_attn_sink_case(3, S(37, 13), 5, 64, 0);
    test_attn_sink_case(2, S(1100, 29), 3, 128, 1);
    test_attn_sink_case(1, 1, 12, 64, 2);
}

// ------------------------------------------------------------------------------------------------
// gelu, residual (elementwise); also the checker's own sanity

static void test_gelu() {
    if (!selected("gelu")) return;
    gc::Rng rng = case_rng("gelu", 0);
    const size_t n = (size_t)S(1007, 37) * 3072 + 5;  // ragged tail
    const std::string shape = strf("n=%zu", n);
    VF x = rand_bf16(n, rng, -6, 6), dout = rand_bf16(n, rng, -1, 1);
    DBuf<bf16> d_x(n), d_out(n), d_dout(n), d_dinp(n);
    up(d_x, x), up(d_dout, dout);
    VD ref(n), dref(n);
    const VD grad = gelu_grad_all(x);
    ref = gelu_all(x);
    for (size_t i = 0; i < n; i++) dref[i] = grad[i] * dout[i];
    const VD base = round_bf16(ref), dbase = round_bf16(dref);
    d_out.poison();
    gelu_forward_cuda(d_out.p, d_x.p, n, g_stream);
    const VF out = down(d_out);
    check_vs_base("fwd", "gelu", shape, out, ref, base);
    d_dinp.poison();
    gelu_backward_cuda(d_dinp.p, d_x.p, d_dout.p, n, g_stream);
    check_vs_base("bwd", "gelu", shape, down(d_dinp), dref, dbase);

    // Misaligned by one element: the scalar path.
    const size_t m = n - 1;
    const VD ref1(ref.begin() + 1, ref.end()), base1(base.begin() + 1, base.end());
    const VD dref1(dref.begin() + 1, dref.end()), dbase1(dbase.begin() + 1, dbase.end());
    d_out.poison();
    gelu_forward_cuda(d_out.p + 1, d_x.p + 1, m, g_stream);
    check_vs_base("fwd", "gelu(misaligned)", strf("n=%zu", m), down(d_out.p + 1, m), ref1, base1);
    d_dinp.poison();
    gelu_backward_cuda(d_dinp.p + 1, d_x.p + 1, d_dout.p + 1, m, g_stream);
    check_vs_base("bwd", "gelu(misaligned)", strf("n=%zu", m), down(d_dinp.p + 1, m), dref1, dbase1);
    gelu_backward_cuda(d_dout.p, d_x.p, d_dout.p, n, g_stream);  // in place
    check_vs_base("bwd", "gelu(in place)", shape, down(d_dout), dref, dbase);

    // The checker must reject a wrong answer: one element 2% off, and one NaN.
    Metric g, b;
    VF bad = out;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++)
        if (std::fabs(ref[i]) > std::fabs(ref[worst])) worst = i;
    bad[worst] *= 1.02f;
    const bool caught1 = !judge_vs_base(bad.data(), ref, base, 3.0, &g, &b);
    bad = out;
    bad[n / 2] = NAN;
    const bool caught2 = !judge_vs_base(bad.data(), ref, base, 3.0, &g, &b);
    report(caught1 && caught2, "meta", "checker", shape,
           strf("rejects one element 2%% off: %s; one NaN: %s", caught1 ? "yes" : "NO", caught2 ? "yes" : "NO"));
}

static void test_residual() {
    if (!selected("residual")) return;
    gc::Rng rng = case_rng("residual", 0);
    const size_t n = (size_t)S(1007, 37) * 768 + 3;
    VF a = rand_bf16(n, rng, -1, 1), b = rand_bf16(n, rng, -1, 1);
    DBuf<bf16> d_a(n), d_b(n), d_out(n);
    up(d_a, a), up(d_b, b);
    VD ref(n);
    residual_forward(ref.data(), to_d(a).data(), to_d(b).data(), n);
    d_out.poison();
    residual_forward_cuda(d_out.p, d_a.p, d_b.p, n, g_stream);
    check_vs_base("fwd", "residual", strf("n=%zu", n), down(d_out), ref, round_bf16(ref));
    d_out.poison();
    residual_forward_cuda(d_out.p + 1, d_a.p + 1, d_b.p + 1, n - 1, g_stream);
    check_vs_base("fwd", "residual(misaligned)", strf("n=%zu", n - 1), down(d_out.p + 1, n - 1), VD(ref.begin() + 1, ref.end()),
                  round_bf16(VD(ref.begin() + 1, ref.end())));
}

// ------------------------------------------------------------------------------------------------
// classifier

static void test_classifier() {
    if (!selected("classifier")) return;
    struct ClsCase {
        int N, C, V, chunk;
    };
    const ClsCase cases[] = {{S(1007, 37), 96, S(1003, 203), S(300, 16)}, {S(263, 19), 768, 50257, 4096}};
    int variant = 0;
    for (const ClsCase& cc : cases) {
        gc::Rng rng = case_rng("classifier", variant++);
        const int N = cc.N, C = cc.C, V = cc.V;
        const std::string shape = strf("N=%d C=%d V=%d chunk=%d", N, C, V, cc.chunk);
        const double a = 9.0 / std::sqrt((double)C);  // logits with std ~3
        VF x = rand_bf16((size_t)N * C, rng, -1, 1), wte = rand_bf16((size_t)V * C, rng, -a, a);
        std::vector<int> tgt(N);
        int counted = 0;
        for (int i = 0; i < N; i++) tgt[i] = rng.uniform() < 0.1 ? -1 : rng.randint(0, V - 1);
        tgt[0] = V - 1;  // the last vocabulary row (the ragged tail of the logits)
        for (int i = 0; i < N; i++) counted += tgt[i] >= 0;
        const double dloss = 1.0 / std::max(counted, 1);
        DBuf<bf16> d_x((size_t)N * C), d_wte((size_t)V * C), d_dx((size_t)N * C);
        DBuf<float> d_losses(N), d_dwte((size_t)V * C), d_logits(V);
        DBuf<int> d_tgt(N);
        up(d_x, x), up(d_wte, wte), up(d_tgt, tgt);

        // Exact reference, and the plain-bf16 baseline: dlogits rounded to bf16 before the products.
        VD xd = to_d(x), wd = to_d(wte), losses(N), dx((size_t)N * C, 0.0), dwte((size_t)V * C, 0.0);
        classifier_forward_backward(losses.data(), dx.data(), dwte.data(), xd.data(), wd.data(), tgt.data(), N, C, V, dloss);
        VD logits((size_t)N * V), dl_b((size_t)N * V, 0.0);
        matmul_forward(logits.data(), xd.data(), wd.data(), (const double*)nullptr, N, C, V);
        for (int r = 0; r < N; r++) {
            if (tgt[r] < 0) continue;
            const double* l = &logits[(size_t)r * V];
            double mx = -INFINITY, s = 0;
            for (int i = 0; i < V; i++) mx = std::max(mx, l[i]);
            for (int i = 0; i < V; i++) s += std::exp(l[i] - mx);
            for (int i = 0; i < V; i++) dl_b[(size_t)r * V + i] = bfr(dloss * (std::exp(l[i] - mx) / s - (i == tgt[r])));
        }
        VD dx_b((size_t)N * C, 0.0), dwte_b((size_t)V * C, 0.0);
        matmul_backward(dx_b.data(), dwte_b.data(), (double*)nullptr, dl_b.data(), xd.data(), wd.data(), N, C, V);
        dx_b = round_bf16(dx_b);

        g_classifier_chunk = cc.chunk;
        const size_t scratch_bytes = classifier_scratch_bytes(N, V);
        DBuf<char> d_scratch(scratch_bytes);
        const double sw = gc::max_abs(dwte.data(), dwte.size());
        VF dwte0 = rand_f32((size_t)V * C, rng, -sw, sw);
        const int default_split = g_classifier_split;
        for (int split : {0, 64, 128}) {  // vocabulary split of the products (classifier.cuh)
            g_classifier_split = split;
            const std::string sh = shape + strf(" split=%d", split);
            up(d_dwte, dwte0);
            d_losses.poison(), d_dx.poison(), d_scratch.poison();
            classifier_forward_backward_cuda(d_losses.p, d_dx.p, d_dwte.p, d_x.p, d_wte.p, d_tgt.p, N, C, V, (float)dloss,
                                             d_scratch.p, g_stream);
            const VF losses_gpu = down(d_losses);
            check_f32("fwd", "classifier.losses", sh, losses_gpu, losses, 2e-6, 2e-5);
            check_vs_base("bwd", "classifier.dx", sh, down(d_dx), dx, dx_b);
            check_vs_base("bwd", "classifier.dwte(+=)", sh, minus(down(d_dwte), dwte0), dwte, dwte_b);
            // Forward only: same losses, bit for bit (same logits, same reduction).
            d_losses.poison(), d_scratch.poison();
            classifier_forward_backward_cuda(d_losses.p, nullptr, nullptr, d_x.p, d_wte.p, d_tgt.p, N, C, V, 0.0f, d_scratch.p,
                                             g_stream);
            check_bits("fwd", "classifier(fwd only)", sh, bit_mismatch(down(d_losses), losses_gpu), "vs fwd+bwd losses");

            // logits_cuda on one row.
            const int r = N / 2;
            d_logits.poison();
            logits_cuda(d_logits.p, d_x.p + (size_t)r * C, d_wte.p, C, V, g_stream);
            check_f32("fwd", "logits", strf("C=%d V=%d split=%d", C, V, split), down(d_logits),
                      VD(logits.begin() + (size_t)r * V, logits.begin() + (size_t)(r + 1) * V), 1e-6, 1e-4);
        }
        g_classifier_split = default_split;
        g_classifier_chunk = 4096;
    }
}

// ------------------------------------------------------------------------------------------------
// adamw

static void test_adamw() {
    if (!selected("adamw")) return;
    gc::Rng rng = case_rng("adamw", 0);
    {  // grad norm, aligned (vector path) and misaligned (scalar path)
        const size_t n = (size_t)S(1000003, 1003);
        VF g = rand_f32(n, rng, -1, 1);
        DBuf<float> d_g(n), d_out(1), d_scratch(grad_norm_squared_scratch_bytes() / 4);
        up(d_g, g);
        for (int mis = 0; mis < 2; mis++) {
            const double ref = grad_norm_squared(g.data() + mis, n - mis);
            d_out.poison(), d_scratch.poison();
            grad_norm_squared_cuda(d_out.p, d_g.p + mis, n - mis, d_scratch.p, g_stream);
            check_f32("fwd", mis ? "grad_norm_squared(misal.)" : "grad_norm_squared", strf("n=%zu", n - mis), down(d_out), VD{ref},
                      1e-6, 1e-6);
        }
    }
    {  // clip factor: over the limit, under it, disabled
        DBuf<float> d_nsq(1), d_scale(1);
        up(d_nsq, VF{25.0f});
        const float maxes[3] = {1.0f, 10.0f, 0.0f};
        VF got, want;
        for (float mx : maxes) {
            d_scale.poison();
            clip_scale_cuda(d_scale.p, d_nsq.p, mx, g_stream);
            got.push_back(down(d_scale)[0]), want.push_back(clip_scale(5.0, mx));
        }
        check_bits("fwd", "clip_scale", "norm=5 max=1,10,0", bit_mismatch(got, want), "vs optim/clip.h clip_scale");
    }
    {  // two AdamW steps (step 1 and 7), grad_scale on the device
        const size_t n = (size_t)S(100003, 1003);
        VF master = rand_f32(n, rng, -1, 1), m = rand_f32(n, rng, -1e-2, 1e-2), v = rand_f32(n, rng, 0, 1e-4);
        VF grad = rand_f32(n, rng, -2e-2, 2e-2);
        const float lr = 3e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, scale = 0.5f;
        DBuf<float> d_master(n), d_m(n), d_v(n), d_g(n), d_scale(1);
        DBuf<bf16> d_param(n);
        up(d_master, master), up(d_m, m), up(d_v, v), up(d_g, grad), up(d_scale, VF{scale});
        VD pr = to_d(master), mr = to_d(m), vr = to_d(v), gr = to_d(grad);
        for (int step : {1, 7}) {
            d_param.poison();
            const VD pr_before = pr;
            adamw_update_cuda(d_master.p, d_param.p, d_m.p, d_v.p, d_g.p, n, lr, b1, b2, eps, wd, step, d_scale.p, g_stream);
            adamw_update(pr.data(), mr.data(), vr.data(), gr.data(), n, lr, b1, b2, eps, wd, step, scale);
            const VF after = down(d_master), param = down(d_param);
            const std::string shape = strf("n=%zu step=%d", n, step);
            check_adam("upd", "adamw.master", shape, after, pr, pr_before);
            check_f32("upd", "adamw.m", shape, down(d_m), mr, 1e-6, 1e-5);
            check_f32("upd", "adamw.v", shape, down(d_v), vr, 1e-6, 1e-5);
            VF rounded(n);
            for (size_t i = 0; i < n; i++) rounded[i] = bfr(after[i]);
            check_bits("upd", "adamw.param", shape, bit_mismatch(param, rounded), "bf16 copy == rn(master)");
            pr = to_d(after);  // continue both from the GPU's state, so errors do not compound
            mr = to_d(down(d_m)), vr = to_d(down(d_v));
        }
    }
    {  // one launch over a chunk table: pieces of odd sizes and offsets, decay on some, one longer than
       // a chunk, gaps that must stay untouched; against the CPU update piece by piece
        const size_t n = (size_t)S(200003, 20011);
        const std::vector<AdamWPiece> pieces = {{0, 767, false}, {767, 5, true}, {781, (size_t)S(9001, 4099) * 2 + 3, true},
                                                {n / 2 + 1, 1, false}, {n / 2 + 9, n / 2 - 9, true}};
        const std::vector<AdamWChunk> table = adamw_chunks(pieces);
        VF master = rand_f32(n, rng, -1, 1), m = rand_f32(n, rng, -1e-2, 1e-2), v = rand_f32(n, rng, 0, 1e-4);
        VF grad = rand_f32(n, rng, -2e-2, 2e-2);
        const float lr = 3e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, scale = 0.7f;
        DBuf<float> d_master(n), d_m(n), d_v(n), d_g(n), d_scale(1);
        DBuf<bf16> d_param(n);
        DBuf<AdamWChunk> d_table(table.size());
        CUDA_CHECK(cudaMemcpy(d_table.p, table.data(), table.size() * sizeof(AdamWChunk), cudaMemcpyHostToDevice));
        up(d_master, master), up(d_m, m), up(d_v, v), up(d_g, grad), up(d_scale, VF{scale});
        d_param.poison();
        adamw_update_chunks_cuda(d_master.p, d_param.p, d_m.p, d_v.p, d_g.p, d_table.p, (int)table.size(), lr, b1, b2, eps, wd, 3,
                                 d_scale.p, g_stream);
        VD pr = to_d(master), mr = to_d(m), vr = to_d(v), gr = to_d(grad);
        const VD pr_before = pr;
        std::vector<char> inside(n, 0);
        for (const AdamWPiece& pc : pieces) {
            adamw_update(pr.data() + pc.offset, mr.data() + pc.offset, vr.data() + pc.offset, gr.data() + pc.offset, pc.count, lr,
                         b1, b2, eps, pc.decay ? wd : 0.0f, 3, scale);
            std::fill(inside.begin() + pc.offset, inside.begin() + pc.offset + pc.count, 1);
        }
        const VF after = down(d_master), param = down(d_param), m_after = down(d_m);
        const std::string shape = strf("n=%zu pieces=%zu chunks=%zu", n, pieces.size(), table.size());
        check_adam("upd", "adamw_chunks.master", shape, after, pr, pr_before);
        check_f32("upd", "adamw_chunks.m", shape, m_after, mr, 1e-6, 1e-5);
        check_f32("upd", "adamw_chunks.v", shape, down(d_v), vr, 1e-6, 1e-5);
        size_t bad_param = 0, touched_gap = 0;
        for (size_t i = 0; i < n; i++) {
            if (inside[i]) bad_param += !(param[i] == bfr(after[i]));  // a poisoned (NaN) element counts
            else touched_gap += after[i] != master[i] || m_after[i] != m[i];
        }
        check_bits("upd", "adamw_chunks.param", shape, bad_param, "bf16 copy == rn(master) inside the pieces");
        check_bits("upd", "adamw_chunks.gaps", shape, touched_gap, "weights and moments outside every piece unchanged");
    }
}

// ------------------------------------------------------------------------------------------------
// --perf: GPT-2 124M shapes. Times are medians of 20 runs (CUDA events) after 3 warm-ups.

__global__ void perf_fill_kernel(bf16* bp, float* fp, size_t n, uint64_t seed, float lo, float hi) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const float u = lo + (hi - lo) * (float)((z >> 40) * (1.0 / 16777216.0));
        if (bp) bp[i] = __float2bfloat16(u);
        if (fp) fp[i] = u;
    }
}
static void fill(bf16* p, size_t n, float lo = -1, float hi = 1) {
    static uint64_t s = 1;
    perf_fill_kernel<<<1024, 256>>>(p, nullptr, n, g_seed + 7919 * s++, lo, hi);
    CUDA_CHECK_LAST();
}
static void fill(float* p, size_t n, float lo = -1, float hi = 1) {
    static uint64_t s = 1;
    perf_fill_kernel<<<1024, 256>>>(nullptr, p, n, g_seed + 104729 * s++, lo, hi);
    CUDA_CHECK_LAST();
}

template <class F>
static double time_us(F f) {
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) f();
    std::vector<float> t;
    for (int i = 0; i < 20; i++) {
        CUDA_CHECK(cudaEventRecord(e0, g_stream));
        f();
        CUDA_CHECK(cudaEventRecord(e1, g_stream));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms);
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    std::sort(t.begin(), t.end());
    return 1000.0 * t[t.size() / 2];
}

struct PerfRow {
    std::string op, shape;
    double us, bytes, flops;
};

static void run_perf(const char* out_path) {
    const int B = 8, T = 4096, N = B * T, C = 768, V = 50257, H = 12, D = 64;
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::vector<PerfRow> rows;
    auto add = [&](const std::string& op, const std::string& shape, double us, double bytes, double flops) {
        rows.push_back({op, shape, us, bytes, flops});
        std::printf("  measured %-28s %10.1f us\n", op.c_str(), us);
        std::fflush(stdout);
    };
    // Ceilings measured here: a device-to-device copy and a large bf16 product (bench/ceilings.cuh).
    const Ceilings ce = measure_ceilings();
    const double bw = ce.bytes_per_s(), peak = ce.flops_per_s();
    add("ceiling: copy d2d", "1 GiB", 1e3 * ce.copy_ms, ce.copy_bytes, 0);
    add("ceiling: bf16 gemm", "8192^3", 1e3 * ce.gemm_ms, 0, ce.gemm_flops);
    const size_t NC = (size_t)N * C;
    const std::string sh = strf("N=%d C=%d", N, C);
    {  // encoder
        DBuf<bf16> wte((size_t)V * C), out(NC);
        DBuf<float> dwte((size_t)V * C);
        DBuf<int> tok(N);
        gc::Rng rng(g_seed);
        std::vector<int> t(N);
        std::vector<char> seen(V, 0);
        int uniq = 0;
        for (int i = 0; i < N; i++) {  // 5% one frequent token, the rest uniform
            t[i] = rng.uniform() < 0.05 ? 13 : rng.randint(0, V - 1);
            uniq += !seen[t[i]], seen[t[i]] = 1;
        }
        up(tok, t);
        fill(wte.p, wte.n), fill(out.p, out.n), fill(dwte.p, dwte.n);
        add("encoder_forward", sh, time_us([&] { encoder_forward_cuda(out.p, tok.p, wte.p, B, T, C, g_stream); }), 4.0 * NC + 4.0 * N, 0);
        add("encoder_backward", sh + strf(" uniq=%d", uniq),
            time_us([&] { encoder_backward_cuda(dwte.p, out.p, tok.p, B, T, C, g_stream); }), 2.0 * NC + 8.0 * uniq * C + 16.0 * N, 0);
    }
    {  // layernorm, residual
        DBuf<bf16> x(NC), o(NC), d(NC), dx(NC), w(C), b(C);
        DBuf<float> mean(N), rstd(N), dw(C), db(C), scratch(layernorm_backward_scratch_bytes(N, C) / 4);
        fill(x.p, NC), fill(d.p, NC), fill(dx.p, NC), fill(w.p, C), fill(b.p, C), fill(dw.p, C), fill(db.p, C);
        add("layernorm_forward", sh, time_us([&] { layernorm_forward_cuda(o.p, mean.p, rstd.p, x.p, w.p, b.p, N, C, g_stream); }),
            4.0 * NC + 8.0 * N, 0);
        add("layernorm_backward", sh, time_us([&] {
                layernorm_backward_cuda(dx.p, dw.p, db.p, d.p, x.p, w.p, mean.p, rstd.p, N, C, scratch.p, g_stream);
            }),
            8.0 * NC + 8.0 * N, 0);
        add("residual_forward", sh, time_us([&] { residual_forward_cuda(o.p, x.p, d.p, NC, g_stream); }), 6.0 * NC, 0);
    }
    {  // matmuls of a block, rope, gelu
        const size_t N3 = NC * 3, N4 = NC * 4;
        DBuf<bf16> x(NC), wqkv((size_t)3 * C * C), bqkv(3 * C), qkv(N3), qkv2(N3), wfc((size_t)4 * C * C), bfc(4 * C), h(N4),
            hg(N4), dh(N4), wp((size_t)4 * C * C), bp(C), y(NC), dy(NC), dx(NC);
        DBuf<float> dwqkv((size_t)3 * C * C), dbqkv(3 * C), dwp((size_t)4 * C * C), dbp(C);
        DBuf<int> pos(T);
        std::vector<int> p(T);
        for (int t = 0; t < T; t++) p[t] = t;
        up(pos, p);
        fill(x.p, NC), fill(wqkv.p, wqkv.n, -0.03f, 0.03f), fill(bqkv.p, bqkv.n), fill(wfc.p, wfc.n, -0.03f, 0.03f);
        fill(bfc.p, bfc.n), fill(wp.p, wp.n, -0.03f, 0.03f), fill(bp.p, C), fill(dy.p, NC), fill(dh.p, N4), fill(qkv.p, N3);
        fill(dwqkv.p, dwqkv.n), fill(dbqkv.p, dbqkv.n), fill(dwp.p, dwp.n), fill(dbp.p, C);
        add("matmul_forward qkv", sh + " OC=2304", time_us([&] {
                matmul_forward_cuda(qkv2.p, x.p, wqkv.p, bqkv.p, N, C, 3 * C, g_stream);
            }),
            0, 2.0 * N * C * 3.0 * C);
        add("matmul_forward fc+gelu", sh + " OC=3072", time_us([&] {
                matmul_forward_cuda(hg.p, x.p, wfc.p, bfc.p, N, C, 4 * C, g_stream, h.p);
            }),
            0, 2.0 * N * C * 4.0 * C);
        g_matmul_fuse_gelu = false;
        add("matmul_forward fc, gelu kernel", sh + " OC=3072", time_us([&] {
                matmul_forward_cuda(hg.p, x.p, wfc.p, bfc.p, N, C, 4 * C, g_stream, h.p);
            }),
            0, 2.0 * N * C * 4.0 * C);
        g_matmul_fuse_gelu = true;
        add("matmul_forward fcproj", strf("N=%d C=3072 OC=768", N), time_us([&] {
                matmul_forward_cuda(y.p, hg.p, wp.p, bp.p, N, 4 * C, C, g_stream);
            }),
            0, 2.0 * N * 4.0 * C * C);
        add("matmul_backward qkv", sh + " OC=2304", time_us([&] {
                matmul_backward_cuda(dx.p, dwqkv.p, dbqkv.p, qkv.p, x.p, wqkv.p, N, C, 3 * C, g_stream);
            }),
            0, 4.0 * N * C * 3.0 * C);
        add("matmul_backward fcproj+dgelu", strf("N=%d C=3072 OC=768", N), time_us([&] {
                matmul_backward_cuda(dh.p, dwp.p, dbp.p, dy.p, hg.p, wp.p, N, 4 * C, C, g_stream, h.p);
            }),
            0, 4.0 * N * 4.0 * C * C);
        g_matmul_fuse_gelu = false;
        add("matmul_backward fcproj, dgelu kern", strf("N=%d C=3072 OC=768", N), time_us([&] {
                matmul_backward_cuda(dh.p, dwp.p, dbp.p, dy.p, hg.p, wp.p, N, 4 * C, C, g_stream, h.p);
            }),
            0, 4.0 * N * 4.0 * C * C);
        g_matmul_fuse_gelu = true;
        add("rope_forward", strf("N=%d H=%d D=%d", N, H, D), time_us([&] {
                rope_forward_cuda(qkv2.p, qkv.p, pos.p, B, T, H, D, 10000.0f, g_stream);
            }),
            4.0 * N3, 0);
        add("rope_backward (in place)", strf("N=%d H=%d D=%d", N, H, D), time_us([&] {
                rope_backward_cuda(qkv2.p, qkv2.p, pos.p, B, T, H, D, 10000.0f, g_stream);
            }),
            4.0 * N3, 0);
        {  // the q/k convolution (a NoPE layer's, in the rotary's place): W = 4
            const int W = 4;
            DBuf<bf16> raw(NC * 2), dinp(N3), cw((size_t)W * 2 * C);
            DBuf<float> dcw((size_t)W * 2 * C);
            DBuf<char> scratch(qk_conv_backward_scratch_bytes(B, T, C, W));
            fill(cw.p, cw.n), fill(dcw.p, dcw.n);
            add("qk_conv_forward", strf("N=%d C=%d W=%d", N, C, W), time_us([&] {
                    qk_conv_forward_cuda(qkv2.p, raw.p, qkv.p, nullptr, cw.p, pos.p, nullptr, B, T, C, W, g_stream);
                }),
                2.0 * (3 + 3 + 2) * NC, 0);  // qkv in, qkv and raw q, k out
            add("qk_conv_backward", strf("N=%d C=%d W=%d", N, C, W), time_us([&] {
                    qk_conv_backward_cuda(dinp.p, dcw.p, qkv.p, raw.p, cw.p, pos.p, nullptr, B, T, C, W, (float*)scratch.p, g_stream);
                }),
                2.0 * (3 + 3 + 2 + 2) * NC, 0);  // dout in, dinp out; dout's and raw's q, k again for the weights
        }
        {  // attention sinks on a layer's O and L at this shape: one pass over O each way
            DBuf<bf16> o(NC), dout(NC), sink(H);
            DBuf<float> lse((size_t)N * H), dsink(H), scratch(attn_sink_scratch_floats(N, H));
            fill(o.p, NC), fill(dout.p, NC), fill(sink.p, H), fill(lse.p, lse.n, 0.0f, 2.0f), fill(dsink.p, H);
            add("attn_sink_forward", strf("N=%d H=%d D=%d", N, H, D), time_us([&] {
                    attn_sink_forward_cuda(o.p, lse.p, sink.p, B, T, H, D, g_stream);
                }),
                4.0 * NC + 8.0 * N * H, 0);  // O read and written, L read and written
            add("attn_sink_backward", strf("N=%d H=%d D=%d", N, H, D), time_us([&] {
                    attn_sink_backward_cuda(dsink.p, dout.p, o.p, lse.p, sink.p, B, T, H, D, scratch.p, g_stream);
                }),
                4.0 * NC + 4.0 * N * H, 0);  // dO and O read, L read
        }
        add("gelu_forward", strf("n=%zu", N4), time_us([&] { gelu_forward_cuda(hg.p, h.p, N4, g_stream); }), 4.0 * N4, 0);
        add("gelu_backward", strf("n=%zu", N4), time_us([&] { gelu_backward_cuda(dh.p, h.p, hg.p, N4, g_stream); }), 6.0 * N4, 0);
    }
    {  // classifier
        DBuf<bf16> x(NC), wte((size_t)V * C), dx(NC);
        DBuf<float> losses(N), dwte((size_t)V * C);
        DBuf<int> tgt(N);
        DBuf<char> scratch(classifier_scratch_bytes(N, V));
        gc::Rng rng(g_seed + 1);
        std::vector<int> t(N);
        for (int i = 0; i < N; i++) t[i] = rng.randint(0, V - 1);
        up(tgt, t);
        fill(x.p, NC), fill(wte.p, wte.n, -0.1f, 0.1f), fill(dwte.p, dwte.n);
        const double f1 = 2.0 * N * (double)C * V, lbytes = (double)N * classifier_ldl(V);
        const int default_split = g_classifier_split;
        for (int split : {0, 64, 128}) {
            g_classifier_split = split;
            add(strf("classifier fwd+bwd split=%d", split), sh + strf(" V=%d", V), time_us([&] {
                    classifier_forward_backward_cuda(losses.p, dx.p, dwte.p, x.p, wte.p, tgt.p, N, C, V, 1.0f / N, scratch.p, g_stream);
                }),
                lbytes * (4 + 4 + 2 + 2 + 2), 3 * f1);
            add(strf("classifier fwd only split=%d", split), sh + strf(" V=%d", V), time_us([&] {
                    classifier_forward_backward_cuda(losses.p, nullptr, nullptr, x.p, wte.p, tgt.p, N, C, V, 0.0f, scratch.p, g_stream);
                }),
                lbytes * (4 + 4), f1);
        }
        g_classifier_split = default_split;
    }
    {  // rows per chunk at the 91M model's vocabulary (8192): the chunk's products against its size
        const int Vs = 8192, Ns = 65536;
        DBuf<bf16> x((size_t)Ns * C), wte((size_t)Vs * C), dx((size_t)Ns * C);
        DBuf<float> losses(Ns), dwte((size_t)Vs * C);
        DBuf<int> tgt(Ns);
        std::vector<int> t(Ns);
        for (int i = 0; i < Ns; i++) t[i] = (i * 7919) % Vs;
        up(tgt, t);
        fill(x.p, x.n), fill(wte.p, wte.n, -0.1f, 0.1f), fill(dwte.p, dwte.n);
        const int default_chunk = g_classifier_chunk;
        for (int chunk : {4096, 8192, 16384, 32768}) {
            g_classifier_chunk = chunk;
            DBuf<char> scratch(classifier_scratch_bytes(Ns, Vs));
            add(strf("classifier fwd+bwd chunk=%d", chunk), strf("N=%d C=%d V=%d", Ns, C, Vs), time_us([&] {
                    classifier_forward_backward_cuda(losses.p, dx.p, dwte.p, x.p, wte.p, tgt.p, Ns, C, Vs, 1.0f / Ns, scratch.p,
                                                     g_stream);
                }),
                (double)Ns * classifier_ldl(Vs) * (4 + 4 + 2 + 2 + 2), 6.0 * Ns * (double)C * Vs);
        }
        g_classifier_chunk = default_chunk;
    }
    {  // the classifier's pieces on one chunk of 4096 rows, by vocabulary size
        const int R = 4096, Vp = classifier_ldl(V);
        DBuf<bf16> w((size_t)Vp * C), xc((size_t)R * C), dxc((size_t)R * C);
        DBuf<float> lg((size_t)R * Vp), dw((size_t)Vp * C), losses(R);
        DBuf<int> tgt(R);
        std::vector<int> t(R);
        for (int i = 0; i < R; i++) t[i] = (i * 7919) % V;
        up(tgt, t);
        fill(w.p, w.n, -0.1f, 0.1f), fill(xc.p, xc.n), fill(lg.p, lg.n, -1, 1), fill(dw.p, dw.n);
        const bf16* dl = (const bf16*)lg.p;
        for (int v : {V, V / 64 * 64, V / 128 * 128, Vp}) {
            const double f = 2.0 * R * (double)C * v;
            add(strf("  gemm logits fp32 M=%d", v), strf("N=%d K=%d", R, C), time_us([&] {
                    matmul_cublaslt_or_die(lg.p, CUDA_R_32F, Vp, w.p, true, C, xc.p, false, C, v, R, C, 0.0f,
                                           CUBLASLT_EPILOGUE_DEFAULT, nullptr, g_stream);
                }),
                0, f);
            add(strf("  gemm dx bf16 K=%d", v), strf("M=%d N=%d", C, R), time_us([&] {
                    matmul_cublaslt_or_die(dxc.p, CUDA_R_16BF, C, w.p, false, C, dl, false, 2 * Vp, C, R, v, 0.0f,
                                           CUBLASLT_EPILOGUE_DEFAULT, nullptr, g_stream);
                }),
                0, f);
            add(strf("  gemm dwte fp32 N=%d", v), strf("M=%d K=%d", C, R), time_us([&] {
                    matmul_cublaslt_or_die(dw.p, CUDA_R_32F, C, xc.p, false, C, dl, true, 2 * Vp, C, v, R, 1.0f,
                                           CUBLASLT_EPILOGUE_DEFAULT, nullptr, g_stream);
                }),
                0, f);
        }
        add("  gemm logits bf16 M=50257", strf("N=%d K=%d", R, C), time_us([&] {
                matmul_cublaslt_or_die((bf16*)lg.p, CUDA_R_16BF, Vp, w.p, true, C, xc.p, false, C, V, R, C, 0.0f,
                                       CUBLASLT_EPILOGUE_DEFAULT, nullptr, g_stream);
            }),
            0, 2.0 * R * (double)C * V);
        fill(lg.p, lg.n, -1, 1);
        add("  softmax-CE kernel fwd", strf("rows=%d V=%d", R, V), time_us([&] {
                crossentropy_forward_backward_kernel<<<R, CE_THREADS, 0, g_stream>>>(lg.p, losses.p, tgt.p, V, Vp, 1.0f, false, PointerMixCuda{});
            }),
            4.0 * R * V, 0);
        add("  softmax-CE kernel fwd+bwd", strf("rows=%d V=%d", R, V), time_us([&] {
                crossentropy_forward_backward_kernel<<<R, CE_THREADS, 0, g_stream>>>(lg.p, losses.p, tgt.p, V, Vp, 1.0f, true, PointerMixCuda{});
            }),
            10.0 * R * V, 0);
    }
    {  // optimizer over 124M parameters
        const size_t n = 124475904;
        DBuf<float> master(n), m(n), v(n), g(n), nsq(1), scale(1), scratch(grad_norm_squared_scratch_bytes() / 4);
        DBuf<bf16> param(n);
        fill(master.p, n), fill(m.p, n, -1e-3f, 1e-3f), fill(v.p, n, 0, 1e-6f), fill(g.p, n, -1e-3f, 1e-3f);
        add("grad_norm_squared", strf("n=%zu", n), time_us([&] { grad_norm_squared_cuda(nsq.p, g.p, n, scratch.p, g_stream); }), 4.0 * n, 0);
        clip_scale_cuda(scale.p, nsq.p, 1.0f, g_stream);
        add("adamw_update", strf("n=%zu", n), time_us([&] {
                adamw_update_cuda(master.p, param.p, m.p, v.p, g.p, n, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10, scale.p, g_stream);
            }),
            30.0 * n, 0);
        std::vector<AdamWPiece> pieces;  // GPT-2's alternation of matrices and vectors, one launch
        for (size_t at = 0; at < n;) {
            const size_t len = std::min(n - at, pieces.size() % 2 ? (size_t)768 : (size_t)768 * 3072);
            pieces.push_back({at, len, len > 768}), at += len;
        }
        const std::vector<AdamWChunk> table = adamw_chunks(pieces);
        DBuf<AdamWChunk> d_table(table.size());
        CUDA_CHECK(cudaMemcpy(d_table.p, table.data(), table.size() * sizeof(AdamWChunk), cudaMemcpyHostToDevice));
        add("adamw_update_chunks", strf("n=%zu, %zu pieces", n, pieces.size()), time_us([&] {
                adamw_update_chunks_cuda(master.p, param.p, m.p, v.p, g.p, d_table.p, (int)table.size(), 1e-4f, 0.9f, 0.95f, 1e-8f,
                                         0.1f, 10, scale.p, g_stream);
            }),
            30.0 * n, 0);
    }
    // The table: achieved rate, and the floor = max(bytes / copy bandwidth, flops / gemm peak).
    std::string table = strf("GPU: %s (%d SMs); ceilings measured here: copy %.0f GB/s, bf16 gemm %.0f TFLOP/s\n", prop.name,
                            prop.multiProcessorCount, bw / 1e9, peak / 1e12);
    table += strf("%-36s %-26s %10s %14s %10s %8s\n", "op", "shape", "time_us", "achieved", "floor_us", "floor%");
    for (const PerfRow& r : rows) {
        if (r.op.rfind("ceiling", 0) == 0) continue;
        const double floor_us = std::max(r.bytes / bw, r.flops / peak) * 1e6;
        std::string ach = r.flops > 0 ? strf("%.0f TFLOP/s", r.flops / (r.us * 1e-6) / 1e12) : strf("%.0f GB/s", r.bytes / (r.us * 1e-6) / 1e9);
        table += strf("%-36s %-26s %10.1f %14s %10.1f %7.0f%%\n", r.op.c_str(), r.shape.c_str(), r.us, ach.c_str(), floor_us,
                     100.0 * floor_us / r.us);
    }
    table += "(classifier bytes: fp32 logits written + read, bf16 dlogits written + read by two products; floor uses both terms)\n";
    // Last (a capture failure would end the run): the encoder backward's GPU time without the
    // host's enqueue gaps (sort query, stream-ordered alloc), replayed from a CUDA graph.
    {
        DBuf<bf16> dout(NC);
        DBuf<float> dwte((size_t)V * C);
        DBuf<int> tok(N);
        gc::Rng rng(g_seed);
        std::vector<int> t(N);
        for (int i = 0; i < N; i++) t[i] = rng.uniform() < 0.05 ? 13 : rng.randint(0, V - 1);
        up(tok, t);
        fill(dout.p, NC), fill(dwte.p, dwte.n);
        encoder_backward_cuda(dwte.p, dout.p, tok.p, B, T, C, g_stream);  // outside capture: one-time setup
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CUDA_CHECK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal));
        encoder_backward_cuda(dwte.p, dout.p, tok.p, B, T, C, g_stream);
        CUDA_CHECK(cudaStreamEndCapture(g_stream, &graph));
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        const double us = time_us([&] { CUDA_CHECK(cudaGraphLaunch(exec, g_stream)); });
        size_t sort_bytes = 0;
        CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, (const int*)nullptr, (int*)nullptr,
                                                   (const int*)nullptr, (int*)nullptr, N, 0, 31, g_stream));
        DBuf<char> tmp(sort_bytes);
        DBuf<int> k2(N), v1(N), v2(N);
        const double us_sort = time_us([&] {
            CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp.p, sort_bytes, tok.p, k2.p, v1.p, v2.p, N, 0, 31, g_stream));
        });
        table += strf("encoder_backward as a CUDA graph: %.1f us (of which the radix sort of %d pairs: %.1f us)\n", us, N, us_sort);
        CUDA_CHECK(cudaGraphExecDestroy(exec));
        CUDA_CHECK(cudaGraphDestroy(graph));
    }
    std::printf("\n%s", table.c_str());
    if (out_path) {
        FILE* f = std::fopen(out_path, "w");
        if (!f) fatal("cannot write %s", out_path);
        std::fputs(table.c_str(), f);
        std::fclose(f);
    }
}

// ------------------------------------------------------------------------------------------------

static int main_body(int argc, char** argv) {
    bool perf = false;
    const char* out_path = nullptr;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--seed" && i + 1 < argc) g_seed = std::strtoull(argv[++i], nullptr, 10);
        else if (a == "--filter" && i + 1 < argc) g_filter = argv[++i];
        else if (a == "--out" && i + 1 < argc) out_path = argv[++i];
        else if (a == "--perf") perf = true;
        else if (a == "--small") g_small = true;
        else fatal("unknown argument %s (usage: test_ops [--seed N] [--filter OP] [--small] [--perf] [--out FILE])", argv[i]);
    }
    int devices = 0;
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
        std::printf("SKIP test_ops: no CUDA device (%s)\n0 passed, 0 failed\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 0;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("test_ops on %s, seed %" PRIu64 "%s\n", prop.name, g_seed, g_small ? " (small shapes)" : "");
    CUDA_CHECK(cudaStreamCreate(&g_stream));
    if (perf) {
        run_perf(out_path);
        return 0;
    }
    test_encoder();
    test_layernorm();
    test_matmul_forward();
    test_matmul_fused_rows();
    test_matmul_backward();
    test_rope();
    test_logn_scale();
    test_qk_conv();
    test_attn_sink();
    test_pointer();
    test_gelu();
    test_residual();
    test_classifier();
    test_adamw();
    return check_report();
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
