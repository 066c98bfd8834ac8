// Gradient-check helpers shared by the op harness (tests/test_ops_cpu.cpp) and the whole-model
// check (tests/test_model_cpu.cpp). Header-only, namespace gc, no dependency on layers/.
//
//   gc::Rng rng(seed);                 xoshiro256** seeded through splitmix64: rng.next_u64(),
//                                      rng.uniform() in [0,1), rng.uniform(lo, hi),
//                                      rng.randint(lo, hi) (both ends included), rng.normal().
//   gc::fill_uniform(x, n, rng, lo, hi)  fill any float/double buffer with U(lo, hi).
//   gc::poison(x, n)                   fill with quiet NaN before a forward: an output element the
//                                      op forgets to write stays NaN and every metric below fails.
//   gc::dot_exact(a, b, n)             sum_i a_i * b_i accurate to about twice double precision
//                                      (Ogita-Rump-Oishi Dot2). Use it for the scalar loss
//                                      L = sum(out * R): a plain double sum rounds at ~1e-16 |L|,
//                                      which divided by 2*eps swamps the finite difference.
//   gc::rel_error(a, b, n, floor_frac) the error metric used everywhere (a: tested, b: reference):
//                                        max_i |a_i - b_i| / (|a_i| + |b_i| + floor),
//                                        floor = floor_frac * max_j max(|a_j|, |b_j|) + 1e-300.
//                                      Elementwise relative error for elements of the size of the
//                                      tensor's scale; elements much smaller than the scale (where
//                                      finite differences and float rounding carry no relative
//                                      accuracy) are judged against floor instead. floor_frac=0 is
//                                      the pure elementwise relative error. Where a_i and b_i are the
//                                      same infinity the element counts 0; any other non-finite value
//                                      (NaN, mismatched inf) gives +inf. For finite inputs the value
//                                      lies in [0, 1]: ~1e-16 is agreement to rounding, 1 means one
//                                      side is zero where the other is of the tensor's scale.
//   gc::norm_rel_error(a, b, n)        ||a - b||_2 / ||b||_2 (matching infinities skipped, any other
//                                      non-finite value gives +inf): the metric for float vs double,
//                                      whose rounding is absolute (cancelled sums), not relative.
//   gc::grad_check(x, n, analytic, loss, eps, max_elems, floor_frac) -> gc::GradCheck
//                                      Central finite differences of loss() (a callable returning
//                                      double that reads x) for elements of x, compared with
//                                      analytic[i] = dL/dx[i] by rel_error. x is perturbed in place
//                                      and restored bit-exactly. When n > max_elems only max_elems
//                                      indices spread evenly over [0, n) (first and last included)
//                                      are checked. The step divides by (x+eps)-(x-eps) as actually
//                                      represented, not by 2*eps.
//                                      Step: rounding of L (~1e-16 |L|/eps) dominates below ~1e-5 and
//                                      truncation (eps^2 f''') above ~1e-4; 1e-5..3e-5 is the sweet
//                                      spot for O(1) inputs.
//   gc::check_grad(name, x, n, analytic, loss, eps, max_elems) -> double
//                                      grad_check(...).err; when gc::verbose() is set (env
//                                      GRADCHECK_VERBOSE=1) it prints the worst element under name.
//   gc::count_bit_mismatch(a, b, n)    elements whose bit patterns differ (determinism checks).
//   gc::max_abs(x, n), gc::all_finite(x, n).
//
// Typical use (T = double instantiation of an op, backward ADDS so zero first):
//   std::vector<double> R(n_out); gc::fill_uniform(R.data(), n_out, rng, -1, 1);
//   auto loss = [&] { gc::poison(out, n_out); op_forward(out, x, ...); return gc::dot_exact(out, R.data(), n_out); };
//   loss(); std::fill(dx, dx + n, 0.0); op_backward(dx, R.data(), x, ...);
//   double err = gc::check_grad("op.dx", x, n, dx, loss, 1e-6, 4096);   // fail if err > 1e-6
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace gc {

inline bool verbose() {
    static const bool v = [] {
        const char* e = std::getenv("GRADCHECK_VERBOSE");
        return e && e[0] && e[0] != '0';
    }();
    return v;
}

class Rng {
  public:
    explicit Rng(uint64_t seed) {
        uint64_t z = seed;
        for (auto& w : s_) w = splitmix64(z);
    }
    uint64_t next_u64() {
        const uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return r;
    }
    double uniform() { return (next_u64() >> 11) * 0x1.0p-53; }  // [0, 1)
    double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
    int randint(int lo, int hi) {  // [lo, hi]
        return lo + (int)(next_u64() % (uint64_t)(hi - lo + 1));
    }
    double normal() {  // Box-Muller
        const double u1 = 1.0 - uniform(), u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }

  private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    static uint64_t splitmix64(uint64_t& z) {
        uint64_t r = (z += 0x9E3779B97F4A7C15ull);
        r = (r ^ (r >> 30)) * 0xBF58476D1CE4E5B9ull;
        r = (r ^ (r >> 27)) * 0x94D049BB133111EBull;
        return r ^ (r >> 31);
    }
    uint64_t s_[4];
};

template <typename T>
void fill_uniform(T* x, size_t n, Rng& rng, double lo = -1.0, double hi = 1.0) {
    for (size_t i = 0; i < n; i++) x[i] = (T)rng.uniform(lo, hi);
}

template <typename T>
void poison(T* x, size_t n) {
    std::fill(x, x + n, std::numeric_limits<T>::quiet_NaN());
}

template <typename T>
double max_abs(const T* x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = std::max(m, (double)std::fabs(x[i]));
    return m;
}

template <typename T>
bool all_finite(const T* x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!std::isfinite(x[i])) return false;
    return true;
}

// sum_i a_i * b_i with error-free products (fma) and sums (TwoSum): as if computed in ~106 bits.
inline double dot_exact(const double* a, const double* b, size_t n) {
    double s = 0, c = 0;
    for (size_t i = 0; i < n; i++) {
        const double p = a[i] * b[i];
        const double pe = std::fma(a[i], b[i], -p);
        const double t = s + p;
        const double z = t - s;
        const double se = (s - (t - z)) + (p - z);
        s = t;
        c += se + pe;
    }
    return s + c;
}

template <typename TA, typename TB>
double rel_error(const TA* a, const TB* b, size_t n, double floor_frac = 1e-3) {
    double scale = 0;
    for (size_t i = 0; i < n; i++) {
        if (std::isfinite((double)a[i])) scale = std::max(scale, (double)std::fabs(a[i]));
        if (std::isfinite((double)b[i])) scale = std::max(scale, (double)std::fabs(b[i]));
    }
    const double floor = floor_frac * scale + 1e-300;
    double err = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = (double)a[i], y = (double)b[i];
        if (!std::isfinite(x) || !std::isfinite(y)) {
            if (std::isinf(x) && x == y) continue;
            return std::numeric_limits<double>::infinity();
        }
        err = std::max(err, std::fabs(x - y) / (std::fabs(x) + std::fabs(y) + floor));
    }
    return err;
}

template <typename TA, typename TB>
double norm_rel_error(const TA* a, const TB* b, size_t n) {
    long double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = (double)a[i], y = (double)b[i];
        if (!std::isfinite(x) || !std::isfinite(y)) {
            if (std::isinf(x) && x == y) continue;
            return std::numeric_limits<double>::infinity();
        }
        num += (long double)(x - y) * (x - y);
        den += (long double)y * y;
    }
    if (num == 0) return 0;
    return den > 0 ? (double)std::sqrt(num / den) : std::numeric_limits<double>::infinity();
}

struct GradCheck {
    double err = 0;          // rel_error(analytic, numeric) over the checked elements
    size_t checked = 0;      // how many elements were checked
    size_t worst = 0;        // index in x of the worst element
    double worst_analytic = 0, worst_numeric = 0;
};

template <class F>
GradCheck grad_check(double* x, size_t n, const double* analytic, F loss, double eps = 1e-6,
                     size_t max_elems = (size_t)-1, double floor_frac = 1e-3) {
    GradCheck r;
    if (n == 0) return r;
    const size_t m = std::max<size_t>(1, std::min(n, max_elems));
    double* num = new double[m];
    double* ana = new double[m];
    size_t* idx = new size_t[m];
    for (size_t k = 0; k < m; k++) {
        const size_t i = (m == n || m == 1) ? k : (size_t)((double)k * (double)(n - 1) / (double)(m - 1));
        const double xi = x[i];
        const double xp = xi + eps, xm = xi - eps;
        x[i] = xp;
        const double lp = loss();
        x[i] = xm;
        const double lm = loss();
        x[i] = xi;
        num[k] = (lp - lm) / (xp - xm);
        ana[k] = analytic[i];
        idx[k] = i;
    }
    r.checked = m;
    r.err = rel_error(ana, num, m, floor_frac);
    // Locate the worst element for the report (same formula as rel_error).
    double scale = std::max(max_abs(ana, m), max_abs(num, m));
    double worst = -1;
    for (size_t k = 0; k < m; k++) {
        double e = std::fabs(ana[k] - num[k]) / (std::fabs(ana[k]) + std::fabs(num[k]) + floor_frac * scale + 1e-300);
        if (!(e <= worst)) {
            worst = e;
            r.worst = idx[k];
            r.worst_analytic = ana[k];
            r.worst_numeric = num[k];
            if (std::isnan(e)) break;
        }
    }
    delete[] num;
    delete[] ana;
    delete[] idx;
    return r;
}

template <class F>
double check_grad(const char* name, double* x, size_t n, const double* analytic, F loss,
                  double eps = 1e-6, size_t max_elems = (size_t)-1) {
    const GradCheck r = grad_check(x, n, analytic, loss, eps, max_elems);
    if (verbose())
        std::printf("  gradcheck %s: err %.3g over %zu of %zu elements; worst [%zu] analytic %.12g numeric %.12g\n",
                    name, r.err, r.checked, n, r.worst, r.worst_analytic, r.worst_numeric);
    return r.err;
}

template <typename T>
size_t count_bit_mismatch(const T* a, const T* b, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += std::memcmp(a + i, b + i, sizeof(T)) != 0;
    return bad;
}

}  // namespace gc
