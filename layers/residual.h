// Residual connection: out = a + b.
#pragma once
#include "layers/common.h"

template <typename T>
void residual_forward(T* out, const T* a, const T* b, size_t n) {  // (N) each
    OMP_PARALLEL_FOR
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

// Adds dout into both inputs' gradients.
template <typename T>
void residual_backward(T* da, T* db, const T* dout, size_t n) {
    OMP_PARALLEL_FOR
    for (size_t i = 0; i < n; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}
