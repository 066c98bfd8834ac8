// Linear layer: out = inp @ weight^T + bias, weight stored (OC, C) as in PyTorch.
// The loops are arranged so the innermost one runs over contiguous memory and vectorizes
// (omp simd) without -ffast-math; every sum has a fixed order, so results are reproducible.
#pragma once
#include "layers/common.h"

template <typename T>
void matmul_forward(T* out,           // (N, OC)
                    const T* inp,     // (N, C)
                    const T* weight,  // (OC, C)
                    const T* bias,    // (OC) or nullptr
                    int N, int C, int OC) {
    // Four rows at a time: each weight row is loaded once for four dot products.
    const int TILE = 4;
    const int n_tiles = (N + TILE - 1) / TILE;
    OMP_PARALLEL_FOR
    for (int tile = 0; tile < n_tiles; tile++) {
        const int n0 = tile * TILE;
        const int rows = (N - n0) < TILE ? (N - n0) : TILE;
        const T* x0 = inp + (size_t)n0 * C;
        const T* x1 = rows > 1 ? x0 + C : x0;
        const T* x2 = rows > 2 ? x0 + 2 * C : x0;
        const T* x3 = rows > 3 ? x0 + 3 * C : x0;
        for (int o = 0; o < OC; o++) {
            const T* w = weight + (size_t)o * C;
            T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
            for (int c = 0; c < C; c++) {
                s0 += x0[c] * w[c];
                s1 += x1[c] * w[c];
                s2 += x2[c] * w[c];
                s3 += x3[c] * w[c];
            }
            const T b = bias ? bias[o] : T(0);
            T s[4] = {s0, s1, s2, s3};
            for (int r = 0; r < rows; r++) out[(size_t)(n0 + r) * OC + o] = s[r] + b;
        }
    }
}

// Adds into dinp, dweight and dbias (dbias may be nullptr).
template <typename T>
void matmul_backward(T* dinp,          // (N, C)
                     T* dweight,       // (OC, C)
                     T* dbias,         // (OC) or nullptr
                     const T* dout,    // (N, OC)
                     const T* inp,     // (N, C)
                     const T* weight,  // (OC, C)
                     int N, int C, int OC) {
    // dinp[n,:] += sum_o dout[n,o] * weight[o,:]
    OMP_PARALLEL_FOR
    for (int n = 0; n < N; n++) {
        T* dx = dinp + (size_t)n * C;
        const T* d = dout + (size_t)n * OC;
        for (int o = 0; o < OC; o++) {
            const T g = d[o];
            const T* w = weight + (size_t)o * C;
#pragma omp simd
            for (int c = 0; c < C; c++) dx[c] += g * w[c];
        }
    }
    // dweight[o,:] += sum_n dout[n,o] * inp[n,:]; parallel over o so no two threads share a row.
    OMP_PARALLEL_FOR
    for (int o = 0; o < OC; o++) {
        T* dw = dweight + (size_t)o * C;
        T db = 0;
        for (int n = 0; n < N; n++) {
            const T g = dout[(size_t)n * OC + o];
            const T* x = inp + (size_t)n * C;
            db += g;
#pragma omp simd
            for (int c = 0; c < C; c++) dw[c] += g * x[c];
        }
        if (dbias) dbias[o] += db;
    }
}
