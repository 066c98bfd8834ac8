// What the CPU attention tests (test_attention_cpu.cpp, test_ring_cpu.cpp) share to report: a
// check line with its error and tolerance, and the largest difference of two results.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/check.h"

// A check (tests/check.h) whose line shows the error and the tolerance.
inline bool check_err(bool ok, const std::string& name, double err, double tol = 0) {
    return check(ok, strf("%-78s err %.2e (tol %.0e)", name.c_str(), err, tol));
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

