// LayerNorm over the last dimension: out = (x - mean) * rstd * weight + bias.
#pragma once
#include "layers/common.h"

// Added to the variance before its square root (checkpoints record it: model/checkpoint.h).
constexpr double kLayerNormEps = 1e-5;

template <typename T>
void layernorm_forward(T* out,        // (N, C)
                       T* mean,       // (N)  kept for backward
                       T* rstd,       // (N)  kept for backward
                       const T* inp,  // (N, C)
                       const T* weight, const T* bias,  // (C)
                       int N, int C) {
    const T eps = T(kLayerNormEps);
    OMP_PARALLEL_FOR
    for (int n = 0; n < N; n++) {
        const T* x = inp + (size_t)n * C;
        T m = 0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        T var = 0;
        for (int c = 0; c < C; c++) var += (x[c] - m) * (x[c] - m);
        var /= C;
        T s = T(1) / std::sqrt(var + eps);
        T* o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * weight[c] + bias[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

// Adds into dinp, dweight, dbias. dweight/dbias sum over rows: parallel over columns so the
// row order (and so the rounding) is fixed.
template <typename T>
void layernorm_backward(T* dinp,                // (N, C)
                        T* dweight, T* dbias,   // (C)
                        const T* dout,          // (N, C)
                        const T* inp,           // (N, C)
                        const T* weight,        // (C)
                        const T* mean, const T* rstd,  // (N)
                        int N, int C) {
    OMP_PARALLEL_FOR
    for (int n = 0; n < N; n++) {
        const T* x = inp + (size_t)n * C;
        const T* d = dout + (size_t)n * C;
        T* dx = dinp + (size_t)n * C;
        // dnorm = dout * weight; dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
        T dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int c = 0; c < C; c++) {
            T norm = (x[c] - mean[n]) * rstd[n];
            T dnorm = d[c] * weight[c];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int c = 0; c < C; c++) {
            T norm = (x[c] - mean[n]) * rstd[n];
            T dnorm = d[c] * weight[c];
            dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[n];
        }
    }
    OMP_PARALLEL_FOR
    for (int c = 0; c < C; c++) {
        T dw = 0, db = 0;
        for (int n = 0; n < N; n++) {
            T d = dout[(size_t)n * C + c];
            dw += d * (inp[(size_t)n * C + c] - mean[n]) * rstd[n];
            db += d;
        }
        dweight[c] += dw;
        dbias[c] += db;
    }
}
