// The pointer: a copy distribution mixed into the output (a pointer-generator's, as Merity et al.'s
// pointer sentinel mixes one into a language model), CPU reference.
//
// One more head over the final states h (after the last LayerNorm): a query q_t and a key kp_t at
// each position, D wide, made from h by two matrices outside this file. Key s of the head is
// K'_s = kp_(s-1), the state the token at s followed; K'_0 is zero (the null key: score 0, copies
// nothing). Query t sees keys 0..t, so the head is one causal dense head whose diagonal key is the
// state before token t, which the input already holds:
//   a_ts      = softmax over s in [0, t] of scale q_t . K'_s          (L_t: its log-sum-exp)
//   p_copy_t  = sum over 1 <= s <= t with tokens_s == y_t of a_ts
//   loss_t    = -log((1 - g_t) exp(lm_t) + g_t p_copy_t),   g_t = sigmoid(gate_t)
// lm_t is log p_LM(y_t); the classifier forms the mixture (layers/classifier.h), since it holds lm_t,
// and hands back w_t = g_t p_copy_t / P_t, the copy's share of the target's probability P_t.
// Why: attention adds the copied token's value to the residual, a bounded push on one logit that
// loses where the language model is sure of something else (notes/reading.md, Results 24 and 26);
// mixed in probability, a copy of weight a costs at most -log(g a), whatever the language model
// believes.
//
// The backward, per unit of dloss_t:   d lm_t = -(1 - w_t) (the classifier's),   d gate_t = g_t - w_t,
//   dS_ts = w_t a_ts - [tokens_s == y_t] w_t a_ts / p_copy_t      (s >= 1; 0 where p_copy_t = 0),
// dq_t = scale sum_s dS_ts K'_s, dK'_s = scale sum_t dS_ts q_t. The first term, w_t a_ts over every
// key, is a flash backward's dS = P (dP - delta) with dP = 0 and delta = -w_t (the GPU runs it so:
// layers/cuda/pointer.cuh); the second touches only the keys that hold the target.
//
// The keys that hold a query's target, and the queries whose target a key holds, are chained
// (pointer_links): first_key_t is the last s in [1, t] with tokens_s == targets_t, prev_key_s the
// last s' in [1, s) with tokens_s' == tokens_s; first_query_s the first t >= s with targets_t ==
// tokens_s, next_query_t the next t' > t with targets_t' == targets_t; -1 ends a chain. Walking
// them costs T^2 sum_v f_v^2 D for token frequencies f_v, a few percent of the dense head's T^2 D.
// The GPU takes the same pairs as tiles (pointer_tiles): a chain is one dependent load a pair, so
// a warp walking it waits on memory; a tile stages the rows of one side in shared memory.
//
// Layout: q, ks (B, T, D), ks the shifted keys K'; gate, lse, pcopy, w (B, T); tokens, targets and
// the links (B, T), a link a position within its row.
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

// The mixture of one row: its loss -log P (P = (1 - g) e^lm + g p_copy), w = g p_copy / P and
// lm_share = 1 - w (computed as its own ratio: 1 - w loses the digits where w is near 1).
template <typename T>
T pointer_mix_loss(T gate, T lm, T pcopy, T* w, T* lm_share) {
    const T a = pointer_log_sigmoid(-gate) + lm;
    if (!(pcopy > 0)) {
        *w = 0, *lm_share = 1;
        return -a;
    }
    const T c = pointer_log_sigmoid(gate) + std::log(pcopy);
    const T hi = a > c ? a : c;
    const T log_p = hi + std::log1p(std::exp((a > c ? c : a) - hi));
    *w = std::exp(c - log_p), *lm_share = std::exp(a - log_p);
    return -log_p;
}

// The four chains of every row (above). V: the vocabulary (ids in [0, V); targets < 0 have none).
inline void pointer_links(int* first_key, int* prev_key, int* first_query, int* next_query, const int* tokens,
                          const int* targets, int B, int Tn, int V) {
    std::vector<int> last((size_t)V, -1);
    for (int b = 0; b < B; b++) {
        const int* tok = tokens + (size_t)b * Tn;
        const int* tgt = targets + (size_t)b * Tn;
        const size_t r0 = (size_t)b * Tn;
        for (int t = 0; t < Tn; t++) {  // forward: the last key at or before t
            prev_key[r0 + t] = -1;
            if (t >= 1) prev_key[r0 + t] = last[tok[t]], last[tok[t]] = t;
            first_key[r0 + t] = tgt[t] >= 0 ? last[tgt[t]] : -1;
        }
        for (int t = 1; t < Tn; t++) last[tok[t]] = -1;
        for (int t = Tn - 1; t >= 0; t--) {  // backward: the first query at or after t
            next_query[r0 + t] = -1;
            if (tgt[t] >= 0) next_query[r0 + t] = last[tgt[t]], last[tgt[t]] = t;
            first_query[r0 + t] = t >= 1 ? last[tok[t]] : -1;
        }
        for (int t = 0; t < Tn; t++)
            if (tgt[t] >= 0) last[tgt[t]] = -1;
    }
}

// The pairs the chains link, for the GPU (layers/cuda/pointer.cuh), built on the host. A group is
// one row's queries of target v and its keys s >= 1 of token v; query_order lists every query
// row (b T + t, targets_t >= 0) by (b, target, t), key_order every key row by (b, token, s). A
// query tile is up to `tile` queries of one group beside the group's keys at or before its last
// query; a key tile is up to `tile` keys of one group beside the group's queries at or after its
// first key. A tile is four ints: [begin, end) of its own rows in their order, then [begin, end)
// of the other side's; the kernels keep a pair only where s <= t. Tiles with no pair are left out.
constexpr int kPointerTile = 64;

struct PointerTiles {
    std::vector<int> query_order, key_order, query_tiles, key_tiles;
    int n_query_tiles() const { return (int)query_tiles.size() / 4; }
    int n_key_tiles() const { return (int)key_tiles.size() / 4; }
};

inline void pointer_tiles(PointerTiles& pt, const int* tokens, const int* targets, int B, int Tn, int V, int tile = kPointerTile) {
    pt.query_order.clear(), pt.key_order.clear(), pt.query_tiles.clear(), pt.key_tiles.clear();
    std::vector<int> nq((size_t)V + 1), nk((size_t)V + 1);
    for (int b = 0; b < B; b++) {
        const int* tok = tokens + (size_t)b * Tn;
        const int* tgt = targets + (size_t)b * Tn;
        const int r0 = b * Tn, q0 = (int)pt.query_order.size(), k0 = (int)pt.key_order.size();
        std::fill(nq.begin(), nq.end(), 0), std::fill(nk.begin(), nk.end(), 0);
        for (int t = 0; t < Tn; t++) {
            if (tgt[t] >= 0) nq[tgt[t] + 1]++;
            if (t >= 1) nk[tok[t] + 1]++;
        }
        for (int v = 0; v < V; v++) nq[v + 1] += nq[v], nk[v + 1] += nk[v];  // each group's start
        pt.query_order.resize((size_t)q0 + nq[V]), pt.key_order.resize((size_t)k0 + nk[V]);
        std::vector<int> qfill(nq.begin(), nq.end() - 1), kfill(nk.begin(), nk.end() - 1);
        for (int t = 0; t < Tn; t++) {  // ascending t: each group's rows in order of position
            if (tgt[t] >= 0) pt.query_order[q0 + qfill[tgt[t]]++] = r0 + t;
            if (t >= 1) pt.key_order[k0 + kfill[tok[t]]++] = r0 + t;
        }
        for (int v = 0; v < V; v++) {
            const int qb = q0 + nq[v], qe = q0 + nq[v + 1], kb = k0 + nk[v], ke = k0 + nk[v + 1];
            if (qb == qe || kb == ke) continue;
            const int* kord = pt.key_order.data();
            const int* qord = pt.query_order.data();
            for (int i = qb; i < qe; i += tile) {  // its keys: those at or before its last query
                const int last = qord[std::min(i + tile, qe) - 1];
                const int kend = (int)(std::upper_bound(kord + kb, kord + ke, last) - kord);
                if (kend > kb) pt.query_tiles.insert(pt.query_tiles.end(), {i, std::min(i + tile, qe), kb, kend});
            }
            for (int j = kb; j < ke; j += tile) {  // its queries: those at or after its first key
                const int qbeg = (int)(std::lower_bound(qord + qb, qord + qe, kord[j]) - qord);
                if (qbeg < qe) pt.key_tiles.insert(pt.key_tiles.end(), {j, std::min(j + tile, ke), qbeg, qe});
            }
        }
    }
}

// The shifted keys: ks_(b, s) = kp_(b, s - 1), ks_(b, 0) = 0.
template <typename T>
void pointer_shift_keys(T* ks, const T* kp, int B, int Tn, int D) {
    for (int b = 0; b < B; b++) {
        T* out = ks + (size_t)b * Tn * D;
        std::fill(out, out + D, T(0));
        std::copy(kp + (size_t)b * Tn * D, kp + ((size_t)b * Tn + Tn - 1) * D, out + D);
    }
}

// Adds the shifted keys' gradient into kp's: dkp_(b, s - 1) += dks_(b, s) (the zero key has none).
template <typename T>
void pointer_unshift_grad(T* dkp, const T* dks, int B, int Tn, int D) {
    for (int b = 0; b < B; b++)
        for (size_t i = (size_t)D; i < (size_t)Tn * D; i++) dkp[(size_t)b * Tn * D + i - D] += dks[(size_t)b * Tn * D + i];
}

template <typename T>
T pointer_dot(const T* a, const T* b, int D) {
    T s = 0;
    for (int d = 0; d < D; d++) s += a[d] * b[d];
    return s;
}

// lse (B, T): the head's log-sum-exp over keys 0..t; pcopy (B, T): the weight on the keys holding
// the target (0 where the target is < 0 or no key holds it).
template <typename T>
void pointer_forward(T* lse, T* pcopy, const T* q, const T* ks, const int* first_key, const int* prev_key, int B, int Tn,
                     int D, T scale) {
    OMP_PARALLEL_FOR
    for (int b = 0; b < B; b++) {
        const size_t r0 = (size_t)b * Tn;
        for (int t = 0; t < Tn; t++) {
            const T* qt = q + (r0 + t) * D;
            T mx = -std::numeric_limits<T>::infinity();
            for (int s = 0; s <= t; s++) mx = std::max(mx, scale * pointer_dot(qt, ks + (r0 + s) * D, D));
            T sum = 0;
            for (int s = 0; s <= t; s++) sum += std::exp(scale * pointer_dot(qt, ks + (r0 + s) * D, D) - mx);
            const T l = mx + std::log(sum);
            lse[r0 + t] = l;
            T p = 0;
            for (int s = first_key[r0 + t]; s >= 1; s = prev_key[r0 + s]) p += std::exp(scale * pointer_dot(qt, ks + (r0 + s) * D, D) - l);
            pcopy[r0 + t] = p;
        }
    }
}

// Adds the gradients of sum_t dloss_t loss_t into dq, dks (B, T, D) and dgate (B, T), from the
// forward's lse, pcopy and the classifier's w. Rows whose target is < 0 get no gradient.
template <typename T>
void pointer_backward(T* dq, T* dks, T* dgate, const T* q, const T* ks, const T* gate, const T* w, const T* lse,
                      const T* pcopy, const int* targets, const int* first_key, const int* prev_key, const int* first_query,
                      const int* next_query, int B, int Tn, int D, T scale, const T* dloss) {
    OMP_PARALLEL_FOR
    for (int b = 0; b < B; b++) {
        const size_t r0 = (size_t)b * Tn;
        for (int t = 0; t < Tn; t++) {  // the gate, and dq: every key's dense term, then the target's keys
            const size_t r = r0 + t;
            if (targets[r] < 0) continue;
            dgate[r] += (T(1) / (T(1) + std::exp(-gate[r])) - w[r]) * dloss[r];
            if (!(w[r] > 0)) continue;
            const T* qt = q + r * D;
            for (int s = 0; s <= t; s++) {
                const T ds = w[r] * dloss[r] * std::exp(scale * pointer_dot(qt, ks + (r0 + s) * D, D) - lse[r]) * scale;
                for (int c = 0; c < D; c++) dq[r * D + c] += ds * ks[(r0 + s) * D + c];
            }
            for (int s = first_key[r]; s >= 1; s = prev_key[r0 + s]) {
                const T ds = -w[r] * dloss[r] * std::exp(scale * pointer_dot(qt, ks + (r0 + s) * D, D) - lse[r]) / pcopy[r] * scale;
                for (int c = 0; c < D; c++) dq[r * D + c] += ds * ks[(r0 + s) * D + c];
            }
        }
        for (int s = 1; s < Tn; s++) {  // dks: every query's dense term, then the queries whose target it holds
            const T* k = ks + (r0 + s) * D;
            T* dk = dks + (r0 + s) * D;
            for (int t = s; t < Tn; t++) {
                const size_t r = r0 + t;
                if (!(w[r] > 0)) continue;
                const T ds = w[r] * dloss[r] * std::exp(scale * pointer_dot(q + r * D, k, D) - lse[r]) * scale;
                for (int c = 0; c < D; c++) dk[c] += ds * q[r * D + c];
            }
            for (int t = first_query[r0 + s]; t >= 0; t = next_query[r0 + t]) {
                const size_t r = r0 + t;
                if (!(w[r] > 0)) continue;
                const T ds = -w[r] * dloss[r] * std::exp(scale * pointer_dot(q + r * D, k, D) - lse[r]) / pcopy[r] * scale;
                for (int c = 0; c < D; c++) dk[c] += ds * q[r * D + c];
            }
        }
    }
}

// The mixture's log-probabilities (V) for a query at position t, from the language model's logits
// (V), the query q (D) and gate logit, keys kp_0..kp_(t-1) (rows of key_stride, kp_(s-1) the key of
// position s) and the tokens 0..t: log((1 - g) softmax(logits)(v) + g sum over s in [1, t] with
// tokens_s == v of a_s). Any sampler takes them as logits.
template <typename T>
void pointer_mix_logprobs(T* out, const T* logits, const T* q, T gate, const T* kp, size_t key_stride, const int* tokens, long long t,
                          int D, int V) {
    const T scale = T(1) / std::sqrt((T)D);
    std::vector<T> s((size_t)t + 1, T(0));  // key 0: the null key, score 0
    T mx = 0;
    for (long long k = 1; k <= t; k++) mx = std::max(mx, s[k] = scale * pointer_dot(q, kp + (size_t)(k - 1) * key_stride, D));
    T sum = 0;
    for (long long k = 0; k <= t; k++) sum += std::exp(s[k] - mx);
    const T L = mx + std::log(sum);
    std::vector<T> copy((size_t)V, T(0));
    for (long long k = 1; k <= t; k++) copy[tokens[k]] += std::exp(s[k] - L);
    T lmx = -std::numeric_limits<T>::infinity(), lsum = 0;
    for (int v = 0; v < V; v++) lmx = std::max(lmx, logits[v]);
    for (int v = 0; v < V; v++) lsum += std::exp(logits[v] - lmx);
    const T g = T(1) / (T(1) + std::exp(-gate));
    for (int v = 0; v < V; v++) out[v] = std::log((T(1) - g) * std::exp(logits[v] - lmx) / lsum + g * copy[v]);
}
