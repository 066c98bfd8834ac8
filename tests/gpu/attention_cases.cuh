// What the two-sided GPU attention tests share (test_attention_naive.cu,
// test_attention_two_sided.cu) beyond tests/attention_cases.h (the cases, splits, seed): a random
// problem whose inputs are bf16 values (so a float64 reference sees exactly what a kernel sees),
// device buffers, and the float64 reference of a query block against all keys.
#pragma once
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>
#include "layers/attention.h"
#include "tests/attention_cases.h"
#include "tests/gpu/attention_test_common.cuh"

// One sequence: QKV (B, N, 3, H, D) and dO (B, N, H, D) of bf16 values held in double,
// positions 0..N-1, random documents.
struct AttnProblem {
    int B, N, H, D, HD, S;
    double scale;
    std::vector<double> qkv, dout;
    std::vector<int> pos, doc;
    AttnProblem(SplitMix64& rng, int B_, int N_, int H_, int D_) : B(B_), N(N_), H(H_), D(D_), HD(H_ * D_), S(3 * H_ * D_) {
        scale = 1.0 / std::sqrt((double)D);
        auto uni = [&] { return (double)(rng.next() >> 11) * 0x1.0p-53 * 2 - 1; };
        qkv.resize((size_t)B * N * S);
        dout.resize((size_t)B * N * HD);
        for (double& x : qkv) x = bf(1.5f * (float)uni());
        for (double& x : dout) x = bf((float)uni());
        pos.resize(N);
        doc.resize((size_t)B * N);
        for (int i = 0; i < N; i++) pos[i] = i;
        for (int b = 0; b < B; b++)
            for (int i = 0, start = 0; i < N; i++) {
                if (i > 0 && rng.below(23) == 0) start = i;
                doc[(size_t)b * N + i] = start;
            }
    }
    AttnDims dims() const { return AttnDims{B, H, D, N}; }
    // Rows [r0, r1) of a (B, N, width) array as their own (B, r1 - r0, width) array.
    template <typename V>
    std::vector<V> rows(const std::vector<V>& x, int r0, int r1, int width) const {
        std::vector<V> out;
        for (int b = 0; b < B; b++)
            out.insert(out.end(), x.begin() + ((size_t)b * N + r0) * width, x.begin() + ((size_t)b * N + r1) * width);
        return out;
    }
};

// Device buffers that live as long as the test case.
struct DevArena {
    std::vector<DevBuf*> bufs;
    ~DevArena() {
        for (DevBuf* d : bufs) delete d;
    }
    template <typename T>
    T* upload(const std::vector<T>& x) {
        bufs.push_back(new DevBuf(x.size() * sizeof(T)));
        CUDA_CHECK(cudaMemcpy(bufs.back()->p, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice));
        return bufs.back()->as<T>();
    }
    template <typename T>
    T* alloc(size_t n, unsigned char fill) {  // fill 0xff: NaN for float and bf16 (poison)
        bufs.push_back(new DevBuf(n * sizeof(T)));
        CUDA_CHECK(cudaMemset(bufs.back()->p, fill, n * sizeof(T)));
        return bufs.back()->as<T>();
    }
};

template <typename T>
inline std::vector<T> download(const T* d, size_t n) {
    std::vector<T> x(n);
    CUDA_CHECK(cudaMemcpy(x.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return x;
}
inline std::vector<double> as_double(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }
inline std::vector<double> as_double(const std::vector<bf16>& x) {
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); i++) y[i] = __bfloat162float(x[i]);
    return y;
}

// Relative error (error_vs: RMS floor, NaN fails) of got against ref must be below tol.
inline bool expect_close(const std::string& what, const std::vector<double>& got, const std::vector<double>& ref, double tol) {
    const Err e = error_vs(got.data(), ref.data(), ref.size());
    char buf[400];
    std::snprintf(buf, sizeof buf, "%-72s rel %.2e maxabs %.2e (tol %.0e)", what.c_str(), e.norm, e.maxabs, tol);
    return check(got.size() == ref.size() && e.norm <= tol, buf);
}

// The (B, n, S) strided rows' first `width` values of each row: the Q (or dQ) part.
inline std::vector<double> strided_part(const std::vector<double>& x, int S, int off, int width) {
    std::vector<double> out;
    for (size_t t = 0; t + S <= x.size(); t += S) out.insert(out.end(), x.begin() + t + off, x.begin() + t + off + width);
    return out;
}

// The float64 reference of queries [qa, qb) against all keys: O, L, and dQ, dK, dV of that
// query block (dQ (B, nq, H, D); dK, dV (B, N, H, D)).
struct AttnReference {
    std::vector<double> O, L, dq, dk, dv;
};
inline AttnReference attn_reference(const AttnProblem& P, const AttnCase& c, int qa, int qb, double scale) {
    const int nq = qb - qa, HD = P.HD, S = P.S;
    const AttnDims dm = P.dims();
    const std::vector<double> qrows = P.rows(P.qkv, qa, qb, S), g = P.rows(P.dout, qa, qb, HD);
    const std::vector<int> qpos(P.pos.begin() + qa, P.pos.begin() + qb), qdoc = P.rows(P.doc, qa, qb, 1);
    const AttnQueries<double> qs{qrows.data(), S, nq, qpos.data(), c.has_docs() ? qdoc.data() : nullptr};
    const AttnKeys<double> all{P.qkv.data() + HD, P.qkv.data() + 2 * HD, S, P.N, P.pos.data()};
    AttnReference r;
    r.O.resize((size_t)P.B * nq * HD);
    r.L.resize((size_t)P.B * P.H * nq);
    std::vector<double> delta(r.L.size()), dq(qrows.size(), 0.0), dkv(P.qkv.size(), 0.0);
    attention_forward(r.O.data(), r.L.data(), qs, all, c.pattern, dm, scale);
    attention_backward_preprocess(delta.data(), g.data(), r.O.data(), dm, nq);
    attention_backward_block(dq.data(), dkv.data() + HD, dkv.data() + 2 * HD, g.data(), r.L.data(), delta.data(), qs, all,
                             c.pattern, dm, scale);
    r.dq = strided_part(dq, S, 0, HD);
    r.dk = strided_part(dkv, S, HD, HD);
    r.dv = strided_part(dkv, S, 2 * HD, HD);
    return r;
}

// The merge tests' split: queries [qa, qb) of the sequence (the whole of it when R = 1, else a
// random block) and its keys cut into R uneven blocks, each side uploaded as its own buffer with
// its global positions (as a ring step would hold them), and the float64 reference of the block.
struct AttnSplit {
    int qa, qb, nq;
    std::vector<int> cut;
    const bf16* qrows;               // (B, nq, 3, H, D)
    AttnQueries<bf16> qs;
    std::vector<AttnKeys<bf16>> blocks;
    AttnReference ref;
};
inline AttnSplit attn_split(const AttnProblem& P, const AttnCase& c, const std::vector<bf16>& qkv_bf, int R,
                            SplitMix64& rng, DevArena& dev) {
    AttnSplit s;
    s.qa = R == 1 ? 0 : (int)rng.below(P.N / 2);
    s.qb = R == 1 ? P.N : s.qa + 1 + (int)rng.below(P.N - s.qa);
    s.nq = s.qb - s.qa;
    s.cut = attn_cuts(rng, P.N, R);
    s.ref = attn_reference(P, c, s.qa, s.qb, P.scale);
    s.qrows = dev.upload(P.rows(qkv_bf, s.qa, s.qb, P.S));
    s.qs = AttnQueries<bf16>{s.qrows, P.S, s.nq, dev.upload(std::vector<int>(P.pos.begin() + s.qa, P.pos.begin() + s.qb)),
                             c.has_docs() ? dev.upload(P.rows(P.doc, s.qa, s.qb, 1)) : nullptr, s.qa};
    for (int r = 0; r < R; r++) {
        const bf16* kr = dev.upload(P.rows(qkv_bf, s.cut[r], s.cut[r + 1], P.S));
        const int* kp = dev.upload(std::vector<int>(P.pos.begin() + s.cut[r], P.pos.begin() + s.cut[r + 1]));
        s.blocks.push_back(AttnKeys<bf16>{kr + P.HD, kr + 2 * P.HD, P.S, s.cut[r + 1] - s.cut[r], kp, s.cut[r]});
    }
    return s;
}

// main() of a two-sided GPU attention test: every case at D = 64 and 128 (--small: D = 64 only,
// for compute-sanitizer), a fresh seed unless one is given, then the summary line.
template <typename RunCase>
int attn_test_main(int argc, char** argv, RunCase run_case) {
    return guarded_main([&] {
        SplitMix64 rng(attn_test_seed(argc, argv));
        bool small = false;
        for (int i = 1; i < argc; i++) small |= !std::strcmp(argv[i], "--small");
        for (int D : {64, 128})
            if (!small || D == 64)
                for (const AttnCase& c : attn_cases()) run_case(c, D, rng);
        return check_report();
    });
}
