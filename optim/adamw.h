// AdamW (Adam with decoupled weight decay): its settings, their flags and rules, the state it
// keeps per weight as a checkpoint names it, and the step, the CPU reference (a template over
// float/double). Its CUDA twin is optim/adamw.cuh. The rest of the optimizer's room: the learning
// rate schedule (optim/schedule.h), gradient clipping (optim/clip.h, optim/clip.cuh), the update
// split over data-parallel ranks (optim/update_shard.h).
#pragma once
#include <cmath>
#include <cstdio>
#include <string>
#include "core/flags.h"
#include "layers/common.h"

// The decay applies to the matrices of products only (ParamTensor::decay); vectors (biases,
// LayerNorm gains) and the q/k convolutions keep 0.
struct AdamWConfig {
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
};

// The state AdamW keeps per weight, each a tensor of the weight's shape in a training checkpoint,
// named by prefix: "optim.m.<name>" (the first moment), "optim.v.<name>" (the second).
constexpr const char* kAdamWFirstMoment = "optim.m.";
constexpr const char* kAdamWSecondMoment = "optim.v.";

inline void add_adamw_flags(Flags& flags, AdamWConfig& c) {
    flags.add_float("weight-decay", &c.weight_decay, "AdamW weight decay (matrices only)");
    flags.add_float("beta1", &c.beta1, "AdamW decay of the first moment (the gradient's running mean)");
    flags.add_float("beta2", &c.beta2, "AdamW decay of the second moment (the squared gradient's running mean)");
    flags.add_float("adam-eps", &c.eps, "AdamW epsilon, added to the second moment's root");
}

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

// A beta of 1 leaves the bias correction 1 - beta^step at 0 (every step divides by it); one
// below 0 flips the moments' signs from step to step. "" when allowed; flag is "--beta1" or "--beta2".
inline std::string beta_error(const char* flag, float beta) {
    if (beta >= 0 && beta < 1) return "";
    char buf[200];
    snprintf(buf, sizeof buf, "%s must be in [0, 1) (got %g)", flag, (double)beta);
    return buf;
}

// Epsilon keeps the step finite where the second moment is 0 (a weight no token has reached
// yet): 0 divides 0 by 0. Above 1 it outweighs the gradient's scale altogether.
inline std::string adam_eps_error(float eps) {
    if (eps > 0 && eps <= 1) return "";
    char buf[200];
    snprintf(buf, sizeof buf, "--adam-eps must be in (0, 1] (got %g)", (double)eps);
    return buf;
}

// Every rule of the settings: "" when all pass, else the first message.
inline std::string adamw_config_error(const AdamWConfig& c, float lr) {
    for (const std::string& e : {weight_decay_error(c.weight_decay, lr), beta_error("--beta1", c.beta1),
                                 beta_error("--beta2", c.beta2), adam_eps_error(c.eps)})
        if (!e.empty()) return e;
    return "";
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
