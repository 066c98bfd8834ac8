// Token embedding: out[b,t,:] = wte[token[b,t], :]. No position table: positions enter
// through rotary embedding, so any sequence length runs.
#pragma once
#include "layers/common.h"

template <typename T>
void encoder_forward(T* out,            // (B, T, C)
                     const int* tokens, // (B, T)
                     const T* wte,      // (V, C)
                     int B, int Tn, int C) {
    for (int bt = 0; bt < B * Tn; bt++) {
        const T* row = wte + (size_t)tokens[bt] * C;
        T* o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) o[c] = row[c];
    }
}

// Adds into dwte. Serial on purpose: two positions with the same token write the same row,
// and a fixed order keeps training bit-for-bit reproducible.
template <typename T>
void encoder_backward(T* dwte,           // (V, C)
                      const T* dout,     // (B, T, C)
                      const int* tokens, // (B, T)
                      int B, int Tn, int C) {
    for (int bt = 0; bt < B * Tn; bt++) {
        T* drow = dwte + (size_t)tokens[bt] * C;
        const T* d = dout + (size_t)bt * C;
        for (int c = 0; c < C; c++) drow[c] += d[c];
    }
}
