// A causal depthwise convolution on the queries and keys (Primer's multi-dconv-head attention, on
// q and k only): each channel of a token's q and k becomes a weighted sum of that channel at the
// token itself and at the W - 1 tokens before it,
//
//   out[t, s, c] = sum_{j < W} weight[j, s C + c] * inp[t - j, s, c]      s = 0 (q), 1 (k); c < C
//
// and v passes unchanged. An induction head matches the current token against keys that carry the
// token before them; a one-token match is ambiguous in natural text, more so as the context grows.
// With the convolution a key can carry the several tokens before it and a query the several it
// ends with, so one head can match a short phrase instead of one token. weight (W, 2C): row j is
// the weight on the token j before (row 0: the token itself); the model starts it as the identity
// (row 0 ones, the rest zeros) and leaves it out of weight decay.
//
// A token j back that lies before the window reads `hist`, the W - 1 rows of raw q and k that came
// before the window (decoding a chunk after the ones in the cache), or 0 without it (training).
// With a document mask (doc_start) a token before its own document's start reads 0: the
// convolution, like the attention, does not look across documents. Positions are global (as in
// layers/rope.h); a window's rows hold consecutive positions.
#pragma once
#include <algorithm>
#include <cstddef>
#include "layers/common.h"

// Whether the token at row t of batch row b reads the one j rows before it (given it exists).
inline bool qk_conv_same_document(const int* pos, const int* doc_start, int b, int Tn, int t, int j) {
    return !doc_start || (long long)pos[t] - j >= doc_start[(size_t)b * Tn + t];
}

// out, inp (B, T, 3, C): qkv rows; raw (B, T, 2C) or nullptr: a copy of inp's q and k, which the
// backward reads; hist (B, W - 1, 2C), oldest row first, or nullptr; weight (W, 2C).
template <typename T>
void qk_conv_forward(T* out, T* raw, const T* inp, const T* hist, const T* weight, const int* pos, const int* doc_start, int B,
                     int Tn, int C, int W) {
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tn; t++) {
            T* o = out + ((size_t)b * Tn + t) * 3 * C;
            for (int c = 0; c < 2 * C; c++) {
                T acc = 0;
                for (int j = 0; j < W; j++) {
                    if (!qk_conv_same_document(pos, doc_start, b, Tn, t, j)) break;
                    const T* x = t - j >= 0 ? inp + ((size_t)b * Tn + t - j) * 3 * C
                                 : hist     ? hist + ((size_t)b * (W - 1) + (W - 1) + (t - j)) * 2 * C
                                            : nullptr;
                    if (!x) break;
                    acc += weight[(size_t)j * 2 * C + c] * x[c];
                }
                o[c] = acc;
            }
            const T* x = inp + ((size_t)b * Tn + t) * 3 * C;
            std::copy(x + 2 * C, x + 3 * C, o + 2 * C);
            if (raw) std::copy(x, x + 2 * C, raw + ((size_t)b * Tn + t) * 2 * C);
        }
}

// Adds into dinp (B, T, 3, C) and dweight (W, 2C); dout (B, T, 3, C), raw (B, T, 2C) the forward's.
// No history: the backward is training's, whose windows start from nothing.
template <typename T>
void qk_conv_backward(T* dinp, T* dweight, const T* dout, const T* raw, const T* weight, const int* pos, const int* doc_start,
                      int B, int Tn, int C, int W) {
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tn; t++) {
            T* dx = dinp + ((size_t)b * Tn + t) * 3 * C;
            for (int c = 0; c < 2 * C; c++) {
                T acc = 0;  // every later token u = t + j that read this one
                for (int j = 0; j < W && t + j < Tn; j++)
                    if (qk_conv_same_document(pos, doc_start, b, Tn, t + j, j))
                        acc += weight[(size_t)j * 2 * C + c] * dout[((size_t)b * Tn + t + j) * 3 * C + c];
                dx[c] += acc;
            }
            const T* dv = dout + ((size_t)b * Tn + t) * 3 * C + 2 * C;
            for (int c = 0; c < C; c++) dx[2 * C + c] += dv[c];
        }
    OMP_PARALLEL_FOR
    for (int c = 0; c < 2 * C; c++)
        for (int j = 0; j < W; j++) {
            T acc = 0;
            for (int b = 0; b < B; b++)
                for (int t = j; t < Tn; t++)
                    if (qk_conv_same_document(pos, doc_start, b, Tn, t, j))
                        acc += dout[((size_t)b * Tn + t) * 3 * C + c] * raw[((size_t)b * Tn + t - j) * 2 * C + c];
            dweight[(size_t)j * 2 * C + c] += acc;
        }
}

// hist (B, W - 1, 2C) becomes the last W - 1 raw q and k rows of [hist, inp (B, n, 3C)]: what the
// next chunk's first tokens read.
template <typename T>
void qk_conv_keep_tail(T* hist, const T* inp, int B, int n, int C, int W) {
    const int keep = W - 1;
    for (int b = 0; b < B; b++) {
        T* h = hist + (size_t)b * keep * 2 * C;
        const int from_old = std::max(0, keep - n);  // rows of the old history that stay, moved to the front
        for (int r = 0; r < from_old; r++) std::copy(h + (size_t)(keep - from_old + r) * 2 * C, h + (size_t)(keep - from_old + r + 1) * 2 * C, h + (size_t)r * 2 * C);
        for (int r = from_old; r < keep; r++) {
            const T* x = inp + ((size_t)b * n + n - (keep - r)) * 3 * C;
            std::copy(x, x + 2 * C, h + (size_t)r * 2 * C);
        }
    }
}
