// Rotary position embedding on q and k, GPT-NeoX layout: dimension i of a head is paired with
// i + D/2 and the pair is rotated by angle pos * theta^(-2i/D). Positions are GLOBAL (a token's
// place in the whole sequence), given per token, so a chunk of a sequence held by one GPU
// rotates exactly as it would in the whole sequence. Base theta = 0 rotates nothing: the layer
// has no positional embedding (NoPE), and its forward and backward are the identity.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>
#include "layers/common.h"

// cos and sin of pos * theta^(-2i/D) for i < D/2: the same for every head of a token, so
// computed once per token (in double, then rounded to T).
template <typename T>
void rope_cos_sin(std::vector<T>& c, std::vector<T>& s, int pos, int D, float theta) {
    c.resize(D / 2), s.resize(D / 2);
    for (int i = 0; i < D / 2; i++) {
        const double angle = pos * std::pow((double)theta, -2.0 * i / D);
        c[i] = (T)std::cos(angle), s[i] = (T)std::sin(angle);
    }
}

// qkv: (B, T, 3, H, D); q is slot 0 and k is slot 1, v (slot 2) is copied unchanged.
template <typename T>
void rope_forward(T* out,          // (B, T, 3, H, D)
                  const T* inp,    // (B, T, 3, H, D)
                  const int* pos,  // (T) global position of each token
                  int B, int Tn, int H, int D, float theta) {
    if (theta == 0.0f) {  // NoPE
        if (out != inp) std::copy(inp, inp + (size_t)B * Tn * 3 * H * D, out);
        return;
    }
    const int half = D / 2;
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < Tn; t++) {
            const size_t row = ((size_t)b * Tn + t) * 3 * H * D;
            std::vector<T> cs, sn;
            rope_cos_sin(cs, sn, pos[t], D, theta);
            for (int h = 0; h < H; h++) {
                for (int i = 0; i < half; i++) {
                    const T c = cs[i], s = sn[i];
                    for (int slot = 0; slot < 2; slot++) {  // q, k
                        const size_t at = row + (size_t)slot * H * D + (size_t)h * D;
                        const T x1 = inp[at + i], x2 = inp[at + i + half];
                        out[at + i] = x1 * c - x2 * s;
                        out[at + i + half] = x1 * s + x2 * c;
                    }
                }
                const size_t v = row + (size_t)2 * H * D + (size_t)h * D;
                for (int d = 0; d < D; d++) out[v + d] = inp[v + d];
            }
        }
    }
}

// Adds into dinp: the rotation is orthogonal, so its backward is the inverse rotation.
template <typename T>
void rope_backward(T* dinp,         // (B, T, 3, H, D)
                   const T* dout,   // (B, T, 3, H, D)
                   const int* pos,  // (T)
                   int B, int Tn, int H, int D, float theta) {
    if (theta == 0.0f) {  // NoPE
        for (size_t i = 0; i < (size_t)B * Tn * 3 * H * D; i++) dinp[i] += dout[i];
        return;
    }
    const int half = D / 2;
    OMP_PARALLEL_FOR_COLLAPSE2
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < Tn; t++) {
            const size_t row = ((size_t)b * Tn + t) * 3 * H * D;
            std::vector<T> cs, sn;
            rope_cos_sin(cs, sn, pos[t], D, theta);
            for (int h = 0; h < H; h++) {
                for (int i = 0; i < half; i++) {
                    const T c = cs[i], s = sn[i];
                    for (int slot = 0; slot < 2; slot++) {
                        const size_t at = row + (size_t)slot * H * D + (size_t)h * D;
                        const T d1 = dout[at + i], d2 = dout[at + i + half];
                        dinp[at + i] += d1 * c + d2 * s;
                        dinp[at + i + half] += -d1 * s + d2 * c;
                    }
                }
                const size_t v = row + (size_t)2 * H * D + (size_t)h * D;
                for (int d = 0; d < D; d++) dinp[v + d] += dout[v + d];
            }
        }
    }
}

// Log-n attention (Qwen's use_logn_attn; Llama 4 scales its NoPE layers' queries alike): the
// query at position p is multiplied by ln(p + 1) / ln(base) when p + 1 > base, else left as it
// is. A query attends over p + 1 keys; past the windows a model trained on, a softmax over more
// keys of similar scores flattens (its entropy grows like ln n), and a needle's one large score
// drowns. Scaling the logits by ln n / ln base keeps their spread growing with the keys. With
// base the longest training window it is 1 wherever the model trained. Base 0: nothing scales.
inline double logn_query_scale(int pos, int base) {
    return base > 0 && (long long)pos + 1 > base ? std::log((double)pos + 1) / std::log((double)base) : 1.0;
}

// A learned slope per head (GPTConfig::logn_learn): 1 + slope ln((p + 1) / base) past the base,
// which is logn_query_scale's factor at slope = 1 / ln(base). The factor grows with the keys' count
// at a rate each head sets: a head that must single out one key among many sharpens faster.
inline double logn_slope_scale(int pos, int base, double slope) {
    return base > 0 && (long long)pos + 1 > base ? 1.0 + slope * std::log(((double)pos + 1) / base) : 1.0;
}
// Where a learned slope starts: the fixed factor's.
inline double logn_slope_init(int base) { return 1.0 / std::log((double)base); }

// In place on q (slot 0 of each token's row); k and v unchanged. slope: (H) learned slopes, or
// nullptr for the fixed factor. The map is diagonal, so dq's backward is the same call on the
// gradient (dq scaled alike); a learned slope's gradient is logn_slope_backward's.
template <typename T>
void logn_scale_queries(T* qkv,         // (B, T, 3, H, D)
                        const int* pos,  // (T) global position of each token
                        int B, int Tn, int H, int D, int base, const T* slope = nullptr) {
    if (base == 0) return;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tn; t++)
            for (int h = 0; h < H; h++) {
                const T s = (T)(slope ? logn_slope_scale(pos[t], base, (double)slope[h]) : logn_query_scale(pos[t], base));
                if (s == T(1)) continue;
                T* q = qkv + ((size_t)b * Tn + t) * 3 * H * D + (size_t)h * D;
                for (int d = 0; d < D; d++) q[d] *= s;
            }
}

// The learned slopes' backward, before dq is scaled: q' = f q with f = 1 + s_h ln((p + 1) / base),
// so dL/ds_h = sum over tokens past the base of ln((p + 1) / base) q . dq', where q = q' / f is
// recovered from the scaled queries the forward kept (qkv). Adds into dslope (H).
template <typename T>
void logn_slope_backward(T* dslope,           // (H)
                         const T* dqkv,       // (B, T, 3, H, D): dq' in slot 0
                         const T* qkv,        // (B, T, 3, H, D): q' in slot 0
                         const T* slope,      // (H)
                         const int* pos, int B, int Tn, int H, int D, int base) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tn; t++) {
            if ((long long)pos[t] + 1 <= base) continue;
            const double r = std::log(((double)pos[t] + 1) / base);
            for (int h = 0; h < H; h++) {
                const double f = logn_slope_scale(pos[t], base, (double)slope[h]);
                if (f == 0) continue;  // q' = 0 holds nothing of q
                const size_t row = ((size_t)b * Tn + t) * 3 * H * D + (size_t)h * D;
                double dot = 0;
                for (int d = 0; d < D; d++) dot += (double)dqkv[row + d] * (double)qkv[row + d];
                dslope[h] += (T)(r / f * dot);
            }
        }
}
