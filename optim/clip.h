// Gradient-norm clipping, the CPU reference (its CUDA twin: optim/clip.cuh): the gradient's norm,
// summed the same way whatever the threads, and the factor that brings it down to --grad-clip.
#pragma once
#include <cstdio>
#include <string>
#include <vector>
#include "layers/common.h"

// Sum of squares in double, in fixed-size chunks summed in order: the same answer whatever
// the number of threads, so a resumed run clips exactly as the uninterrupted one did.
template <typename T>
double grad_norm_squared(const T* grad, size_t n) {
    const size_t CHUNK = 1 << 14;
    const size_t n_chunks = (n + CHUNK - 1) / CHUNK;
    std::vector<double> partial(n_chunks);
    OMP_PARALLEL_FOR
    for (size_t c = 0; c < n_chunks; c++) {
        double s = 0;
        const size_t end = (c + 1) * CHUNK < n ? (c + 1) * CHUNK : n;
        for (size_t i = c * CHUNK; i < end; i++) s += (double)grad[i] * grad[i];
        partial[c] = s;
    }
    double total = 0;
    for (double p : partial) total += p;
    return total;
}

// Factor that scales the gradient to norm at most max_norm (1 when within, or when max_norm <= 0).
inline float clip_scale(double norm, float max_norm) {
    return (max_norm > 0 && norm > max_norm) ? (float)(max_norm / norm) : 1.0f;
}

// --grad-clip's rule, for the flag and a checkpoint's recorded run: "" when allowed.
inline std::string grad_clip_error(double clip) {
    if (clip >= 0 && clip <= 1e30) return "";
    char buf[200];
    snprintf(buf, sizeof buf, "--grad-clip must be >= 0 (got %g)", clip);
    return buf;
}
