// cuDNN SDPA backend (layers/cuda/attention_cudnn.cuh) against the CPU reference
// (layers/attention.h, in double on the bf16-rounded inputs): O, L, dQ, dK, dV, causal and not,
// D = 64 and 128, N not a power of two, Q/K/V read in place from a (B, N, 3, H, D) buffer and
// dQ/dK/dV written into one. Every output is poisoned with NaN before each run.
//
// Tolerance, flash-attention style: the cuDNN result's error must be within 3x the error of a
// plain bf16 implementation computed here on the CPU (scores and sums in fp32, P and dS rounded
// to bf16 before they meet V / K / Q, outputs rounded to bf16), plus a small floor for the fp32
// L. Errors are ||x - ref|| / ||ref||.
//
//   build/test_attention_cudnn [--seed N] [--quick]   (--quick: the N = 257 cases only)
#define ATTN_CUDNN_CHECK_POS
#include <cudnn.h>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>
#include "layers/attention.h"
#include "layers/cuda/attention_cudnn.h"
#include "tests/gradcheck.h"

namespace {

int g_passed = 0, g_failed = 0;

void report(bool ok, const std::string& what) {
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
    (ok ? g_passed : g_failed)++;
}

float bf16_round(float x) { return __bfloat162float(__float2bfloat16(x)); }

struct Case {
    int B, N, H, D;
    bool causal;
    float scale_mult;  // scale = scale_mult / sqrt(D)
    int pos_offset;    // positions pos_offset .. pos_offset + N - 1
};

// Plain bf16 attention on the CPU: what a straightforward bf16 kernel computes. qkv holds the
// bf16 values as float, (B, N, 3, H, D).
void plain_forward(const Case& c, float scale, const float* qkv, float* out, float* lse) {
    const int B = c.B, N = c.N, H = c.H, D = c.D, stride = 3 * H * D;
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            std::vector<float> sc(N), acc(D);
            for (int i = 0; i < N; i++) {
                const float* qi = qkv + ((size_t)b * N + i) * stride + h * D;
                const int jend = c.causal ? i + 1 : N;
                float m = -INFINITY;
                for (int j = 0; j < jend; j++) {
                    const float* kj = qkv + ((size_t)b * N + j) * stride + H * D + h * D;
                    float dot = 0;
                    for (int d = 0; d < D; d++) dot += qi[d] * kj[d];
                    sc[j] = dot * scale;
                    m = std::max(m, sc[j]);
                }
                float l = 0;
                for (int j = 0; j < jend; j++) l += std::exp(sc[j] - m);
                std::fill(acc.begin(), acc.end(), 0.f);
                for (int j = 0; j < jend; j++) {
                    const float p = bf16_round(std::exp(sc[j] - m) / l);
                    const float* vj = qkv + ((size_t)b * N + j) * stride + 2 * H * D + h * D;
                    for (int d = 0; d < D; d++) acc[d] += p * vj[d];
                }
                float* oi = out + (((size_t)b * N + i) * H + h) * D;
                for (int d = 0; d < D; d++) oi[d] = bf16_round(acc[d]);
                lse[((size_t)b * H + h) * N + i] = m + std::log(l);
            }
        }
    }
}

// Plain bf16 flash backward from the plain forward's bf16 O and fp32 L. dq/dk/dv (B, N, H, D).
void plain_backward(const Case& c, float scale, const float* qkv, const float* dout, const float* out,
                    const float* lse, float* dq, float* dk, float* dv) {
    const int B = c.B, N = c.N, H = c.H, D = c.D, stride = 3 * H * D;
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            std::vector<float> dk_acc((size_t)N * D, 0.f), dv_acc((size_t)N * D, 0.f), dq_acc(D);
            for (int i = 0; i < N; i++) {
                const float* qi = qkv + ((size_t)b * N + i) * stride + h * D;
                const size_t orow = (((size_t)b * N + i) * H + h) * D;
                const float* doi = dout + orow;
                float delta = 0;
                for (int d = 0; d < D; d++) delta += doi[d] * out[orow + d];
                const float li = lse[((size_t)b * H + h) * N + i];
                std::fill(dq_acc.begin(), dq_acc.end(), 0.f);
                const int jend = c.causal ? i + 1 : N;
                for (int j = 0; j < jend; j++) {
                    const float* kj = qkv + ((size_t)b * N + j) * stride + H * D + h * D;
                    const float* vj = kj + H * D;
                    float dot = 0, dp = 0;
                    for (int d = 0; d < D; d++) {
                        dot += qi[d] * kj[d];
                        dp += doi[d] * vj[d];
                    }
                    const float p = std::exp(dot * scale - li);
                    const float pb = bf16_round(p);
                    const float ds = bf16_round(scale * p * (dp - delta));
                    float* dvj = &dv_acc[(size_t)j * D];
                    float* dkj = &dk_acc[(size_t)j * D];
                    for (int d = 0; d < D; d++) {
                        dvj[d] += pb * doi[d];
                        dq_acc[d] += ds * kj[d];
                        dkj[d] += ds * qi[d];
                    }
                }
                for (int d = 0; d < D; d++) dq[orow + d] = bf16_round(dq_acc[d]);
            }
            for (int j = 0; j < N; j++) {
                const size_t orow = (((size_t)b * N + j) * H + h) * D;
                for (int d = 0; d < D; d++) {
                    dk[orow + d] = bf16_round(dk_acc[(size_t)j * D + d]);
                    dv[orow + d] = bf16_round(dv_acc[(size_t)j * D + d]);
                }
            }
        }
    }
}

// Part p (0: q, 1: k, 2: v) of a (B, N, 3, H, D) buffer, as (B, N, H, D) doubles.
template <typename T, typename F>
std::vector<double> gather_part(const T* buf, const Case& c, int p, F to_double) {
    const size_t rows = (size_t)c.B * c.N, hd = (size_t)c.H * c.D;
    std::vector<double> r(rows * hd);
    for (size_t row = 0; row < rows; row++)
        for (size_t e = 0; e < hd; e++) r[row * hd + e] = to_double(buf[row * 3 * hd + p * hd + e]);
    return r;
}

// err(gpu) <= 3 err(plain bf16) + floor, both against the double reference.
void compare(const std::string& what, const std::vector<double>& gpu, const std::vector<double>& plain,
             const std::vector<double>& ref, double floor) {
    const double eg = gc::norm_rel_error(gpu.data(), ref.data(), ref.size());
    const double ep = gc::norm_rel_error(plain.data(), ref.data(), ref.size());
    const bool ok = eg <= 3 * ep + floor;
    char buf[256];
    std::snprintf(buf, sizeof(buf), "%s: err %.3e (plain bf16 %.3e, ratio %.2f, limit %.3e)", what.c_str(), eg, ep,
                  ep > 0 ? eg / ep : 0.0, 3 * ep + floor);
    report(ok, buf);
}

void run_case(const Case& c, gc::Rng& rng) {
    const int B = c.B, N = c.N, H = c.H, D = c.D, HD = H * D;
    const AttnShape s{B, N, H, D, 3 * HD};
    const AttnPattern pattern{AttnKind::Dense, c.causal};
    const float scale = c.scale_mult / std::sqrt((float)D);
    char tag[128];
    std::snprintf(tag, sizeof(tag), "B=%d N=%d H=%d D=%d causal=%d scale=%.4f pos0=%d", B, N, H, D, (int)c.causal,
                  scale, c.pos_offset);
    std::string why;
    if (!attention_cudnn_supports(pattern, s, false, &why)) {
        report(false, std::string(tag) + ": refused: " + why);
        return;
    }

    const size_t nqkv = (size_t)B * N * 3 * HD, no = (size_t)B * N * HD, nl = (size_t)B * H * N;
    // Scores scale * q.k with q, k ~ N(0, 1) have standard deviation scale_mult: a softmax that
    // is neither flat nor one-hot.
    std::vector<bf16> h_qkv(nqkv), h_do(no);
    std::vector<float> f_qkv(nqkv), f_do(no);
    for (size_t i = 0; i < nqkv; i++) {
        h_qkv[i] = __float2bfloat16((float)rng.normal());
        f_qkv[i] = __bfloat162float(h_qkv[i]);
    }
    for (size_t i = 0; i < no; i++) {
        h_do[i] = __float2bfloat16((float)rng.normal());
        f_do[i] = __bfloat162float(h_do[i]);
    }
    std::vector<int> h_pos(N);
    for (int i = 0; i < N; i++) h_pos[i] = c.pos_offset + i;

    bf16 *d_qkv, *d_o, *d_o2, *d_do, *d_dqkv;
    float *d_lse, *d_lse2, *d_ws;
    int* d_pos;
    const size_t ws_bytes = attention_cudnn_workspace_bytes(s);
    CUDA_CHECK(cudaMalloc(&d_qkv, nqkv * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&d_dqkv, nqkv * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&d_o, no * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&d_o2, no * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&d_do, no * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&d_lse, nl * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_lse2, nl * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_ws, ws_bytes));
    CUDA_CHECK(cudaMalloc(&d_pos, N * sizeof(int)));
    CUDA_CHECK(cudaMemcpy(d_qkv, h_qkv.data(), nqkv * sizeof(bf16), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_do, h_do.data(), no * sizeof(bf16), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_pos, h_pos.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    // All-ones bytes are NaN in bf16 and fp32: an element the kernel skips stays NaN.
    CUDA_CHECK(cudaMemset(d_o, 0xFF, no * sizeof(bf16)));
    CUDA_CHECK(cudaMemset(d_o2, 0xFF, no * sizeof(bf16)));
    CUDA_CHECK(cudaMemset(d_lse, 0xFF, nl * sizeof(float)));
    CUDA_CHECK(cudaMemset(d_lse2, 0xFF, nl * sizeof(float)));
    CUDA_CHECK(cudaMemset(d_dqkv, 0xFF, nqkv * sizeof(bf16)));
    CUDA_CHECK(cudaMemset(d_ws, 0xFF, ws_bytes));  // the workspace needs no initialising

    attention_forward_cudnn(d_o, d_lse, d_qkv, d_qkv + HD, d_qkv + 2 * HD, d_pos, nullptr, pattern, s, scale, 0);
    attention_forward_cudnn(d_o2, d_lse2, d_qkv, d_qkv + HD, d_qkv + 2 * HD, d_pos, nullptr, pattern, s, scale, 0);
    attention_backward_cudnn(d_dqkv, d_dqkv + HD, d_dqkv + 2 * HD, d_do, d_o, d_lse, d_qkv, d_qkv + HD,
                             d_qkv + 2 * HD, d_pos, nullptr, pattern, s, scale, d_ws, 0);
    CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<bf16> g_o(no), g_o2(no), g_dqkv(nqkv);
    std::vector<float> g_lse(nl), g_lse2(nl);
    CUDA_CHECK(cudaMemcpy(g_o.data(), d_o, no * sizeof(bf16), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(g_o2.data(), d_o2, no * sizeof(bf16), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(g_lse.data(), d_lse, nl * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(g_lse2.data(), d_lse2, nl * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(g_dqkv.data(), d_dqkv, nqkv * sizeof(bf16), cudaMemcpyDeviceToHost));
    for (void* p : {(void*)d_qkv, (void*)d_dqkv, (void*)d_o, (void*)d_o2, (void*)d_do, (void*)d_lse, (void*)d_lse2,
                    (void*)d_ws, (void*)d_pos})
        CUDA_CHECK(cudaFree(p));

    // Reference in double on the same bf16 values.
    std::vector<double> r_qkv(f_qkv.begin(), f_qkv.end()), r_do(f_do.begin(), f_do.end());
    std::vector<double> r_o(no), r_lse(nl), r_dqkv(nqkv, 0.0);
    attention_forward<double>(r_o.data(), r_lse.data(), r_qkv.data(), r_qkv.data() + HD, r_qkv.data() + 2 * HD,
                              h_pos.data(), nullptr, pattern, s, (double)scale);
    attention_backward<double>(r_dqkv.data(), r_dqkv.data() + HD, r_dqkv.data() + 2 * HD, r_do.data(), r_o.data(),
                               r_lse.data(), r_qkv.data(), r_qkv.data() + HD, r_qkv.data() + 2 * HD, h_pos.data(),
                               nullptr, pattern, s, (double)scale);

    std::vector<float> p_o(no), p_lse(nl), p_dq(no), p_dk(no), p_dv(no);
    plain_forward(c, scale, f_qkv.data(), p_o.data(), p_lse.data());
    plain_backward(c, scale, f_qkv.data(), f_do.data(), p_o.data(), p_lse.data(), p_dq.data(), p_dk.data(),
                   p_dv.data());

    auto bf = [](bf16 x) { return (double)__bfloat162float(x); };
    auto fl = [](float x) { return (double)x; };
    auto to_d = [](const auto& v) { return std::vector<double>(v.begin(), v.end()); };
    std::vector<double> go(no);
    for (size_t i = 0; i < no; i++) go[i] = bf(g_o[i]);
    const std::string t = tag;
    compare("fwd O  " + t, go, to_d(p_o), r_o, 1e-4);
    compare("fwd L  " + t, to_d(g_lse), to_d(p_lse), r_lse, 1e-5);
    report(gc::count_bit_mismatch(g_o.data(), g_o2.data(), no) == 0 &&
               gc::count_bit_mismatch(g_lse.data(), g_lse2.data(), nl) == 0,
           "fwd repeat (cached plan) bit-identical " + t);
    const char* names[3] = {"bwd dQ ", "bwd dK ", "bwd dV "};
    const std::vector<float>* plains[3] = {&p_dq, &p_dk, &p_dv};
    for (int part = 0; part < 3; part++) {
        compare(names[part] + t, gather_part(g_dqkv.data(), c, part, bf), to_d(*plains[part]),
                gather_part(r_dqkv.data(), c, part, fl), 1e-4);
    }
    (void)fl;
}

// The comparison must be able to fail: the non-causal result of a causal case does.
void check_comparison_can_fail(gc::Rng& rng) {
    const Case c{1, 129, 2, 64, true, 1.0f, 0};
    const AttnShape s{c.B, c.N, c.H, c.D, 3 * c.H * c.D};
    const size_t nqkv = (size_t)c.N * 3 * c.H * c.D, no = (size_t)c.N * c.H * c.D, nl = (size_t)c.H * c.N;
    std::vector<double> qkv(nqkv), o_causal(no), o_full(no), lse(nl);
    std::vector<int> pos(c.N);
    for (int i = 0; i < c.N; i++) pos[i] = i;
    for (auto& x : qkv) x = bf16_round((float)rng.normal());
    const int HD = c.H * c.D;
    attention_forward<double>(o_causal.data(), lse.data(), qkv.data(), qkv.data() + HD, qkv.data() + 2 * HD,
                              pos.data(), nullptr, AttnPattern{AttnKind::Dense, true}, s, 0.125);
    attention_forward<double>(o_full.data(), lse.data(), qkv.data(), qkv.data() + HD, qkv.data() + 2 * HD, pos.data(),
                              nullptr, AttnPattern{AttnKind::Dense, false}, s, 0.125);
    std::vector<float> qf(qkv.begin(), qkv.end()), p_o(no), p_lse(nl);
    plain_forward(c, 0.125f, qf.data(), p_o.data(), p_lse.data());
    const double eg = gc::norm_rel_error(o_full.data(), o_causal.data(), no);
    const double ep = gc::norm_rel_error(p_o.data(), o_causal.data(), no);
    char buf[160];
    std::snprintf(buf, sizeof(buf), "comparison rejects a wrong mask: err %.3e > limit %.3e", eg, 3 * ep + 1e-4);
    report(eg > 3 * ep + 1e-4, buf);
}

void check_supports() {
    // Each verdict is taken before its message is built: the reason lands in `why`.
    std::string why;
    const AttnShape ok{2, 1000, 3, 128, 3 * 3 * 128};
    bool good = attention_cudnn_supports(AttnPattern{AttnKind::Dense, true}, ok, false, &why) && why.empty();
    report(good, "supports dense causal D=128");
    AttnShape d96 = ok;
    d96.D = 96;
    d96.stride = 3 * 3 * 96;
    good = !attention_cudnn_supports(AttnPattern{AttnKind::Dense, true}, d96, false, &why) && !why.empty();
    report(good, "refuses D=96: " + why);
    why.clear();
    good = !attention_cudnn_supports(AttnPattern{AttnKind::Dense, true}, ok, true, &why) && !why.empty();
    report(good, "refuses a document mask: " + why);
    AttnShape odd = ok;
    odd.stride = 3 * 3 * 128 + 4;
    why.clear();
    good = !attention_cudnn_supports(AttnPattern{AttnKind::Dense, false}, odd, false, &why) && !why.empty();
    report(good, "refuses a row stride that breaks 16-byte alignment: " + why);
}

}  // namespace

static int main_body(int argc, char** argv) {
    uint64_t seed = (uint64_t)std::chrono::system_clock::now().time_since_epoch().count() % 1000000;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--quick")) quick = true;
        else fatal("test_attention_cudnn: unknown argument %s (use --seed N, --quick)", argv[i]);
    }
    int ndev = 0;
    const cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        std::printf("SKIP test_attention_cudnn: no CUDA device (%s)\n",
                    e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        std::printf("0 passed, 0 failed\n");
        return 0;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("test_attention_cudnn: %s, cuDNN %zu (built with %d), seed %llu\n", prop.name, cudnnGetVersion(),
                CUDNN_VERSION, (unsigned long long)seed);
    gc::Rng rng(seed);

    check_supports();
    check_comparison_can_fail(rng);
    std::vector<Case> cases;
    for (int D : {64, 128})
        for (bool causal : {true, false}) {
            cases.push_back({2, 257, 3, D, causal, 2.0f, 4096});  // non-default scale, positions offset
            if (!quick) cases.push_back({2, 1000, 3, D, causal, 1.0f, 0});
        }
    for (const Case& c : cases) run_case(c, rng);

    std::printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
