// What the CPU attention tests (test_attention_cpu.cpp, test_ring_cpu.cpp) share to report: a
// PASS/FAIL line per check and the totals, and the largest difference of two results.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

inline int g_passed = 0, g_failed = 0;
inline void check(bool ok, const std::string& name, double err = 0, double tol = 0) {
    std::printf("%s %-78s err %.2e (tol %.0e)\n", ok ? "PASS" : "FAIL", name.c_str(), err, tol);
    (ok ? g_passed : g_failed)++;
}

// Largest |a - b| (inf == inf counts as equal: rows with no key have L = -inf in both; NaN is
// an infinite difference).
inline double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return INFINITY;
    double worst = 0;
    for (size_t i = 0; i < a.size(); i++) {
        if (a[i] == b[i]) continue;
        const double d = std::fabs(a[i] - b[i]);
        worst = std::max(worst, std::isnan(d) ? INFINITY : d);
    }
    return worst;
}

