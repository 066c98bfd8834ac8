// Helpers shared by the attention GPU tests (test_attention.cu, the harness; the two-sided tests):
// the error metrics and the "within 3x a plain bf16 implementation"
// comparison, a device buffer, bf16 conversions.
#pragma once
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "layers/cuda/common.cuh"
#include "tests/check.h"

static float bf(float x) { return __bfloat162float(__float2bfloat16(x)); }

// ------------------------------------------------------------------------------------------------
// Error metrics. Matching infinities (L = -inf rows) count as exact; anything else non-finite is
// an infinite error.

struct Err {
    double norm = 0, maxabs = 0;
};

// norm: ||x - ref|| / max(||ref||, 1e-2 sqrt(n)), i.e. relative, but against an RMS of at least
// 1e-2 (the inputs are unit normals and the gradients of order 0.1-1): where the exact gradient vanishes (one key: dS = 0) the fp32
// rounding of dP - delta must not count as an infinite relative error.
template <typename TA>
static Err error_vs(const TA* x, const double* ref, size_t n) {
    Err e;
    long double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const double a = (double)x[i], b = ref[i];
        if (!std::isfinite(a) || !std::isfinite(b)) {
            if (std::isinf(a) && a == b) continue;
            e.norm = e.maxabs = INFINITY;
            continue;
        }
        num += (long double)(a - b) * (a - b);
        den += (long double)b * b;
        e.maxabs = std::max(e.maxabs, std::fabs(a - b));
    }
    if (e.norm != INFINITY) e.norm = (double)std::sqrt(num / std::max(den, (long double)1e-4 * n + 1e-300L));
    return e;
}

static double max_finite_abs(const double* x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (std::isfinite(x[i])) m = std::max(m, std::fabs(x[i]));
    return m;
}

// Pass if the kernel's error is within 3x the plain bf16 implementation's plus floors: norm_floor
// relative, abs_floor * max(largest |ref|, 1e-3) absolute (fp32 rounding where the result is ~0).
static bool compare(const std::string& what, const Err& k, const Err& plain, const double* ref, size_t n,
                    double norm_floor, double abs_floor) {
    const double scale = max_finite_abs(ref, n);
    const double tn = 3 * plain.norm + norm_floor, ta = 3 * plain.maxabs + abs_floor * std::max(scale, 1e-3);
    const bool ok = k.norm <= tn && k.maxabs <= ta;  // NaN compares false: fails
    char buf[400];
    std::snprintf(buf, sizeof buf, "%-44s rel %.2e (plain bf16 %.2e, tol %.2e)  maxabs %.2e (plain %.2e, tol %.2e)",
                  what.c_str(), k.norm, plain.norm, tn, k.maxabs, plain.maxabs, ta);
    return check(ok, buf);
}

// Where the worst element is, to make a failure readable: (b, n, h, d) of a (B, N, H, D) view.
static void print_worst(const char* name, const float* x, const double* ref, int B, int N, int H, int D,
                        size_t stride_tok) {
    double worst = -1;
    size_t wi = 0;
    int nan = 0;
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++)
            for (int h = 0; h < H; h++)
                for (int d = 0; d < D; d++) {
                    const size_t i = ((size_t)b * N + n) * stride_tok + (size_t)h * D + d;
                    if (std::isnan(x[i])) nan++;
                    const double e = std::isnan(x[i]) ? INFINITY : std::fabs(x[i] - ref[i]);
                    if (e > worst) worst = e, wi = i;
                }
    const size_t tok = wi / stride_tok, rest = wi % stride_tok;
    std::printf("    %s: worst at (b=%zu, n=%zu, h=%zu, d=%zu): got %.6g want %.6g; %d NaN\n", name, tok / N, tok % N,
                rest / D, rest % D, x[wi], ref[wi], nan);
}

// ------------------------------------------------------------------------------------------------
// Buffers and conversions.

struct DevBuf {
    void* p = nullptr;
    explicit DevBuf(size_t bytes) { CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 16))); }
    ~DevBuf() { cudaFree(p); }
    template <typename T>
    T* as() const { return (T*)p; }
};

static std::vector<float> to_float(const std::vector<bf16>& x) {
    std::vector<float> y(x.size());
    for (size_t i = 0; i < x.size(); i++) y[i] = __bfloat162float(x[i]);
    return y;
}
static std::vector<double> to_double(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }
static std::vector<bf16> to_bf16(const std::vector<double>& x) {
    std::vector<bf16> y(x.size());
    for (size_t i = 0; i < x.size(); i++) y[i] = __float2bfloat16((float)x[i]);
    return y;
}
