// AdamW with decoupled weight decay, gradient-norm clipping and the learning-rate schedule.
#pragma once
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>
#include "layers/common.h"

// Decoupled weight decay multiplies each matrix weight by (1 - lr * wd) every step: past
// lr * wd = 1 the factor turns negative and past 2 the weights grow without bound (a huge
// --weight-decay would train to NaN and still exit 0). Published runs use 0 to 0.1, a few up to 1;
// 10 leaves room for any experiment. One rule for the flag and for a recorded run's value
// (train --resume requires the flag to match the checkpoint's). "" when allowed.
constexpr float kMaxWeightDecay = 10.0f;
inline std::string weight_decay_error(float wd, float lr) {
    char buf[200];
    if (!(wd >= 0 && wd <= kMaxWeightDecay))
        snprintf(buf, sizeof buf, "--weight-decay must be in [0, %g] (got %g)", (double)kMaxWeightDecay, (double)wd);
    else if (!((double)lr * wd <= 1 + 1e-6))  // float lr 0.1 x 10 is 1.0000000149
        snprintf(buf, sizeof buf, "--lr %g x --weight-decay %g = %g is above 1: each step would flip the weights' signs; lower one of them",
                 (double)lr, (double)wd, (double)lr * wd);
    else return "";
    return buf;
}

// One AdamW step on n parameters. grad_scale multiplies the gradient first (clipping);
// step is 1-based (bias correction); weight_decay is 0 for vectors (biases, LayerNorm gains).
template <typename T>
void adamw_update(T* param, T* m, T* v, const T* grad, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int step, float grad_scale) {
    const double bc1 = 1.0 - std::pow((double)beta1, step);
    const double bc2 = 1.0 - std::pow((double)beta2, step);
    OMP_PARALLEL_FOR
    for (size_t i = 0; i < n; i++) {
        const T g = grad[i] * grad_scale;
        m[i] = beta1 * m[i] + (1 - beta1) * g;
        v[i] = beta2 * v[i] + (1 - beta2) * g * g;
        const T m_hat = T(m[i] / bc1), v_hat = T(v[i] / bc2);
        param[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * param[i]);
    }
}

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

// Linear warmup to max_lr over warmup steps, then cosine decay to min_lr at total steps.
inline float lr_at(int step, int warmup, int total, float max_lr, float min_lr) {
    if (step < warmup) return max_lr * (step + 1) / warmup;
    if (total <= warmup) return max_lr;
    double progress = (double)(step - warmup) / (total - warmup);
    if (progress > 1) progress = 1;
    return (float)(min_lr + 0.5 * (max_lr - min_lr) * (1 + std::cos(3.141592653589793 * progress)));
}
