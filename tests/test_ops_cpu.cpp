// Op test harness for the CPU reference layers (layers/*.h), in the spirit of ggml's
// test-backend-ops. For every case of the table below, on fresh random inputs:
//   grad   the T=double op: analytic gradient of L = sum_k <out_k, R_k> (R_k fixed random, over the
//          differentiable outputs) from the backward, vs central finite differences of L for EVERY
//          input element (tests/gradcheck.h), error gc::rel_error (elementwise relative, floored at
//          1e-3 of the tensor's scale) <= 1e-6. One line per gradient.
//   accum  backward run twice gives twice the gradient: backward ADDS into its buffers.
//   fwd    the T=float forward vs the T=double forward on the same inputs (all outputs, including
//          saved ones like mean/rstd/lse), gc::norm_rel_error <= 1e-5. Outputs are poisoned with NaN
//          before every forward, so an unwritten element fails.
//   bwd    the T=float backward vs the T=double backward, gc::norm_rel_error <= 1e-5.
//   det    the float forward+backward run with 1 thread, 2 threads, 2 threads again and on copies of
//          the inputs shifted by one element (other alignment): all results bit-identical.
// plus op-specific checks (attention vs a naive softmax, exact zeros where a mask says so, AdamW vs
// a hand-written formula, the learning-rate schedule, clipping, the gradient norm).
//
// Usage: test_ops_cpu [--seed N] [--filter OP] [--eps STEP] [--perf]
//   --filter runs the cases whose op name contains OP (each case draws from its own seeded stream,
//   so its inputs do not depend on the filter); --eps overrides every finite-difference step;
//   GRADCHECK_VERBOSE=1 prints the worst element of every gradient check.
// Output: one line per check "PASS|FAIL <check> <op> <shape> maxerr=<e> tol=<t>", then
// "<n> passed, <m> failed"; exit status 1 if anything failed. --perf prints a timing table instead.
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "layers/attention.h"
#include "layers/attn_sink.h"
#include "layers/patterns/dilated_reference.h"
#include "layers/classifier.h"
#include "layers/encoder.h"
#include "layers/gelu.h"
#include "layers/layernorm.h"
#include "layers/matmul.h"
#include "layers/pointer.h"
#include "layers/qk_conv.h"
#include "layers/residual.h"
#include "layers/rope.h"
#include "tests/check.h"
#include "tests/gradcheck.h"

#if !defined(_OPENMP)
static inline void omp_set_num_threads(int) {}
static inline int omp_get_max_threads() { return 1; }
#endif

// ------------------------------------------------------------------------------------------------
// Reporting

static double g_eps_override = 0;  // --eps: finite-difference step for every case (experiments)

static bool report(const char* check, const std::string& op, const std::string& shape, double err, double tol) {
    const bool ok = err <= tol;  // NaN fails
    return ::check(ok, strf("%-6s %-20s %-44s maxerr=%-10.3g tol=%.3g", check, op.c_str(), shape.c_str(), err, tol));
}

// ------------------------------------------------------------------------------------------------
// Buffers. A Buf may start `off` elements into its storage, so the determinism check can rerun an
// op on inputs of another alignment.

template <typename T>
struct Buf {
    std::vector<T> mem;
    size_t off = 0, n = 0;
    Buf() = default;
    explicit Buf(size_t n_, size_t off_ = 0) : mem(n_ + off_), off(off_), n(n_) {}
    T* data() { return mem.data() + off; }
    const T* data() const { return mem.data() + off; }
    size_t size() const { return n; }
    T& operator[](size_t i) { return mem[off + i]; }
    const T& operator[](size_t i) const { return mem[off + i]; }
};
template <typename T>
using Bufs = std::vector<Buf<T>>;

template <typename T, typename S>
static Bufs<T> convert(const Bufs<S>& src, size_t off = 0) {
    Bufs<T> dst;
    for (const auto& b : src) {
        Buf<T> d(b.size(), off);
        for (size_t i = 0; i < b.size(); i++) d[i] = (T)b[i];
        dst.push_back(std::move(d));
    }
    return dst;
}

struct TensorInfo {
    std::string name;
    size_t n;
    bool diff;         // input: checked by gradcheck; output: part of the loss
    double lo, hi;     // random range of an input
};

template <typename T>
static Bufs<T> alloc(const std::vector<TensorInfo>& infos, size_t off = 0) {
    Bufs<T> b;
    for (const auto& t : infos) b.emplace_back(t.n, off);
    return b;
}
template <typename T>
static void poison_all(Bufs<T>& b) {
    for (auto& x : b) gc::poison(x.data(), x.size());
}
template <typename T>
static void zero_all(Bufs<T>& b) {
    for (auto& x : b) std::fill(x.data(), x.data() + x.size(), T(0));
}

// ------------------------------------------------------------------------------------------------
// Ops. Each op struct holds its shape and integer inputs and provides
//   in, out                 tensor descriptions (floating-point inputs and outputs)
//   setup(rng)              draws the integer inputs (tokens, positions, targets, masks)
//   make_R(k, rng, R)       the loss weights of differentiable output k (default U(-1, 1))
//   forward<T>(in, out)     out from in
//   backward<T>(in, out, dout, grad)  adds gradients of the differentiable inputs into grad
// grad/fwd/bwd tolerances are members so one op can loosen them with a reason.

struct OpBase {
    std::string op, shape;
    std::vector<TensorInfo> in, out;
    // Finite-difference step. Measured over 12 seeds (max over all cases of the grad error): eps=1e-6
    // gives up to 6e-6 (rounding of L / 2eps dominates), 1e-5 up to 5e-7, 3e-5 up to 2e-7 (the
    // optimum; at 1e-4 truncation shows in gelu). A wrong backward gives 1e-2 or more.
    double eps = 3e-5;
    double grad_tol = 1e-6;   // analytic vs numeric, double, gc::rel_error (floor 1e-3 of the scale)
    double fwd_tol = 1e-5;    // float vs double forward, gc::norm_rel_error
    double bwd_tol = 1e-5;    // float vs double backward, gc::norm_rel_error
    void setup(gc::Rng&) {}
    void make_R(size_t, gc::Rng& rng, Buf<double>& R) { gc::fill_uniform(R.data(), R.size(), rng, -1, 1); }
};

struct EncoderOp : OpBase {
    int B, Tn, C, V;
    std::vector<int> tokens;
    EncoderOp(int B_, int T_, int C_, int V_) : B(B_), Tn(T_), C(C_), V(V_) {
        op = "encoder";
        shape = strf("B=%d,T=%d,C=%d,V=%d", B, Tn, C, V);
        in = {{"wte", (size_t)V * C, true, -1, 1}};
        out = {{"out", (size_t)B * Tn * C, true, 0, 0}};
    }
    void setup(gc::Rng& rng) {
        tokens.resize((size_t)B * Tn);
        for (auto& t : tokens) t = rng.randint(0, V - 1);
        if (B * Tn > 2) tokens[B * Tn - 1] = tokens[0];  // a repeated token: its row accumulates
    }
    template <typename T>
    void forward(const Bufs<T>& i, Bufs<T>& o) const {
        encoder_forward(o[0].data(), tokens.data(), i[0].data(), B, Tn, C);
    }
    template <typename T>
    void backward(const Bufs<T>&, const Bufs<T>&, const Bufs<T>& d, Bufs<T>& g) const {
        encoder_backward(g[0].data(), d[0].data(), tokens.data(), B, Tn, C);
    }
};

struct LayernormOp : OpBase {
    int N, C;
    LayernormOp(int N_, int C_) : N(N_), C(C_) {
        op = "layernorm";
        shape = strf("N=%d,C=%d", N, C);
        in = {{"inp", (size_t)N * C, true, -1, 3}, {"weight", (size_t)C, true, 0.5, 1.5}, {"bias", (size_t)C, true, -1, 1}};
        out = {{"out", (size_t)N * C, true, 0, 0}, {"mean", (size_t)N, false, 0, 0}, {"rstd", (size_t)N, false, 0, 0}};
    }
    template <typename T>
    void forward(const Bufs<T>& i, Bufs<T>& o) const {
        layernorm_forward(o[0].data(), o[1].data(), o[2].data(), i[0].data(), i[1].data(), i[2].data(), N, C);
    }
    template <typename T>
    void backward(const Bufs<T>& i, const Bufs<T>& o, const Bufs<T>& d, Bufs<T>& g) const {
        layernorm_backward(g[0].data(), g[1].data(), g[2].data(), d[0].data(), i[0].data(), i[1].data(),
                           o[1].data(), o[2].data(), N, C);
    }
};

struct MatmulOp : OpBase {
    int N, C, OC;
    bool bias;
    MatmulOp(int N_, int C_, int OC_, bool bias_) : N(N_), C(C_), OC(OC_), bias(bias_) {
        op = "matmul";
        shape = strf("N=%d,C=%d,OC=%d,%s", N, C, OC, bias ? "bias" : "nobias");
        in = {{"inp", (size_t)N * C, true, -1, 1}, {"weight", (size_t)OC * C, true, -1, 1}};
        if (bias) in.push_back({"bias", (size_t)OC, true, -1, 1});
        out = {{"out", (size_t)N * OC, true, 0, 0}};
    }
    template <typename T>
    void forward(const Bufs<T>& i, Bufs<T>& o) const {
        matmul_forward(o[0].data(), i[0].data(), i[1].data(), bias ? i[2].data() : (const T*)nullptr, N, C, OC);
    }
    template <typename T>
    void backward(const Bufs<T>& i, const Bufs<T>&, const Bufs<T>& d, Bufs<T>& g) const {
        matmul_backward(g[0].data(), g[1].data(), bias ? g[2].data() : (T*)nullptr, d[0].data(), i[0].data(),
                        i[1].data(), N, C, OC);
    }
};

struct RopeOp : OpBase {
    int B, Tn, H, D, pos0, pos_step;
    float theta;
    std::vector<int> pos;
    RopeOp(int B_, int T_, int H_, int D_, int pos0_, int step_, float theta_ = 10000.0f)
        : B(B_), Tn(T_), H(H_), D(D_), pos0(pos0_), pos_step(step_), theta(theta_) {
        op = "rope";
        shape = strf("B=%d,T=%d,H=%d,D=%d,pos=%d+%dt", B, Tn, H, D, pos0, pos_step);
        const size_t n = (size_t)B * Tn * 3 * H * D;
        in = {{"qkv", n, true, -1, 1}};
        out = {{"out", n, true, 0, 0}};
        for (int t = 0; t < Tn; t++) pos.push_back(pos0 + pos_step * t);
    }
    template <typename T>
    void forward(const Bufs<T>& i, Bufs<T>& o) const {
        rope_forward(o[0].data(), i[0].data(), pos.data(), B, Tn, H, D, theta);
    }
    template <typename T>
    void backward(const Bufs<T>&, const Bufs<T>&, const Bufs<T>& d, Bufs<T>& g) const {
        rope_backward(g[0].data(), d[0].data(), pos.data(), B, Tn, H, D, theta);
    }
};

// The q/k convolution (layers/qk_conv.h) over (B, T, 3C) rows, with a document mask whose second
// document starts inside row 1 when `docs`; raw (q and k before it) is a saved output.
struct QkConvOp : OpBase {
    int B, Tn, C, W;
    std::vector<int> pos, doc_start;
    QkConvOp(int B_, int T_, int C_, int W_, bool docs) : B(B_), Tn(T_), C(C_), W(W_) {
        op = "qk_conv";
        shape = strf("B=%d,T=%d,C=%d,W=%d%s", B, Tn, C, W, docs ? ",docs" : "");
        in = {{"qkv", (size_t)B * Tn * 3 * C, true, -1, 1}, {"weight", (size_t)W * 2 * C, true, -1, 1}};
        out = {{"out", (size_t)B * Tn * 3 * C, true, 0, 0}, {"raw", (size_t)B * Tn * 2 * C, false, 0, 0}};
        for (int t = 0; t < Tn; t++) pos.push_back(500 + t);
        for (int r = 0; r < B && docs; r++)
            for (int t = 0; t < Tn; t++) doc_start.push_back(r == 1 && t >= Tn / 3 ? 500 + Tn / 3 : 500);
    }
    template <typename T>
    void forward(const Bufs<T>& i, Bufs<T>& o) const {
        qk_conv_forward(o[0].data(), o[1].data(), i[0].data(), (const T*)nullptr, i[1].data(), pos.data(),
                        doc_start.empty() ? nullptr : doc_start.data(), B, Tn, C, W);
    }
    template <typename T>
    void backward(const Bufs<T>& i, const Bufs<T>& o, const Bufs<T>& d, Bufs<T>& g) const {
        qk_conv_backward(g[0].data(), g[1].data(), d[0].data(), o[1].data(), i[1].data(), pos.data(),
                         doc_start.empty() ? nullptr : doc_start.data(), B, Tn, C, W);
    }
};

// The pointer (layers/pointer.h) over B rows of T positions, composed as the model composes it:
// the chains, the shifted keys, the head's forward, the mixture (pointer_mix_loss, the classifier's
// per row), and back. Tokens from a vocabulary of V so that targets recur, one target no token
// holds (its copy is 0), targets of -1 (no loss), the first position (only the null key).
struct PointerOp : OpBase {
    int B, Tn, D, V;
    double scale;
    std::vector<int> tokens, targets, first_key, prev_key, first_query, next_query;
    PointerOp(int B_, int T_, int D_, int V_) : B(B_), Tn(T_), D(D_), V(V_), scale(1.0 / std::sqrt((double)D_)) {
        op = "pointer";
        shape = strf("B=%d,T=%d,D=%d,V=%d", B, Tn, D, V);
        const size_t n = (size_t)B * Tn;
        in = {{"q", n * D, true, -1, 1}, {"kp", n * D, true, -1, 1}, {"gate", n, true, -3, 3}, {"lm", n, true, -8, -0.05}};
        out = {{"loss", n, true, 0, 0}, {"lse", n, false, 0, 0}, {"pcopy", n, false, 0, 0}};
    }
    void setup(gc::Rng& rng) {
        const size_t n = (size_t)B * Tn;
        tokens.resize(n), targets.resize(n);
        for (auto& t : tokens) t = rng.randint(0, V - 1);
        for (auto& t : targets) t = rng.randint(0, V - 1);
        targets[1] = -1;
        if (B * Tn > 4) targets[n - 2] = -1, targets[n - 1] = V;  // V: no token holds it
        first_key.resize(n), prev_key.resize(n), first_query.resize(n), next_query.resize(n);
        pointer_links(first_key.data(), prev_key.data(), first_query.data(), next_query.data(), tokens.data(), targets.data(),
                      B, Tn, V + 1);
    }
    template <typename T>
    void forward(const Bufs<T>& i, Bufs<T>& o) const {
        std::vector<T> ks(i[1].size());
        pointer_shift_keys(ks.data(), i[1].data(), B, Tn, D);
        pointer_forward(o[1].data(), o[2].data(), i[0].data(), ks.data(), first_key.data(), prev_key.data(), B, Tn, D, (T)scale);
        for (size_t r = 0; r < targets.size(); r++) {
            T w, keep;
            o[0][r] = targets[r] < 0 ? T(0) : pointer_mix_loss(i[2][r], i[3][r], o[2][r], &w, &keep);
        }
    }
    template <typename T>
    void backward(const Bufs<T>& i, const Bufs<T>& o, const Bufs<T>& d, Bufs<T>& g) const {
        const size_t n = targets.size();
        std::vector<T> ks(i[1].size()), dks(i[1].size(), T(0)), w(n, T(0));
        pointer_shift_keys(ks.data(), i[1].data(), B, Tn, D);
        for (size_t r = 0; r < n; r++) {
            if (targets[r] < 0) continue;
            T keep;
            pointer_mix_loss(i[2][r], i[3][r], o[2][r], &w[r], &keep);
            g[3][r] += -keep * d[0][r];  // the classifier's: d lm = -(1 - w)
        }
        pointer_backward(g[0].data(), dks.data(), g[2].data(), i[0].data(), ks.data(), i[2].data(), w.data(), o[1].data(),
                         o[2].data(), targets.data(), first_key.data(), prev_key.data(), first_query.data(), next_query.data(),
                         B, Tn, D, (T)scale, d[0].data());
        pointer_unshift_grad(g[1].data(), dks.data(), B, Tn, D);
    }
};

// The convolution written out at chosen rows (not the reference's loop), and a sequence run in
// chunks, each reading the tail the chunks before kept (qk_conv_keep_tail), equal to the sequence
// in one piece: chunks shorter and longer than the tail.
static void qk_conv_checks(gc::Rng& rng) {
    const int B = 2, N = 23, C = 3, W = 4;
    std::vector<double> x((size_t)B * N * 3 * C), w((size_t)W * 2 * C), whole(x.size()), raw((size_t)B * N * 2 * C);
    gc::fill_uniform(x.data(), x.size(), rng, -1, 1);
    gc::fill_uniform(w.data(), w.size(), rng, -1, 1);
    std::vector<int> pos(N), ds((size_t)B * N, 0);
    for (int t = 0; t < N; t++) pos[t] = t;
    for (int t = 10; t < N; t++) ds[(size_t)N + t] = 10;  // row 1: a document starts at 10
    qk_conv_forward(whole.data(), raw.data(), x.data(), (const double*)nullptr, w.data(), pos.data(), ds.data(), B, N, C, W);
    auto X = [&](int b, int t, int c) { return x[((size_t)b * N + t) * 3 * C + c]; };
    auto Wt = [&](int j, int c) { return w[(size_t)j * 2 * C + c]; };
    auto got = [&](int b, int t, int c) { return whole[((size_t)b * N + t) * 3 * C + c]; };
    double err = 0;
    // Row 0, token 5, a key channel: all four taps. Token 1: two taps (nothing before 0).
    err = std::max(err, std::fabs(got(0, 5, C + 1) - (Wt(0, C + 1) * X(0, 5, C + 1) + Wt(1, C + 1) * X(0, 4, C + 1) +
                                                       Wt(2, C + 1) * X(0, 3, C + 1) + Wt(3, C + 1) * X(0, 2, C + 1))));
    err = std::max(err, std::fabs(got(0, 1, 2) - (Wt(0, 2) * X(0, 1, 2) + Wt(1, 2) * X(0, 0, 2))));
    // Row 1, token 11: its document started at 10, so two taps; token 9 (the first document): four.
    err = std::max(err, std::fabs(got(1, 11, 0) - (Wt(0, 0) * X(1, 11, 0) + Wt(1, 0) * X(1, 10, 0))));
    err = std::max(err, std::fabs(got(1, 9, 0) - (Wt(0, 0) * X(1, 9, 0) + Wt(1, 0) * X(1, 8, 0) + Wt(2, 0) * X(1, 7, 0) +
                                                  Wt(3, 0) * X(1, 6, 0))));
    err = std::max(err, std::fabs(got(1, 4, 2 * C + 1) - X(1, 4, 2 * C + 1)));  // v passes
    report("fwd", "qk_conv", "written out at chosen rows", err, 1e-15);

    std::vector<double> tail((size_t)B * (W - 1) * 2 * C, 0.0), chunked(x.size());
    const int cuts[] = {0, 2, 3, 9, 10, 11, 18, N};  // chunks of 2, 1, 6, 1, 1, 7, 5
    for (size_t k = 0; k + 1 < sizeof cuts / sizeof cuts[0]; k++) {
        const int at = cuts[k], n = cuts[k + 1] - at;
        std::vector<double> in((size_t)B * n * 3 * C), o(in.size());
        for (int b = 0; b < B; b++)
            std::copy_n(x.begin() + ((size_t)b * N + at) * 3 * C, (size_t)n * 3 * C, in.begin() + (size_t)b * n * 3 * C);
        qk_conv_forward(o.data(), (double*)nullptr, in.data(), tail.data(), w.data(), pos.data() + at, nullptr, B, n, C, W);
        qk_conv_keep_tail(tail.data(), in.data(), B, n, C, W);
        for (int b = 0; b < B; b++)
            std::copy_n(o.begin() + (size_t)b * n * 3 * C, (size_t)n * 3 * C, chunked.begin() + ((size_t)b * N + at) * 3 * C);
    }
    std::vector<double> plain(x.size());  // the whole sequence without a document mask, as decoding runs
    qk_conv_forward(plain.data(), (double*)nullptr, x.data(), (const double*)nullptr, w.data(), pos.data(), nullptr, B, N, C, W);
    report("fwd", "qk_conv", "in chunks with the kept tail == whole", gc::rel_error(chunked.data(), plain.data(), plain.size()), 1e-15);
    chunked[((size_t)1 * N + 12) * 3 * C] += 1e-3;  // control: one wrong element is seen
    report("fwd", "qk_conv", "control: one element off is caught",
           gc::rel_error(chunked.data(), plain.data(), plain.size()) > 1e-6 ? 0.0 : 1.0, 0);
}

// Q, K, V are strided views of one (B, N, 3, H, D) buffer, as the model uses them; dQ, dK, dV land
// in the same layout of the one gradient buffer.
enum class Docs { None, Split, SplitEmpty };
struct AttentionOp : OpBase {
    int B, N, H, D, pos0;
    bool causal;
    Docs docs;
    std::vector<int> segments, dilations;  // empty: dense; else dilated (LongNet) branches
    std::vector<int> pos, doc_start;
    int empty_b = -1, empty_i = -1;  // the row with no allowed key (Docs::SplitEmpty)
    AttentionOp(int B_, int N_, int H_, int D_, bool causal_, Docs docs_, int pos0_)
        : B(B_), N(N_), H(H_), D(D_), pos0(pos0_), causal(causal_), docs(docs_) {
        op = "attention";
        describe();
        in = {{"qkv", (size_t)B * N * 3 * H * D, true, -1.5, 1.5}};
        out = {{"out", (size_t)B * N * H * D, true, 0, 0}, {"lse", (size_t)B * H * N, false, 0, 0}};
        for (int t = 0; t < N; t++) pos.push_back(pos0 + t);
        if (docs != Docs::None) {
            // Batch row b holds two documents split at s_b: queries before it start at pos[0],
            // queries from it on start at pos[s_b] (so they must not see keys before s_b).
            doc_start.resize((size_t)B * N);
            for (int b = 0; b < B; b++) {
                const int split = (b % 2 == 0) ? N / 2 : (N + 2) / 3;
                for (int i = 0; i < N; i++) doc_start[(size_t)b * N + i] = i < split ? pos[0] : pos[split];
            }
            // A row that attends no key. A well-formed doc_start (doc_start <= own position) can
            // never produce one with the Dense pattern, since a query always sees itself; the only
            // way the current pattern set allows is a doc_start beyond every key position, which
            // is what we use (it is also what "document starts after this token" would encode).
            if (docs == Docs::SplitEmpty) {
                empty_b = B - 1;
                empty_i = N > 2 ? 2 : 0;
                doc_start[(size_t)empty_b * N + empty_i] = pos[N - 1] + 1;
            }
        }
    }
    // Makes this a dilated case with branches (w_i, r_i).
    AttentionOp& dilated(std::vector<int> w, std::vector<int> r) {
        op = "attention_dilated";
        segments = std::move(w), dilations = std::move(r);
        describe();
        return *this;
    }
    void describe() {
        shape = strf("B=%d,N=%d,H=%d,D=%d,%s,%s,pos=%d+t", B, N, H, D, causal ? "causal" : "full",
                    docs == Docs::None ? "nodoc" : docs == Docs::Split ? "doc" : "doc+empty", pos0);
        for (size_t i = 0; i < segments.size(); i++) shape += strf(",w%d/r%d", segments[i], dilations[i]);
    }
    AttnPattern pattern() const {
        AttnPattern p;
        p.kind = segments.empty() ? AttnKind::Dense : AttnKind::Dilated;
        p.causal = causal;
        p.dilated.segments = segments, p.dilated.dilations = dilations;
        return p;
    }
    AttnShape ashape() const { return AttnShape{B, N, H, D, 3 * H * D}; }
    const int* docs_ptr() const { return doc_start.empty() ? nullptr : doc_start.data(); }
    // The mask written independently of layers/, from the spec's words: how many times does
    // query i of batch row b, head h, count key j? Dilated: one count per branch whose segment
    // (of length min(w, N); dilated cases use positions 0..N-1, the whole sequence) holds both,
    // with both offsets in the head's class h mod r.
    int mult(int b, int h, int i, int j) const {
        if (causal && pos[j] > pos[i]) return 0;
        if (!doc_start.empty() && pos[j] < doc_start[(size_t)b * N + i]) return 0;
        if (segments.empty()) return 1;
        int m = 0;
        for (size_t br = 0; br < segments.size(); br++) {
            const int w = std::min(segments[br], N), r = dilations[br];
            const int pi = pos[i], pj = pos[j];
            const bool same_segment = pi / w == pj / w;
            const bool kept = (pi % w) % r == h % r && (pj % w) % r == h % r;
            m += same_segment && kept;
        }
        return m;
    }
    bool allowed(int b, int h, int i, int j) const { return mult(b, h, i, j) > 0; }
    template <typename T>
    void forward(const Bufs<T>& i, Bufs<T>& o) const {
        const T* qkv = i[0].data();
        const size_t hd = (size_t)H * D;
        attention_forward(o[0].data(), o[1].data(), qkv, qkv + hd, qkv + 2 * hd, pos.data(), docs_ptr(), pattern(),
                          ashape(), T(1.0 / std::sqrt((double)D)));
    }
    template <typename T>
    void backward(const Bufs<T>& i, const Bufs<T>& o, const Bufs<T>& d, Bufs<T>& g) const {
        const T* qkv = i[0].data();
        T* dqkv = g[0].data();
        const size_t hd = (size_t)H * D;
        attention_backward(dqkv, dqkv + hd, dqkv + 2 * hd, d[0].data(), o[0].data(), o[1].data(), qkv, qkv + hd,
                           qkv + 2 * hd, pos.data(), docs_ptr(), pattern(), ashape(), T(1.0 / std::sqrt((double)D)));
    }
};

// Attention with a sink (layers/attn_sink.h): the attention above, then its output and
// log-sum-exp made those of the softmax with one more key per head, of score sink[h] and value
// zero. The backward is the sink's gradient, then the attention's unchanged backward on the
// sink's O and L: the finite differences check that the pair is the gradient of the composite.
struct AttnSinkOp : OpBase {
    AttentionOp a;
    explicit AttnSinkOp(AttentionOp a_) : a(std::move(a_)) {
        op = "attn_sink";
        shape = a.shape;
        in = {a.in[0], {"sink", (size_t)a.H, true, -2, 2}};
        out = a.out;
    }
    template <typename T>
    void forward(const Bufs<T>& i, Bufs<T>& o) const {
        a.forward<T>(i, o);
        attn_sink_forward(o[0].data(), o[1].data(), i[1].data(), a.B, a.N, a.H, a.D);
    }
    template <typename T>
    void backward(const Bufs<T>& i, const Bufs<T>& o, const Bufs<T>& d, Bufs<T>& g) const {
        attn_sink_backward(g[1].data(), d[0].data(), o[0].data(), o[1].data(), i[1].data(), a.B, a.N, a.H, a.D);
        a.backward<T>(i, o, d, g);
    }
};

struct GeluOp : OpBase {
    size_t n;
    explicit GeluOp(size_t n_) : n(n_) {
        op = "gelu";
        shape = strf("n=%zu", n);
        in = {{"inp", n, true, -4, 4}};
        out = {{"out", n, true, 0, 0}};
    }
    template <typename T>
    void forward(const Bufs<T>& i, Bufs<T>& o) const {
        gelu_forward(o[0].data(), i[0].data(), n);
    }
    template <typename T>
    void backward(const Bufs<T>& i, const Bufs<T>&, const Bufs<T>& d, Bufs<T>& g) const {
        gelu_backward(g[0].data(), i[0].data(), d[0].data(), n);
    }
};

struct ResidualOp : OpBase {
    size_t n;
    explicit ResidualOp(size_t n_) : n(n_) {
        op = "residual";
        shape = strf("n=%zu", n);
        in = {{"a", n, true, -1, 1}, {"b", n, true, -1, 1}};
        out = {{"out", n, true, 0, 0}};
    }
    template <typename T>
    void forward(const Bufs<T>& i, Bufs<T>& o) const {
        residual_forward(o[0].data(), i[0].data(), i[1].data(), n);
    }
    template <typename T>
    void backward(const Bufs<T>&, const Bufs<T>&, const Bufs<T>& d, Bufs<T>& g) const {
        residual_backward(g[0].data(), g[1].data(), d[0].data(), n);
    }
};

// The fused op takes one scalar dloss for all rows, so its R is the constant dloss:
// L = dloss * sum_n losses[n].
struct ClassifierOp : OpBase {
    int N, C, V;
    std::vector<int> targets;
    ClassifierOp(int N_, int C_, int V_) : N(N_), C(C_), V(V_) {
        op = "classifier";
        shape = strf("N=%d,C=%d,V=%d,ignore", N, C, V);
        in = {{"x", (size_t)N * C, true, -1, 1}, {"wte", (size_t)V * C, true, -1, 1}};
        out = {{"losses", (size_t)N, true, 0, 0}};
        // Rounding of the losses is the larger FD error here (3e-7 of the 1e-6 at eps=3e-5 over
        // 12 seeds); the loss is smooth, so a longer step costs little truncation (<1e-7).
        eps = 1e-4;
    }
    void setup(gc::Rng& rng) {
        targets.resize(N);
        for (auto& t : targets) t = rng.randint(0, V - 1);
        targets[N > 1 ? 1 : 0] = -1;       // ignored rows: loss 0, no gradient
        if (N > 64) targets[64] = -1;      // the first row of the second chunk
    }
    void make_R(size_t, gc::Rng& rng, Buf<double>& R) {
        const double dloss = rng.uniform(0.5, 1.5);
        std::fill(R.data(), R.data() + R.size(), dloss);
    }
    template <typename T>
    void forward(const Bufs<T>& i, Bufs<T>& o) const {
        classifier_forward_backward(o[0].data(), (T*)nullptr, (T*)nullptr, i[0].data(), i[1].data(), targets.data(),
                                    N, C, V, T(0));
    }
    template <typename T>
    void backward(const Bufs<T>& i, const Bufs<T>&, const Bufs<T>& d, Bufs<T>& g) const {
        std::vector<T> losses(N);
        classifier_forward_backward(losses.data(), g[0].data(), g[1].data(), i[0].data(), i[1].data(),
                                    targets.data(), N, C, V, d[0][0]);
    }
};

// ------------------------------------------------------------------------------------------------
// The generic checks.

template <typename Op>
struct CaseState {
    Bufs<double> in_d, out_d, R, grad_d;
    Bufs<float> in_f, out_f, grad_f;
};

template <typename Op, typename T>
static void run_forward(const Op& op, const Bufs<T>& in, Bufs<T>& out) {
    poison_all(out);
    op.template forward<T>(in, out);
}

// dout buffers: R for the differentiable outputs, empty for the others (no backward reads them).
template <typename Op, typename T>
static Bufs<T> make_dout(const Op& op, const Bufs<T>& R) {
    Bufs<T> d;
    for (size_t k = 0; k < op.out.size(); k++) d.push_back(op.out[k].diff ? R[k] : Buf<T>());
    return d;
}

template <typename Op>
static CaseState<Op> run_case(Op& op, gc::Rng& rng) {
    CaseState<Op> s;
    op.setup(rng);
    for (const auto& t : op.in) {
        Buf<double> b(t.n);
        gc::fill_uniform(b.data(), t.n, rng, t.lo, t.hi);
        s.in_d.push_back(std::move(b));
    }
    for (size_t k = 0; k < op.out.size(); k++) {
        Buf<double> r(op.out[k].diff ? op.out[k].n : 0);
        if (op.out[k].diff) op.make_R(k, rng, r);
        s.R.push_back(std::move(r));
    }

    // --- grad: double, analytic vs finite differences, every element of every input.
    s.out_d = alloc<double>(op.out);
    run_forward(op, s.in_d, s.out_d);
    const Bufs<double> dout_d = make_dout(op, s.R);
    s.grad_d = alloc<double>(op.in);
    zero_all(s.grad_d);
    op.template backward<double>(s.in_d, s.out_d, dout_d, s.grad_d);
    Bufs<double> scratch = alloc<double>(op.out);
    auto loss = [&]() {
        run_forward(op, s.in_d, scratch);
        double L = 0;
        for (size_t k = 0; k < op.out.size(); k++)
            if (op.out[k].diff) L += gc::dot_exact(scratch[k].data(), s.R[k].data(), op.out[k].n);
        return L;
    };
    // Thousands of tiny forwards: one thread (threads only add barrier cost, and spin badly
    // when the machine is busy). Thread counts are covered by the det check.
    const int threads0 = omp_get_max_threads();
    omp_set_num_threads(1);
    for (size_t j = 0; j < op.in.size(); j++) {
        if (!op.in[j].diff) continue;
        const std::string name = op.op + ".d" + op.in[j].name;
        const double err = gc::check_grad(name.c_str(), s.in_d[j].data(), op.in[j].n, s.grad_d[j].data(), loss,
                                          g_eps_override > 0 ? g_eps_override : op.eps, (size_t)-1);
        report("grad", name, op.shape, err, op.grad_tol);
    }
    omp_set_num_threads(threads0);

    // --- accum: a second backward into the same buffers doubles the gradient.
    {
        Bufs<double> g2 = s.grad_d;
        op.template backward<double>(s.in_d, s.out_d, dout_d, g2);
        double err = 0;
        for (size_t j = 0; j < op.in.size(); j++) {
            std::vector<double> twice(op.in[j].n);
            for (size_t i = 0; i < twice.size(); i++) twice[i] = 2 * s.grad_d[j][i];
            err = std::max(err, gc::rel_error(g2[j].data(), twice.data(), twice.size()));
        }
        report("accum", op.op, op.shape, err, 1e-12);
    }

    // --- fwd / bwd: float vs double on the same inputs.
    s.in_f = convert<float>(s.in_d);
    s.out_f = alloc<float>(op.out);
    run_forward(op, s.in_f, s.out_f);
    {
        double err = 0;
        for (size_t k = 0; k < op.out.size(); k++)
            err = std::max(err, gc::norm_rel_error(s.out_f[k].data(), s.out_d[k].data(), op.out[k].n));
        report("fwd", op.op, op.shape, err, op.fwd_tol);
    }
    const Bufs<float> R_f = convert<float>(s.R);
    const Bufs<float> dout_f = make_dout(op, R_f);
    s.grad_f = alloc<float>(op.in);
    zero_all(s.grad_f);
    op.template backward<float>(s.in_f, s.out_f, dout_f, s.grad_f);
    {
        double err = 0;
        for (size_t j = 0; j < op.in.size(); j++)
            err = std::max(err, gc::norm_rel_error(s.grad_f[j].data(), s.grad_d[j].data(), op.in[j].n));
        report("bwd", op.op, op.shape, err, op.bwd_tol);
    }

    // --- det: float forward + backward, bit-identical across runs, thread counts and alignment.
    {
        auto run = [&](int threads, size_t off, Bufs<float>& o, Bufs<float>& g) {
            omp_set_num_threads(threads);
            const Bufs<float> in = convert<float>(s.in_f, off);
            const Bufs<float> dout = make_dout(op, convert<float>(R_f, off));
            o = alloc<float>(op.out, off);
            g = alloc<float>(op.in, off);
            run_forward(op, in, o);
            zero_all(g);
            op.template backward<float>(in, o, dout, g);
        };
        Bufs<float> o_ref, g_ref;
        run(1, 0, o_ref, g_ref);
        const int variants[][2] = {{2, 0}, {2, 0}, {2, 1}, {1, 1}};
        size_t bad = 0;
        for (const auto& v : variants) {
            Bufs<float> o, g;
            run(v[0], (size_t)v[1], o, g);
            for (size_t k = 0; k < o.size(); k++) bad += gc::count_bit_mismatch(o[k].data(), o_ref[k].data(), o[k].size());
            for (size_t k = 0; k < g.size(); k++) bad += gc::count_bit_mismatch(g[k].data(), g_ref[k].data(), g[k].size());
        }
        omp_set_num_threads(threads0);
        report("det", op.op, op.shape, (double)bad, 0);
    }
    return s;
}

// ------------------------------------------------------------------------------------------------
// Attention-specific checks.

// Naive attention in long double: explicit softmax over the masked scores of each row (each key
// counted op.mult times) and, with `sink`, one more score per head, sink[h], whose value is zero:
// the sink from its definition, written apart from layers/.
static void naive_attention(const AttentionOp& op, const double* qkv, std::vector<double>& O, std::vector<double>& L,
                            const double* sink = nullptr) {
    const int B = op.B, N = op.N, H = op.H, D = op.D;
    const size_t stride = (size_t)3 * H * D;
    const long double scale = 1.0L / std::sqrt((long double)D);
    O.assign((size_t)B * N * H * D, 0.0);
    L.assign((size_t)B * H * N, 0.0);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < N; i++) {
                std::vector<long double> sc(N, 0);
                long double mx = sink ? (long double)sink[h] : -INFINITY;
                bool any = sink != nullptr;
                for (int j = 0; j < N; j++) {
                    if (!op.allowed(b, h, i, j)) continue;
                    long double dot = 0;
                    for (int d = 0; d < D; d++)
                        dot += (long double)qkv[(b * N + i) * stride + h * D + d] *
                               qkv[(b * N + j) * stride + (size_t)H * D + h * D + d];
                    sc[j] = scale * dot;
                    mx = any ? std::max(mx, sc[j]) : sc[j];
                    any = true;
                }
                double* o = &O[((size_t)b * N + i) * H * D + (size_t)h * D];
                if (!any) {
                    L[((size_t)b * H + h) * N + i] = -INFINITY;
                    continue;
                }
                long double z = sink ? std::exp(sink[h] - mx) : 0;
                std::vector<long double> acc(D, 0);
                for (int j = 0; j < N; j++) {
                    if (!op.allowed(b, h, i, j)) continue;
                    const long double p = op.mult(b, h, i, j) * std::exp(sc[j] - mx);
                    z += p;
                    for (int d = 0; d < D; d++) acc[d] += p * qkv[(b * N + j) * stride + 2 * (size_t)H * D + h * D + d];
                }
                for (int d = 0; d < D; d++) o[d] = (double)(acc[d] / z);
                L[((size_t)b * H + h) * N + i] = (double)(mx + std::log(z));
            }
}

static void sink_extra(const AttnSinkOp& op, const CaseState<AttnSinkOp>& s) {
    std::vector<double> O, L;
    naive_attention(op.a, s.in_d[0].data(), O, L, s.in_d[1].data());
    const double e_d = std::max(gc::rel_error(s.out_d[0].data(), O.data(), O.size()), gc::rel_error(s.out_d[1].data(), L.data(), L.size()));
    report("naive", "attn_sink.double", op.shape, e_d, 1e-12);
    const double e_f = std::max(gc::norm_rel_error(s.out_f[0].data(), O.data(), O.size()),
                                gc::norm_rel_error(s.out_f[1].data(), L.data(), L.size()));
    report("naive", "attn_sink.float", op.shape, e_f, 1e-5);
    // The control: the same reference with the sink far below every score (as good as none)
    // differs from the op by more than the tolerance, so the check above can fail.
    std::vector<double> none(op.a.H, -1e4), O0, L0;
    naive_attention(op.a, s.in_d[0].data(), O0, L0, none.data());
    report("naive", "attn_sink.control", "the reference without its sink differs",
           gc::rel_error(s.out_d[0].data(), O0.data(), O0.size()) > 1e-6 ? 0.0 : 1.0, 0);
}

static void attention_extra(const AttentionOp& op, const CaseState<AttentionOp>& s) {
    std::vector<double> O, L;
    naive_attention(op, s.in_d[0].data(), O, L);
    const double e_d = std::max(gc::rel_error(s.out_d[0].data(), O.data(), O.size()),
                                gc::rel_error(s.out_d[1].data(), L.data(), L.size()));
    report("naive", "attention.double", op.shape, e_d, 1e-12);
    const double e_f = std::max(gc::norm_rel_error(s.out_f[0].data(), O.data(), O.size()),
                                gc::norm_rel_error(s.out_f[1].data(), L.data(), L.size()));
    report("naive", "attention.float", op.shape, e_f, 1e-5);

    const int B = op.B, N = op.N, H = op.H, D = op.D;
    if (op.empty_b >= 0) {
        // The row with no key: O = 0 exactly and L = -inf, in both precisions; nothing NaN anywhere.
        size_t bad = 0;
        for (int h = 0; h < H; h++) {
            const size_t li = ((size_t)op.empty_b * H + h) * N + op.empty_i;
            bad += !(s.out_d[1][li] == -INFINITY) + !(s.out_f[1][li] == -INFINITY);
            for (int d = 0; d < D; d++) {
                const size_t oi = ((size_t)op.empty_b * N + op.empty_i) * H * D + (size_t)h * D + d;
                bad += s.out_d[0][oi] != 0.0 || std::signbit(s.out_d[0][oi]);
                bad += s.out_f[0][oi] != 0.0f || std::signbit(s.out_f[0][oi]);
            }
        }
        for (size_t k = 0; k < 2; k++)
            for (size_t i = 0; i < s.out_d[k].size(); i++) bad += std::isnan(s.out_d[k][i]) + std::isnan(s.out_f[k][i]);
        report("empty", "attention", op.shape, (double)bad, 0);
    }

    // Exact zeros: with dO nonzero on row (b, i) only, dQ is zero on every other row, and dK, dV
    // are zero on every key that row may not see (causal future, other document, other batch row).
    size_t bad = 0;
    const size_t hd = (size_t)H * D, stride = 3 * hd;
    Bufs<double> dout(1, Buf<double>(s.out_d[0].size()));
    dout.push_back(Buf<double>());
    Bufs<double> g = alloc<double>(op.in);
    const int threads0 = omp_get_max_threads();
    omp_set_num_threads(1);  // many tiny backwards (see run_case)
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) {
            std::fill(dout[0].data(), dout[0].data() + dout[0].size(), 0.0);
            for (size_t c = 0; c < hd; c++) dout[0][((size_t)b * N + i) * hd + c] = s.R[0][((size_t)b * N + i) * hd + c];
            zero_all(g);
            op.backward<double>(s.in_d, s.out_d, dout, g);
            for (int b2 = 0; b2 < B; b2++)
                for (int j = 0; j < N; j++) {
                    const double* row = g[0].data() + ((size_t)b2 * N + j) * stride;
                    const bool self = b2 == b && j == i;
                    for (size_t c = 0; c < hd; c++) {
                        const int h = (int)(c / D);
                        const bool seen = b2 == b && op.allowed(b, h, i, j) && !(b == op.empty_b && i == op.empty_i);
                        if (!self || (b == op.empty_b && i == op.empty_i)) bad += row[c] != 0.0;  // dQ
                        if (!seen) bad += (row[hd + c] != 0.0) + (row[2 * hd + c] != 0.0);        // dK, dV
                    }
                }
        }
    omp_set_num_threads(threads0);
    report("mask0", "attention", op.shape, (double)bad, 0);
}

// Dilated cases: the generic multiplicity form (what the backward and the kernels use) equals
// the spec written out branch by branch and mixed by log-sum-exp (layers/patterns/dilated_reference.h).
static void dilated_extra(const AttentionOp& op, const CaseState<AttentionOp>& s) {
    attention_extra(op, s);
    if (!op.doc_start.empty()) return;  // the branch form has no document mask
    const double* qkv = s.in_d[0].data();
    const size_t hd = (size_t)op.H * op.D;
    std::vector<double> O(s.out_d[0].size()), L(s.out_d[1].size());
    dilated_attention_forward(O.data(), L.data(), qkv, qkv + hd, qkv + 2 * hd, op.pattern(), op.ashape(),
                              1.0 / std::sqrt((double)op.D));
    const double e = std::max(gc::rel_error(s.out_d[0].data(), O.data(), O.size()),
                              gc::rel_error(s.out_d[1].data(), L.data(), L.size()));
    report("branches", "attention_dilated", op.shape, e, 1e-12);
}

// The spec's special cases, through the branch-by-branch reference: one branch (w >= N, 1) is
// dense attention; one branch (w < N, 1) is block-diagonal attention (dense attention on each
// segment alone); k branches that are all (w, 1) give the output of one (w, 1) branch, with L
// larger by log k. Causal and not; N not a multiple of w.
static void dilated_special_cases(gc::Rng& rng) {
    const int B = 2, N = 23, H = 3, D = 8, w = 7;
    const size_t hd = (size_t)H * D, stride = 3 * hd;
    std::vector<double> qkv((size_t)B * N * stride);
    gc::fill_uniform(qkv.data(), qkv.size(), rng, -1.5, 1.5);
    std::vector<int> pos(N);
    for (int t = 0; t < N; t++) pos[t] = t;
    const double scale = 1.0 / std::sqrt((double)D);
    const AttnShape shape{B, N, H, D, (int)stride};
    auto run = [&](const AttnPattern& p, std::vector<double>& O, std::vector<double>& L) {
        O.assign((size_t)B * N * hd, NAN), L.assign((size_t)B * H * N, NAN);
        dilated_attention_forward(O.data(), L.data(), qkv.data(), qkv.data() + hd, qkv.data() + 2 * hd, p, shape, scale);
    };
    for (bool causal : {true, false}) {
        const char* mode = causal ? "causal" : "full";
        AttnPattern dense;
        dense.causal = causal;
        std::vector<double> Od(hd * B * N), Ld((size_t)B * H * N), O, L, O1, L1;
        attention_forward(Od.data(), Ld.data(), qkv.data(), qkv.data() + hd, qkv.data() + 2 * hd, pos.data(), nullptr,
                          dense, shape, scale);
        AttnPattern whole = dilated_pattern(causal, {N + 5}, {1});
        run(whole, O, L);
        report("special", "dilated (w>=N, r=1) == dense", mode,
               std::max(gc::rel_error(O.data(), Od.data(), O.size()), gc::rel_error(L.data(), Ld.data(), L.size())), 1e-12);

        // Block-diagonal: dense attention on each segment as its own sequence.
        std::vector<double> Ob(O.size()), Lb(L.size());
        for (int start = 0; start < N; start += w) {
            const int n = std::min(w, N - start);
            std::vector<double> seg((size_t)B * n * stride), So((size_t)B * n * hd), Sl((size_t)B * H * n);
            for (int b = 0; b < B; b++)
                std::copy_n(&qkv[((size_t)b * N + start) * stride], (size_t)n * stride, &seg[(size_t)b * n * stride]);
            attention_forward(So.data(), Sl.data(), seg.data(), seg.data() + hd, seg.data() + 2 * hd, pos.data(), nullptr,
                              dense, AttnShape{B, n, H, D, (int)stride}, scale);
            for (int b = 0; b < B; b++) {
                std::copy_n(&So[(size_t)b * n * hd], (size_t)n * hd, &Ob[((size_t)b * N + start) * hd]);
                for (int h = 0; h < H; h++)
                    std::copy_n(&Sl[((size_t)b * H + h) * n], n, &Lb[((size_t)b * H + h) * N + start]);
            }
        }
        AttnPattern blocks = dilated_pattern(causal, {w}, {1});
        run(blocks, O1, L1);
        report("special", "dilated (w<N, r=1) == block-diagonal", mode,
               std::max(gc::rel_error(O1.data(), Ob.data(), O1.size()), gc::rel_error(L1.data(), Lb.data(), L1.size())), 1e-12);

        AttnPattern three = dilated_pattern(causal, {w, w, w}, {1, 1, 1});
        run(three, O, L);
        for (double& l : L) l -= std::log(3.0);
        report("special", "dilated 3 x (w, 1) == one (w, 1)", mode,
               std::max(gc::rel_error(O.data(), O1.data(), O.size()), gc::rel_error(L.data(), L1.data(), L.size())), 1e-12);
    }
    // pairs_kept (the FLOP count) equals the sum of multiplicities over all (query, key) pairs.
    double worst_pairs = 0;
    for (const AttnPattern& p : {make_pattern(AttnKind::Dense, true), make_pattern(AttnKind::Dense, false),
                                 dilated_pattern(true, {8, 5, 40}, {3, 2, 4}),
                                 dilated_pattern(false, {7, 12}, {1, 5})}) {
        double brute = 0;
        for (int h = 0; h < H + 2; h++)
            for (int i = 0; i < N; i++)
                for (int j = 0; j < N; j++) brute += key_multiplicity(p, h, i, j, N);
        worst_pairs = std::max(worst_pairs, std::fabs(pairs_kept(p, N, H + 2) - brute));
    }
    report("pairs", "pairs_kept == sum of multiplicities", "4 patterns", worst_pairs, 0);
    // Malformed patterns are refused with a reason.
    const AttnPattern bad[] = {dilated_pattern(true, {8, 16}, {1}), dilated_pattern(true, {4}, {8}),
                               dilated_pattern(true, {0}, {1}), dilated_pattern(true, {}, {})};
    size_t accepted = 0;
    for (const AttnPattern& p : bad) accepted += pattern_error(p).empty();
    report("errors", "dilated: bad configurations refused", "4 cases", (double)accepted, 0);
}

static void classifier_extra(const ClassifierOp& op, const CaseState<ClassifierOp>& s) {
    // Ignored rows: loss exactly 0 and dx exactly 0 (double and float); losses vs a naive formula.
    size_t bad = 0;
    double err = 0;
    for (int n = 0; n < op.N; n++) {
        if (op.targets[n] < 0) {
            bad += (s.out_d[0][n] != 0.0) + (s.out_f[0][n] != 0.0f);
            for (int c = 0; c < op.C; c++)
                bad += (s.grad_d[0][(size_t)n * op.C + c] != 0.0) + (s.grad_f[0][(size_t)n * op.C + c] != 0.0f);
            continue;
        }
        std::vector<long double> logit(op.V);
        long double mx = -INFINITY;
        for (int v = 0; v < op.V; v++) {
            long double z = 0;
            for (int c = 0; c < op.C; c++) z += (long double)s.in_d[0][(size_t)n * op.C + c] * s.in_d[1][(size_t)v * op.C + c];
            logit[v] = z;
            mx = std::max(mx, z);
        }
        long double sum = 0;
        for (int v = 0; v < op.V; v++) sum += std::exp(logit[v] - mx);
        const double ref = (double)(mx + std::log(sum) - logit[op.targets[n]]);
        err = std::max(err, std::fabs(s.out_d[0][n] - ref) / (std::fabs(ref) + 1e-3));
    }
    report("naive", "classifier.losses", op.shape, err, 1e-12);
    report("ignore", "classifier", op.shape, (double)bad, 0);
}

// The pointer's loss against its definition written as a materialized softmax (long double): the
// null key's score 0, keys from the state before, the mixture; rows without a target exactly 0 in
// the loss and in every gradient of their own position.
static void pointer_extra(const PointerOp& op, const CaseState<PointerOp>& s) {
    const int D = op.D;
    double err = 0;
    size_t bad = 0;
    for (int b = 0; b < op.B; b++)
        for (int t = 0; t < op.Tn; t++) {
            const size_t r = (size_t)b * op.Tn + t;
            const int y = op.targets[r];
            if (y < 0) {
                bad += (s.out_d[0][r] != 0.0) + (s.out_f[0][r] != 0.0f) + (s.grad_d[2][r] != 0.0) + (s.grad_d[3][r] != 0.0);
                for (int c = 0; c < D; c++) bad += s.grad_d[0][r * D + c] != 0.0;
                continue;
            }
            std::vector<long double> score((size_t)t + 1, 0.0L);  // key 0: zero, score 0
            for (int j = 1; j <= t; j++)
                for (int c = 0; c < D; c++)
                    score[j] += (long double)op.scale * s.in_d[0][r * D + c] * s.in_d[1][((size_t)b * op.Tn + j - 1) * D + c];
            long double z = 0, copy = 0;
            for (int j = 0; j <= t; j++) z += std::exp(score[j]);
            for (int j = 1; j <= t; j++)
                if (op.tokens[(size_t)b * op.Tn + j] == y) copy += std::exp(score[j]) / z;
            const long double g = 1.0L / (1.0L + std::exp(-(long double)s.in_d[2][r]));
            const double ref = (double)-std::log((1 - g) * std::exp((long double)s.in_d[3][r]) + g * copy);
            err = std::max(err, std::fabs(s.out_d[0][r] - ref) / (std::fabs(ref) + 1e-3));
        }
    report("naive", "pointer.loss", op.shape, err, 1e-12);
    report("ignore", "pointer", op.shape, (double)bad, 0);
    // Every chain link against its definition, searched for directly.
    size_t wrong = 0;
    for (int b = 0; b < op.B; b++)
        for (int t = 0; t < op.Tn; t++) {
            const size_t r0 = (size_t)b * op.Tn, r = r0 + t;
            const int* tok = op.tokens.data() + r0;
            const int* tgt = op.targets.data() + r0;
            int fk = -1, pk = -1, fq = -1, nq = -1;
            for (int s2 = 1; s2 <= t; s2++) fk = tgt[t] >= 0 && tok[s2] == tgt[t] ? s2 : fk;
            for (int s2 = 1; s2 < t; s2++) pk = t >= 1 && tok[s2] == tok[t] ? s2 : pk;
            for (int t2 = op.Tn - 1; t2 >= t; t2--) fq = t >= 1 && tgt[t2] == tok[t] ? t2 : fq;
            for (int t2 = op.Tn - 1; t2 > t; t2--) nq = tgt[t] >= 0 && tgt[t2] == tgt[t] ? t2 : nq;
            wrong += (op.first_key[r] != fk) + (op.prev_key[r] != pk) + (op.first_query[r] != fq) + (op.next_query[r] != nq);
        }
    report("links", "pointer", op.shape, (double)wrong, 0);
    // The GPU's tiles (pointer_tiles) hold the chains' pairs, each once: every query's keys s <= t
    // of its target from its one query tile, every key's queries t >= s from its one key tile; at
    // a tile of 3 rows (groups cut in several) and at the GPU's.
    for (int tile : {3, kPointerTile}) {
        PointerTiles pt;
        pointer_tiles(pt, op.tokens.data(), op.targets.data(), op.B, op.Tn, op.V + 1, tile);
        const size_t n = op.tokens.size();
        std::vector<std::vector<int>> by_query(n), by_key(n), chain_q(n), chain_k(n);
        std::vector<int> seen_q(n, 0), seen_k(n, 0);
        size_t oversize = 0;
        // Each tile's pairs: its own rows against the other side's, kept where the query is at or
        // after the key (queries_own: the tile's own rows are the queries).
        auto walk = [&](const std::vector<int>& tiles, const std::vector<int>& own, const std::vector<int>& other, bool queries_own,
                        std::vector<int>& seen, std::vector<std::vector<int>>& pairs) {
            for (size_t i = 0; i < tiles.size(); i += 4) {
                oversize += tiles[i + 1] - tiles[i] > tile;
                for (int a = tiles[i]; a < tiles[i + 1]; a++) {
                    const int r = own[a];
                    seen[r]++;
                    for (int k = tiles[i + 2]; k < tiles[i + 3]; k++)
                        if (queries_own ? other[k] <= r : other[k] >= r) pairs[r].push_back(other[k] % op.Tn);
                }
            }
        };
        walk(pt.query_tiles, pt.query_order, pt.key_order, true, seen_q, by_query);
        walk(pt.key_tiles, pt.key_order, pt.query_order, false, seen_k, by_key);
        size_t twice = 0, differ = 0;
        for (size_t r = 0; r < n; r++) {
            const size_t r0 = r - r % op.Tn;
            for (int k = op.first_key[r]; k >= 1; k = op.prev_key[r0 + k]) chain_q[r].push_back(k);
            for (int t = op.first_query[r]; t >= 0; t = op.next_query[r0 + t]) chain_k[r].push_back(t);
            for (auto* v : {&by_query[r], &by_key[r], &chain_q[r], &chain_k[r]}) std::sort(v->begin(), v->end());
            twice += (seen_q[r] > 1) + (seen_k[r] > 1);
            differ += (by_query[r] != chain_q[r]) + (by_key[r] != chain_k[r]);
        }
        report("tiles", "pointer", strf("%s,tile=%d", op.shape.c_str(), tile), (double)(twice + differ + oversize), 0);
    }
}

// ------------------------------------------------------------------------------------------------
// AdamW, schedule, clipping, gradient norm.

static void adamw_checks(gc::Rng& rng) {
    const size_t n = 1001;
    const float lr = 3e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f;
    for (float wd : {0.1f, 0.0f}) {
        const int step = 3;
        const float gscale = 0.7f;
        std::vector<double> p(n), m(n), v(n), g(n);
        gc::fill_uniform(p.data(), n, rng, -1, 1);
        gc::fill_uniform(m.data(), n, rng, -0.1, 0.1);
        gc::fill_uniform(v.data(), n, rng, 0, 1e-2);
        gc::fill_uniform(g.data(), n, rng, -0.5, 0.5);
        // Hand-written reference, in double, with the float hyperparameters as given.
        std::vector<double> p_ref(n), m_ref(n), v_ref(n);
        const double B1 = b1, B2 = b2, LR = lr, EPS = eps, WD = wd, GS = gscale;
        for (size_t i = 0; i < n; i++) {
            const double gi = g[i] * GS;
            m_ref[i] = B1 * m[i] + (1 - B1) * gi;
            v_ref[i] = B2 * v[i] + (1 - B2) * gi * gi;
            const double mh = m_ref[i] / (1 - std::pow(B1, step)), vh = v_ref[i] / (1 - std::pow(B2, step));
            p_ref[i] = p[i] - LR * (mh / (std::sqrt(vh) + EPS) + WD * p[i]);
        }
        std::vector<double> pd = p, md = m, vd = v;
        adamw_update(pd.data(), md.data(), vd.data(), g.data(), n, lr, b1, b2, eps, wd, step, gscale);
        // Float inputs: the same values rounded to float; the reference recomputed from those.
        std::vector<float> pf(p.begin(), p.end()), mf(m.begin(), m.end()), vf(v.begin(), v.end()), gf(g.begin(), g.end());
        std::vector<double> pf_ref(n);
        for (size_t i = 0; i < n; i++) {
            const double gi = (double)gf[i] * GS;
            const double mi = B1 * mf[i] + (1 - B1) * gi, vi = B2 * vf[i] + (1 - B2) * gi * gi;
            const double mh = mi / (1 - std::pow(B1, step)), vh = vi / (1 - std::pow(B2, step));
            pf_ref[i] = pf[i] - LR * (mh / (std::sqrt(vh) + EPS) + WD * pf[i]);
        }
        std::vector<float> pf2 = pf, mf2 = mf, vf2 = vf;
        adamw_update(pf.data(), mf.data(), vf.data(), gf.data(), n, lr, b1, b2, eps, wd, step, gscale);
        // The update is ~lr; compare the change of the parameters, which is what the formula is about.
        std::vector<double> du(n), du_ref(n), duf(n), duf_ref(n);
        for (size_t i = 0; i < n; i++) {
            du[i] = pd[i] - p[i];
            du_ref[i] = p_ref[i] - p[i];
            duf[i] = (double)pf[i] - pf2[i];
            duf_ref[i] = pf_ref[i] - pf2[i];
        }
        const std::string shape = strf("n=%zu,step=%d,wd=%g,gscale=%g", n, step, wd, gscale);
        const double ed = std::max({gc::rel_error(du.data(), du_ref.data(), n), gc::rel_error(md.data(), m_ref.data(), n),
                                    gc::rel_error(vd.data(), v_ref.data(), n)});
        report("formula", "adamw.double", shape, ed, 1e-9);
        // Float: m and v to float rounding; the parameter to within one float ulp of the exact
        // update (the final rounding) plus 1e-5 of the step (float arithmetic in the step).
        // maxerr is in those units, so tol is 1.
        double ef = 0;
        for (size_t i = 0; i < n; i++) {
            const float r = (float)pf_ref[i];
            const double ulp = (double)std::nextafter(std::fabs(r), INFINITY) - std::fabs(r);
            ef = std::max(ef, std::fabs(duf[i] - duf_ref[i]) / (ulp + 1e-5 * std::fabs(duf_ref[i])));
        }
        report("formula", "adamw.float", shape, ef, 1.0);
        // Determinism of the float update across thread counts.
        size_t bad = 0;
        for (int threads : {1, 2}) {
            const int t0 = omp_get_max_threads();
            omp_set_num_threads(threads);
            std::vector<float> pa = pf2, ma = mf2, va = vf2;
            adamw_update(pa.data(), ma.data(), va.data(), gf.data(), n, lr, b1, b2, eps, wd, step, gscale);
            omp_set_num_threads(t0);
            bad += gc::count_bit_mismatch(pa.data(), pf.data(), n) + gc::count_bit_mismatch(ma.data(), mf.data(), n) +
                   gc::count_bit_mismatch(va.data(), vf.data(), n);
        }
        report("det", "adamw", shape, (double)bad, 0);
    }

    // lr_at: warmup ramp, peak, cosine midpoint, end = min_lr, and after the end.
    {
        const int warmup = 10, total = 110;
        const float mx = 6e-4f, mn = 6e-5f;
        struct Want { int step; double lr; };
        const Want want[] = {{0, mx / 10.0}, {4, mx * 5 / 10.0}, {9, mx}, {10, mx}, {60, (mx + mn) / 2.0},
                             {35, mn + 0.5 * (mx - mn) * (1 + std::cos(M_PI * 0.25))}, {110, mn}, {500, mn}};
        double err = 0;
        for (const auto& w : want) err = std::max(err, std::fabs((double)lr_at(w.step, warmup, total, mx, mn) - w.lr) / w.lr);
        // non-increasing after warmup, never below min_lr
        for (int st = warmup; st < total + 5; st++) {
            const float a = lr_at(st, warmup, total, mx, mn), b = lr_at(st + 1, warmup, total, mx, mn);
            if (b > a || b < mn) err = 1;
        }
        err = std::max(err, std::fabs((double)lr_at(50, 0, 100, mx, mn) - (mx + mn) / 2.0) / mx);  // no warmup
        err = std::max(err, std::fabs((double)lr_at(20, 10, 10, mx, mn) - mx) / mx);               // total <= warmup
        report("sched", "adamw.lr_at", strf("warmup=%d,total=%d", warmup, total), err, 1e-6);
    }
    // clip_scale
    {
        double err = 0;
        err = std::max(err, std::fabs(clip_scale(4.0, 1.0f) - 0.25));
        err = std::max(err, std::fabs(clip_scale(0.5, 1.0f) - 1.0));
        err = std::max(err, std::fabs(clip_scale(1.0, 1.0f) - 1.0));
        err = std::max(err, std::fabs(clip_scale(1e6, 0.0f) - 1.0));   // clipping off
        err = std::max(err, std::fabs(clip_scale(3.0, -1.0f) - 1.0));
        // the clipped gradient has norm max_norm
        std::vector<float> g(777);
        gc::fill_uniform(g.data(), g.size(), rng, -3, 3);
        const double norm = std::sqrt(grad_norm_squared(g.data(), g.size()));
        const float sc = clip_scale(norm, 2.0f);
        double s2 = 0;
        for (float x : g) s2 += (double)(x * sc) * (x * sc);
        err = std::max(err, std::fabs(std::sqrt(s2) - 2.0) / 2.0 * 1e-2);  // float scaling: 1e-6 rel -> 1e-8
        report("clip", "adamw.clip_scale", "", err, 1e-8);
    }
    // grad_norm_squared vs a plain sum, across chunk boundaries, and across thread counts.
    for (size_t n2 : {(size_t)1, (size_t)777, (size_t)(1 << 14), (size_t)50001}) {
        std::vector<float> g(n2);
        gc::fill_uniform(g.data(), n2, rng, -2, 2);
        long double plain = 0;
        for (float x : g) plain += (long double)x * x;
        const int t0 = omp_get_max_threads();
        omp_set_num_threads(1);
        const double a = grad_norm_squared(g.data(), n2);
        omp_set_num_threads(2);
        const double b = grad_norm_squared(g.data(), n2);
        omp_set_num_threads(t0);
        double err = std::fabs(a - (double)plain) / (double)plain;
        if (std::memcmp(&a, &b, sizeof a) != 0) err = 1;
        report("norm", "adamw.grad_norm_sq", strf("n=%zu", n2), err, 1e-12);
    }
}

// ------------------------------------------------------------------------------------------------
// Performance mode.

template <class F>
static double time_best(F f, double min_total = 0.3) {
    f();  // warm up
    double best = 1e30, total = 0;
    int reps = 0;
    while (reps < 3 || total < min_total) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::min(best, dt);
        total += dt;
        reps++;
    }
    return best;
}

static void perf() {
    std::printf("perf: float, %d OpenMP threads; best of >=3 runs; GFLOP/s counted as 2 flops per MAC\n",
                omp_get_max_threads());
    std::printf("%-10s %-36s %10s %10s %10s %10s\n", "op", "shape", "fwd ms", "fwd GF/s", "bwd ms", "bwd GF/s");
    gc::Rng rng(1);
    const int N = 2048;
    for (int C : {128, 256, 384, 512}) {
        const int OC = 4 * C;
        std::vector<float> x((size_t)N * C), w((size_t)OC * C), b(OC), y((size_t)N * OC), dy((size_t)N * OC),
            dx((size_t)N * C), dw((size_t)OC * C), db(OC);
        gc::fill_uniform(x.data(), x.size(), rng);
        gc::fill_uniform(w.data(), w.size(), rng);
        gc::fill_uniform(b.data(), b.size(), rng);
        gc::fill_uniform(dy.data(), dy.size(), rng);
        const double tf = time_best([&] { matmul_forward(y.data(), x.data(), w.data(), b.data(), N, C, OC); });
        const double tb = time_best([&] {
            matmul_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, C, OC);
        });
        const double fl = 2.0 * N * C * OC;
        std::printf("%-10s %-36s %10.2f %10.2f %10.2f %10.2f\n", "matmul", strf("N=%d,C=%d,OC=%d", N, C, OC).c_str(),
                    tf * 1e3, fl / tf * 1e-9, tb * 1e3, 2 * fl / tb * 1e-9);
    }
    const int B = 8, NT = 256, D = 64;
    for (bool causal : {true, false})
        for (int H : {2, 4, 8}) {
            AttentionOp op(B, NT, H, D, causal, Docs::None, 0);
            Bufs<float> in = alloc<float>(op.in), out = alloc<float>(op.out), g = alloc<float>(op.in);
            gc::fill_uniform(in[0].data(), in[0].size(), rng, -1.5, 1.5);
            Bufs<float> dout = alloc<float>(op.out);
            gc::fill_uniform(dout[0].data(), dout[0].size(), rng);
            op.forward<float>(in, out);
            const double tf = time_best([&] { op.forward<float>(in, out); });
            const double tb = time_best([&] { op.backward<float>(in, out, dout, g); });
            // The project's convention (docs/attention-spec.md#flops): 4*B*H*D*pairs forward, 2.5x that backward.
            const double pairs = causal ? NT * (NT + 1) / 2.0 : (double)NT * NT;
            const double fl = 4.0 * B * H * D * pairs;
            std::printf("%-10s %-36s %10.2f %10.2f %10.2f %10.2f\n", "attention",
                        strf("B=%d,N=%d,H=%d,D=%d,%s", B, NT, H, D, causal ? "causal" : "full").c_str(), tf * 1e3,
                        fl / tf * 1e-9, tb * 1e3, 2.5 * fl / tb * 1e-9);
        }
}

// ------------------------------------------------------------------------------------------------
// The case table.

struct Case {
    std::string op;
    std::function<void(gc::Rng&)> run;
};

template <typename Op>
static Case plain(Op op) {
    return {op.op, [op](gc::Rng& rng) mutable { run_case(op, rng); }};
}
static Case attn(AttentionOp op) {
    if (!op.segments.empty()) return {op.op, [op](gc::Rng& rng) mutable { dilated_extra(op, run_case(op, rng)); }};
    return {op.op, [op](gc::Rng& rng) mutable { attention_extra(op, run_case(op, rng)); }};
}
static Case sink(AttnSinkOp op) {
    return {op.op, [op](gc::Rng& rng) mutable { sink_extra(op, run_case(op, rng)); }};
}
static Case clf(ClassifierOp op) {
    return {op.op, [op](gc::Rng& rng) mutable { classifier_extra(op, run_case(op, rng)); }};
}

static Case ptr(PointerOp op) {
    return {op.op, [op](gc::Rng& rng) mutable { pointer_extra(op, run_case(op, rng)); }};
}

static std::vector<Case> make_table() {
    return {
        plain(EncoderOp(2, 5, 12, 11)),
        plain(EncoderOp(1, 7, 9, 4)),
        plain(LayernormOp(7, 12)),
        plain(LayernormOp(5, 33)),
        plain(LayernormOp(1, 64)),
        plain(MatmulOp(7, 12, 20, true)),
        plain(MatmulOp(7, 12, 20, false)),
        plain(MatmulOp(13, 17, 9, true)),
        plain(MatmulOp(1, 5, 3, false)),
        plain(MatmulOp(6, 32, 48, true)),
        plain(RopeOp(2, 5, 3, 8, 1000, 1)),
        plain(RopeOp(1, 7, 2, 16, 37, 3)),
        plain(RopeOp(2, 3, 1, 64, 0, 1)),
        plain(QkConvOp(2, 9, 5, 3, false)),
        plain(QkConvOp(2, 11, 4, 4, true)),
        plain(QkConvOp(3, 5, 3, 7, true)),
        {"qk_conv", qk_conv_checks},
        attn(AttentionOp(2, 9, 3, 8, true, Docs::None, 0)),
        attn(AttentionOp(2, 9, 3, 8, false, Docs::None, 0)),
        attn(AttentionOp(2, 17, 3, 16, true, Docs::Split, 1000)),
        attn(AttentionOp(2, 17, 3, 16, false, Docs::Split, 0)),
        attn(AttentionOp(2, 9, 3, 16, true, Docs::SplitEmpty, 1000)),
        attn(AttentionOp(2, 17, 3, 8, false, Docs::SplitEmpty, 5)),
        attn(AttentionOp(1, 5, 2, 64, true, Docs::None, 0)),
        attn(AttentionOp(1, 1, 1, 8, true, Docs::None, 0)),
        // Dilated: r not dividing w (8/3), heads not a multiple of r (5 vs 2, 3, 4), N not a
        // multiple of w (23), a segment longer than the sequence (40).
        attn(AttentionOp(2, 23, 5, 8, true, Docs::None, 0).dilated({8, 5, 40}, {3, 2, 4})),
        attn(AttentionOp(2, 23, 5, 8, false, Docs::None, 0).dilated({8, 5, 40}, {3, 2, 4})),
        attn(AttentionOp(1, 19, 3, 16, true, Docs::None, 0).dilated({6}, {6})),
        attn(AttentionOp(2, 17, 3, 8, true, Docs::Split, 0).dilated({4, 16}, {1, 2})),
        {"attention_dilated", dilated_special_cases},
        // The sink: dense and dilated, with documents, a row with no key (its O 0, its L the
        // sink's), a single token.
        sink(AttnSinkOp(AttentionOp(2, 9, 3, 8, true, Docs::None, 0))),
        sink(AttnSinkOp(AttentionOp(2, 17, 3, 16, true, Docs::Split, 1000))),
        sink(AttnSinkOp(AttentionOp(2, 9, 3, 16, true, Docs::SplitEmpty, 1000))),
        sink(AttnSinkOp(AttentionOp(1, 1, 2, 8, true, Docs::None, 0))),
        sink(AttnSinkOp(AttentionOp(2, 23, 5, 8, true, Docs::None, 0).dilated({8, 5, 40}, {3, 2, 4}))),
        plain(GeluOp(37)),
        plain(GeluOp(1000)),
        plain(ResidualOp(29)),
        clf(ClassifierOp(5, 9, 7)),
        clf(ClassifierOp(70, 12, 23)),
        ptr(PointerOp(2, 9, 4, 3)),
        ptr(PointerOp(1, 13, 8, 5)),
        ptr(PointerOp(3, 7, 3, 2)),
        {"adamw", adamw_checks},
    };
}

static int main_body(int argc, char** argv) {
    uint64_t seed = 1234;
    bool do_perf = false;
    const char* filter = nullptr;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) {
            char* end = nullptr;
            seed = std::strtoull(argv[++i], &end, 0);
            if (!end || *end) fatal("--seed wants an integer, got '%s'", argv[i]);
        } else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) {
            filter = argv[++i];
        } else if (!std::strcmp(argv[i], "--eps") && i + 1 < argc) {
            g_eps_override = std::atof(argv[++i]);
            if (!(g_eps_override > 0)) fatal("--eps wants a positive step, got '%s'", argv[i]);
        } else if (!std::strcmp(argv[i], "--perf")) {
            do_perf = true;
        } else {
            fatal("unknown argument '%s' (usage: %s [--seed N] [--filter OP] [--eps STEP] [--perf])", argv[i], argv[0]);
        }
    }
    if (do_perf) {
        perf();
        return 0;
    }
    std::printf("test_ops_cpu: seed %" PRIu64 " (rerun with --seed %" PRIu64 "), %d OpenMP threads\n", seed, seed,
                omp_get_max_threads());
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<Case> table = make_table();
    size_t matched = 0;
    for (size_t c = 0; c < table.size(); c++) {
        if (filter && table[c].op.find(filter) == std::string::npos) continue;
        matched++;
        gc::Rng rng(seed * 0x100000001B3ull + c);  // each case its own stream: --filter keeps inputs
        table[c].run(rng);
    }
    if (!matched) fatal("--filter '%s' matches no op of the table", filter);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("time %.1f s\n", dt);
    return check_report();
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
