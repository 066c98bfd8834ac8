// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
#pragma once
#include "layers/common.h"

template <typename T>
void gelu_forward(T* out, const T* inp, size_t n) {  // (N) -> (N)
    const T k = T(0.7978845608028654);  // sqrt(2/pi)
    OMP_PARALLEL_FOR
    for (size_t i = 0; i < n; i++) {
        T x = inp[i];
        out[i] = T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
    }
}

// Adds into dinp.
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n) {
    const T k = T(0.7978845608028654);
    OMP_PARALLEL_FOR
    for (size_t i = 0; i < n; i++) {
        T x = inp[i];
        T u = k * (x + T(0.044715) * x * x * x);
        T th = std::tanh(u);
        T sech2 = T(1) - th * th;
#ifdef BREAK_GELU_BACKWARD
        // Deliberately wrong (drops the derivative of the cubic term): proves the gradient
        // check catches a broken backward. Built only by `make test-gradcheck-can-fail`.
        T du = k;
#else
        T du = k * (T(1) + T(3) * T(0.044715) * x * x);
#endif
        T grad = T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * du;
        dinp[i] += grad * dout[i];
    }
}
