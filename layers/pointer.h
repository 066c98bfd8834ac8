// The pointer: a copy distribution mixed into the output (a pointer-generator's, as Merity et al.'s
// pointer sentinel mixes one into a language model), CPU reference.
//
// One more head over the final states h (after the last LayerNorm): a query q_t and a key kp_t at
// each position, D wide, made from h by two matrices outside this file. Key s of the head is
// kp_(s-1), the state the token at s followed; key 0 is zero (the null key: score 0, copies
// nothing). Query t sees keys 0..t, so the head is one causal dense head whose diagonal key is the
// state before token t, which the input already holds:
//   a_ts      = softmax over s in [0, t] of scale q_t . K'_s          (L_t: its log-sum-exp)
//   p_copy_t  = sum over 1 <= s <= t with tokens_s == y_t of a_ts
//   loss_t    = -log((1 - g_t) exp(lm_t) + g_t p_copy_t),   g_t = sigmoid(gate_t)
// lm_t is log p_LM(y_t), the classifier's -loss; y_t = targets_t (< 0: no loss, no gradient).
// Why: attention adds the copied token's value to the residual, a bounded push on one logit that
// loses where the language model is sure of something else (notes/reading.md, Result 24); mixed
// in probability, a copy of weight a costs at most -log(g a), whatever the language model believes.
//
// The backward, per unit of dloss_t, with w_t = g_t p_copy_t / P_t (the copy's share of the
// target's probability):   d lm_t = -(1 - w_t),   d gate_t = g_t - w_t,
//   dS_ts = w_t a_ts (1 - [tokens_s == y_t] / p_copy_t)      (0 where p_copy_t = 0),
// dq_t = scale sum_s dS_ts K'_s, dK'_s = scale sum_t dS_ts q_t (into dkp_(s-1)). The first term,
// w_t a_ts over every key, is a flash backward's dS = P (dP - delta) with dO = 0 and delta = -w_t;
// the second touches only the keys holding the target.
//
// Layout: q, kp (B, T, D); gate, lm, loss, lse, pcopy (B, T); tokens, targets (B, T).
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>
#include "layers/common.h"

// log(sigmoid(x)), exact for large |x| either way.
template <typename T>
T pointer_log_sigmoid(T x) {
    return -(std::max(-x, T(0)) + std::log1p(std::exp(-std::fabs(x))));
}

// log of the mixture's probability of the target: log((1 - g) e^lm + g p_copy), and the two terms'
// logs (the second -inf where p_copy is 0).
template <typename T>
T pointer_log_mix(T gate, T lm, T pcopy, T* log_lm_part, T* log_copy_part) {
    const T a = pointer_log_sigmoid(-gate) + lm;
    const T b = pcopy > 0 ? pointer_log_sigmoid(gate) + std::log(pcopy) : -std::numeric_limits<T>::infinity();
    const T hi = a > b ? a : b;
    *log_lm_part = a, *log_copy_part = b;
    return hi + std::log1p(std::exp((a > b ? b : a) - hi));
}

// Row t's scores against keys 0..t into s (t + 1 of them); returns their log-sum-exp.
template <typename T>
T pointer_scores(T* s, const T* qt, const T* kp_row0, int t, int D, T scale) {
    s[0] = 0;  // the null key
    T mx = 0;
    for (int j = 1; j <= t; j++) {
        const T* k = kp_row0 + (size_t)(j - 1) * D;
        T dot = 0;
        for (int d = 0; d < D; d++) dot += qt[d] * k[d];
        s[j] = scale * dot;
        mx = s[j] > mx ? s[j] : mx;
    }
    T sum = 0;
    for (int j = 0; j <= t; j++) sum += std::exp(s[j] - mx);
    return mx + std::log(sum);
}

// loss (and the saved lse, pcopy) of every position; rows whose target is < 0 get loss 0 and
// pcopy 0 (their lse is still the head's).
template <typename T>
void pointer_forward(T* loss, T* lse, T* pcopy, const T* q, const T* kp, const T* gate, const T* lm,
                     const int* tokens, const int* targets, int B, int Tn, int D, T scale) {
    OMP_PARALLEL_FOR
    for (int b = 0; b < B; b++) {
        std::vector<T> s((size_t)Tn);
        const T* kp0 = kp + (size_t)b * Tn * D;
        for (int t = 0; t < Tn; t++) {
            const size_t r = (size_t)b * Tn + t;
            const T l = pointer_scores(s.data(), q + r * D, kp0, t, D, scale);
            lse[r] = l;
            const int y = targets[r];
            if (y < 0) {
                loss[r] = 0, pcopy[r] = 0;
                continue;
            }
            T p = 0;
            for (int j = 1; j <= t; j++)
                if (tokens[(size_t)b * Tn + j] == y) p += std::exp(s[j] - l);
            pcopy[r] = p;
            T a, c;
            loss[r] = -pointer_log_mix(gate[r], lm[r], p, &a, &c);
        }
    }
}

// Adds the gradients of sum_t dloss_t loss_t into dq, dkp (B, T, D) and dgate, dlm (B, T), from
// pointer_forward's lse and pcopy.
template <typename T>
void pointer_backward(T* dq, T* dkp, T* dgate, T* dlm, const T* dloss, const T* q, const T* kp, const T* gate,
                      const T* lm, const T* lse, const T* pcopy, const int* tokens, const int* targets, int B, int Tn,
                      int D, T scale) {
    OMP_PARALLEL_FOR
    for (int b = 0; b < B; b++) {
        std::vector<T> s((size_t)Tn);
        const T* kp0 = kp + (size_t)b * Tn * D;
        for (int t = 0; t < Tn; t++) {
            const size_t r = (size_t)b * Tn + t;
            const int y = targets[r];
            if (y < 0) continue;
            T log_lm, log_copy;
            const T log_p = pointer_log_mix(gate[r], lm[r], pcopy[r], &log_lm, &log_copy);
            const T w = std::exp(log_copy - log_p);  // 0 where pcopy is 0
            const T d = dloss[r];
            dlm[r] += -std::exp(log_lm - log_p) * d;
            dgate[r] += (T(1) / (T(1) + std::exp(-gate[r])) - w) * d;
            if (!(w > 0)) continue;
            pointer_scores(s.data(), q + r * D, kp0, t, D, scale);
            const T* qt = q + r * D;
            T* dqt = dq + r * D;
            for (int j = 1; j <= t; j++) {
                const T a = std::exp(s[j] - lse[r]);
                const T e = tokens[(size_t)b * Tn + j] == y ? T(1) / pcopy[r] : T(0);
                const T ds = w * a * (T(1) - e) * d * scale;
                const T* k = kp0 + (size_t)(j - 1) * D;
                T* dk = dkp + ((size_t)b * Tn + j - 1) * D;
                for (int c = 0; c < D; c++) {
                    dqt[c] += ds * k[c];
                    dk[c] += ds * qt[c];
                }
            }
        }
    }
}
