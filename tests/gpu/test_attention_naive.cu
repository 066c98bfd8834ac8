// The plain CUDA attention kernel (layers/cuda/attention_naive.cuh) against the CPU reference
// in float64 (layers/attention.h) on fresh random inputs, every pattern, causal or not, with
// and without documents, D = 64 and 128, odd sizes, outputs poisoned with NaN first:
//  - Write mode, fp32 and bf16 outputs;
//  - Merge mode: a query block anywhere in the sequence against its keys split into R = 1..5
//    uneven blocks, merged in fp32, equals the reference rows;
//  - the backward in pieces (preprocess once, one step per key block) equals the reference's
//    dQ, dK, dV for that query block.
// The inputs are bf16 values, so the reference sees exactly what the kernel sees, and the only
// error is the kernel's fp32 arithmetic (bf16 output: plus one bf16 rounding).
// Usage: test_attention_naive [SEED]. Prints PASS/FAIL lines and "N passed, M failed".
#include <chrono>
#include <cstdlib>
#include "data/rng.h"
#include "layers/cuda/attention_naive.cuh"
#include "tests/gpu/attention_test_common.cuh"

struct Case {
    std::string name;
    AttnPattern pattern;
    bool docs;
};

static std::vector<Case> cases() {
    std::vector<Case> out;
    for (bool causal : {true, false}) {
        const std::string c = causal ? "causal" : "non-causal";
        AttnPattern dense;
        dense.causal = causal;
        AttnPattern dil;
        dil.kind = AttnKind::Dilated;
        dil.causal = causal;
        dil.segments = {32, 80, 4096};
        dil.dilations = {1, 2, 4};
        AttnPattern dil2 = dil;  // no branch of dilation 1: rows with no key at all
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

template <typename T>
static T* upload(const std::vector<T>& x, std::vector<DevBuf*>& keep) {
    DevBuf* d = new DevBuf(x.size() * sizeof(T));
    CUDA_CHECK(cudaMemcpy(d->p, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice));
    keep.push_back(d);
    return d->as<T>();
}
template <typename T>
static std::vector<T> download(const T* d, size_t n) {
    std::vector<T> x(n);
    CUDA_CHECK(cudaMemcpy(x.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return x;
}
static std::vector<double> as_double(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

// Relative error with an RMS floor (error_vs) must be below tol, and no NaN may remain.
static void expect(const std::string& what, const std::vector<double>& got, const std::vector<double>& ref, double tol) {
    const Err e = error_vs(got.data(), ref.data(), ref.size());
    char buf[300];
    std::snprintf(buf, sizeof buf, "%-64s rel %.2e maxabs %.2e (tol %.0e)", what.c_str(), e.norm, e.maxabs, tol);
    check(e.norm <= tol, buf);
}

static void run_case(const Case& c, int D, SplitMix64& rng) {
    const int B = 2, N = 203, H = 3, HD = H * D, S = 3 * HD;
    const double scale = 1.0 / std::sqrt((double)D);
    auto uni = [&] { return (double)(rng.next() >> 11) * 0x1.0p-53 * 2 - 1; };
    std::vector<double> qkv((size_t)B * N * S), dout((size_t)B * N * HD);
    for (double& x : qkv) x = bf(1.5f * (float)uni());
    for (double& x : dout) x = bf((float)uni());
    std::vector<int> pos(N), doc((size_t)B * N);
    for (int i = 0; i < N; i++) pos[i] = i;
    for (int b = 0; b < B; b++)
        for (int i = 0, start = 0; i < N; i++) {
            if (i > 0 && rng.below(23) == 0) start = i;
            doc[(size_t)b * N + i] = start;
        }
    const int* docs = c.docs ? doc.data() : nullptr;
    const AttnDims dm{B, H, D, N};
    const std::string tag = c.name + " D" + std::to_string(D);

    // Rows [r0, r1) of (B, N, width) as their own (B, r1 - r0, width) buffer.
    auto rows = [&](const auto& x, int r0, int r1, int width) {
        std::remove_const_t<std::remove_reference_t<decltype(x)>> out;
        for (int b = 0; b < B; b++)
            out.insert(out.end(), x.begin() + ((size_t)b * N + r0) * width, x.begin() + ((size_t)b * N + r1) * width);
        return out;
    };
    std::vector<DevBuf*> keep;
    const std::vector<bf16> qkv_bf = to_bf16(qkv), dout_bf = to_bf16(dout);

    // 1. Write mode over the whole sequence.
    {
        std::vector<double> O((size_t)B * N * HD), L((size_t)B * H * N);
        const AttnQueries<double> qs{qkv.data(), S, N, pos.data(), docs};
        const AttnKeys<double> ks{qkv.data() + HD, qkv.data() + 2 * HD, S, N, pos.data()};
        attention_forward(O.data(), L.data(), qs, ks, c.pattern, dm, scale);
        const bf16* dqkv = upload(qkv_bf, keep);
        const int* dpos = upload(pos, keep);
        const int* ddoc = c.docs ? upload(doc, keep) : nullptr;
        const AttnQueries<bf16> gq{dqkv, S, N, dpos, ddoc};
        const AttnKeys<bf16> gk{dqkv + HD, dqkv + 2 * HD, S, N, dpos};
        DevBuf of(O.size() * 4), ob(O.size() * 2), lf(L.size() * 4);
        CUDA_CHECK(cudaMemset(of.p, 0xff, O.size() * 4));  // NaN: an unwritten element fails
        CUDA_CHECK(cudaMemset(ob.p, 0xff, O.size() * 2));
        CUDA_CHECK(cudaMemset(lf.p, 0xff, L.size() * 4));
        attention_forward_naive_cuda(of.as<float>(), lf.as<float>(), gq, gk, c.pattern, dm, (float)scale, AttnOutput::Write, 0);
        expect("write fp32 O: " + tag, as_double(download(of.as<float>(), O.size())), O, 2e-6);
        expect("write L: " + tag, as_double(download(lf.as<float>(), L.size())), L, 2e-6);
        attention_forward_naive_cuda(ob.as<bf16>(), lf.as<float>(), gq, gk, c.pattern, dm, (float)scale, AttnOutput::Write, 0);
        expect("write bf16 O: " + tag, as_double(to_float(download(ob.as<bf16>(), O.size()))), O, 5e-3);
    }

    // 2. Merge and the pieced backward: queries [qa, qb) against R key blocks.
    double worst_f = 0, worst_b = 0;
    for (int R = 1; R <= 5; R++) {
        const int qa = R == 1 ? 0 : (int)rng.below(N / 2), qb = R == 1 ? N : qa + 1 + (int)rng.below(N - qa), nq = qb - qa;
        std::vector<int> cut = {0};
        for (int r = 1; r < R; r++) cut.push_back(std::max(cut.back() + 1, (int)(N * r / R + rng.below(9)) - 4));
        cut.push_back(N);
        // The reference: these queries against all keys, in float64.
        const std::vector<double> qrows = rows(qkv, qa, qb, S), g = rows(dout, qa, qb, HD);
        const std::vector<int> qpos(pos.begin() + qa, pos.begin() + qb), qdoc = rows(doc, qa, qb, 1);
        const AttnQueries<double> qs{qrows.data(), S, nq, qpos.data(), c.docs ? qdoc.data() : nullptr};
        const AttnKeys<double> all{qkv.data() + HD, qkv.data() + 2 * HD, S, N, pos.data()};
        std::vector<double> O((size_t)B * nq * HD), L((size_t)B * H * nq), delta(L.size());
        attention_forward(O.data(), L.data(), qs, all, c.pattern, dm, scale);
        attention_backward_preprocess(delta.data(), g.data(), O.data(), dm, nq);
        std::vector<double> dq(qrows.size(), 0.0), dkv(qkv.size(), 0.0);
        attention_backward_block(dq.data(), dkv.data() + HD, dkv.data() + 2 * HD, g.data(), L.data(), delta.data(), qs, all,
                                 c.pattern, dm, scale);

        // The GPU: merge R blocks into fp32 O, L; then the backward block by block.
        const bf16* gq_rows = upload(to_bf16(qrows), keep);
        const int* gqpos = upload(qpos, keep);
        const int* gqdoc = c.docs ? upload(qdoc, keep) : nullptr;
        const AttnQueries<bf16> gq{gq_rows, S, nq, gqpos, gqdoc};
        DevBuf Om(O.size() * 4), Lm(L.size() * 4), dl(L.size() * 4), dqg(O.size() * 4), dkg((size_t)B * N * HD * 4),
            dvg((size_t)B * N * HD * 4);
        attention_partial_init_naive(Om.as<float>(), Lm.as<float>(), dm, nq, 0);
        std::vector<AttnKeys<bf16>> blocks;
        for (int r = 0; r < R; r++) {
            const bf16* kr = upload(rows(qkv_bf, cut[r], cut[r + 1], S), keep);
            const int* kp = upload(std::vector<int>(pos.begin() + cut[r], pos.begin() + cut[r + 1]), keep);
            blocks.push_back(AttnKeys<bf16>{kr + HD, kr + 2 * HD, S, cut[r + 1] - cut[r], kp});
            attention_forward_naive_cuda(Om.as<float>(), Lm.as<float>(), gq, blocks.back(), c.pattern, dm, (float)scale,
                                         AttnOutput::Merge, 0);
        }
        const std::vector<double> Og = as_double(download(Om.as<float>(), O.size())), Lg = as_double(download(Lm.as<float>(), L.size()));
        worst_f = std::max({worst_f, error_vs(Og.data(), O.data(), O.size()).norm, error_vs(Lg.data(), L.data(), L.size()).norm});

        const bf16* gg = upload(to_bf16(g), keep);
        attention_backward_preprocess_naive_cuda(dl.as<float>(), gg, Om.as<float>(), dm, nq, 0);
        CUDA_CHECK(cudaMemset(dqg.p, 0, O.size() * 4));
        CUDA_CHECK(cudaMemset(dkg.p, 0, (size_t)B * N * HD * 4));
        CUDA_CHECK(cudaMemset(dvg.p, 0, (size_t)B * N * HD * 4));
        // Each block's dK, dV go to its own (B, n_r, H, D) buffer, as a ring step's would.
        std::vector<double> dk_all(dkv.size(), 0.0);
        for (int r = 0; r < R; r++) {
            const int nk = blocks[r].n;
            DevBuf dk((size_t)B * nk * HD * 4), dv((size_t)B * nk * HD * 4);
            CUDA_CHECK(cudaMemset(dk.p, 0, (size_t)B * nk * HD * 4));
            CUDA_CHECK(cudaMemset(dv.p, 0, (size_t)B * nk * HD * 4));
            attention_backward_block_naive_cuda(dqg.as<float>(), dk.as<float>(), dv.as<float>(), gg, Lm.as<float>(),
                                                dl.as<float>(), gq, blocks[r], c.pattern, dm, (float)scale, 0);
            const std::vector<float> hk = download(dk.as<float>(), (size_t)B * nk * HD), hv = download(dv.as<float>(), hk.size());
            for (int b = 0; b < B; b++)
                for (int j = 0; j < nk; j++)
                    for (int x = 0; x < HD; x++) {
                        dk_all[((size_t)b * N + cut[r] + j) * S + HD + x] = hk[((size_t)b * nk + j) * HD + x];
                        dk_all[((size_t)b * N + cut[r] + j) * S + 2 * HD + x] = hv[((size_t)b * nk + j) * HD + x];
                    }
        }
        const std::vector<float> hq = download(dqg.as<float>(), O.size());
        std::vector<double> dq_ref_q(O.size());  // the Q part of the strided reference dq
        for (size_t t = 0; t < (size_t)B * nq; t++)
            for (int x = 0; x < HD; x++) dq_ref_q[t * HD + x] = dq[t * S + x];
        worst_b = std::max({worst_b, error_vs(hq.data(), dq_ref_q.data(), hq.size()).norm,
                            error_vs(dk_all.data(), dkv.data(), dkv.size()).norm});
    }
    char buf[300];
    std::snprintf(buf, sizeof buf, "merge of R = 1..5 key blocks (fp32): %-40s rel %.2e (tol 2e-6)", tag.c_str(), worst_f);
    check(worst_f <= 2e-6, buf);
    std::snprintf(buf, sizeof buf, "pieced backward, R = 1..5: %-50s rel %.2e (tol 1e-5)", tag.c_str(), worst_b);
    check(worst_b <= 1e-5, buf);
    for (DevBuf* d : keep) delete d;
}

int main(int argc, char** argv) {
    return guarded_main([&] {
        const uint64_t seed = argc > 1 ? std::strtoull(argv[1], nullptr, 10)
                                       : (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count();
        std::printf("seed %llu (rerun with: test_attention_naive %llu)\n", (unsigned long long)seed, (unsigned long long)seed);
        SplitMix64 rng(seed);
        for (int D : {64, 128})
            for (const Case& c : cases()) run_case(c, D, rng);
        std::printf("%d passed, %d failed\n", g_pass, g_fail);
        return g_fail ? 1 : 0;
    });
}
