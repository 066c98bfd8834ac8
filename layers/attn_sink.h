// The attention sink, CPU reference of layers/cuda/attn_sink.cuh (name for name).
//
// A sink is one more key in every row of head h's softmax, with score s_h (a learned logit, the
// model's "attn.sink", one per head) and value zero: a head that finds nothing to read can put
// its weight there instead of on real keys. Without it a softmax must spend its whole weight on
// keys, and models learn to spend it on the first tokens of a context (where every query can see
// them), which makes those tokens a poor place for anything a later query must find.
//
// It needs no change to any attention kernel. Over the keys, a kernel gives each row its output O
// and log-sum-exp L; with the sink the row's denominator gains e^s, so
//   L' = log(e^L + e^s),  O' = e^(L - L') O          (the sink's value is zero)
// which is merging the partial (o = 0, l = s) into (O, L) (layers/attention.h merge_partial_row).
// The backward then runs unchanged on (O', L'): it recomputes P = e^(S - L') from the final L',
// and dS = P (dP - delta) with delta = rowsum(dO O') is exact for the softmax with the sink,
// because the sink's value adds nothing to dP or to O'. The sink's own gradient is
//   d s_h = sum over the rows of head h of  P_sink (0 - delta) = -sum e^(s_h - L') delta.
//
// Layout as layers/attention.h: out (B, N, H, D), lse (B, H, N), sink (H).
#pragma once
#include <cmath>
#include <vector>
#include "layers/attention.h"
#include "layers/common.h"

// out and lse of an attention over keys become those of the same attention with the sink.
template <typename T>
void attn_sink_forward(T* out, T* lse, const T* sink, int B, int N, int H, int D) {
    const std::vector<T> zero(D, T(0));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < N; i++) {
                T* oi = out + ((size_t)b * N + i) * H * D + (size_t)h * D;
                merge_partial_row(oi, lse[((size_t)b * H + h) * N + i], zero.data(), sink[h], D);
            }
}

// Adds the sink's gradient into dsink (H) from the final out and lse (attn_sink_forward's) and
// dout: d s_h = -sum_(b, i) e^(s_h - L'_bhi) rowsum(dO O')_bhi.
template <typename T>
void attn_sink_backward(T* dsink, const T* dout, const T* out, const T* lse, const T* sink, int B, int N, int H, int D) {
    for (int h = 0; h < H; h++) {
        T sum = 0;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < N; i++) {
                const size_t row = ((size_t)b * N + i) * H * D + (size_t)h * D;
                T delta = 0;
                for (int d = 0; d < D; d++) delta += dout[row + d] * out[row + d];
                sum += std::exp(sink[h] - lse[((size_t)b * H + h) * N + i]) * delta;
            }
        dsink[h] -= sum;
    }
}
