// The pointer's part of a KV cache on the CPU (layers/pointer.h; model/kv_cache.h owns one in a
// model with a pointer): every position's key kp (the state the next token follows) and token,
// per sequence, so that a query at position t can weigh keys 0..t (K'_0 = 0, K'_s = kp_(s-1)) and
// gather the weights by the token each key holds. A chunk's queries and gates are made from its
// final states when asked, so a cache copied by gather needs only the keys and tokens.
//   losses  -log((1 - g) p_LM(y) + g p_copy(y)), as training's (the classifier's PointerMix)
//   logits  log((1 - g) p_LM(v) + g p_copy(v)) over the vocabulary: log-probabilities, which any
//           sampler takes as logits (softmax gives the mixture back)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>
#include "layers/classifier.h"
#include "layers/matmul.h"
#include "layers/pointer.h"
#include "model/gpt.h"

template <typename T>
class PointerCache {
   public:
    PointerCache(const GPT<T>& model, int B) : m_(model), B_(B), D_(model.cfg.head_dim()) {}

    // The chunk's keys (from its final states lnf (B, n, C)) and tokens (B, n), at positions
    // pos..pos + n - 1 of every sequence.
    void append(const T* lnf, const int* tokens, int n, long long pos) {
        grow(pos + n);
        const int C = m_.cfg.n_embd;
        std::vector<T> kp((size_t)n * D_);
        for (int b = 0; b < B_; b++) {
            matmul_forward(kp.data(), lnf + (size_t)b * n * C, m_.p.ptrk, (const T*)nullptr, n, C, D_);
            std::copy(kp.begin(), kp.end(), kp_.begin() + ((size_t)b * cap_ + pos) * D_);
            std::copy(tokens + (size_t)b * n, tokens + (size_t)(b + 1) * n, tok_.begin() + (size_t)b * cap_ + pos);
        }
    }

    // The mixture's losses (B, n) of the chunk whose final states are lnf (B, n, C), its first
    // row at position pos, against targets (B, n) (< 0: 0).
    void losses(T* out, const T* lnf, const int* targets, int n, long long pos) const {
        const int BN = B_ * n;
        std::vector<T> gate(BN), pcopy(BN, T(0)), s;
        for (int b = 0; b < B_; b++)
            for (int i = 0; i < n; i++) {
                const size_t r = (size_t)b * n + i;
                const long long t = pos + i;
                std::vector<T> q(D_);
                head(q.data(), &gate[r], lnf + r * m_.cfg.n_embd);
                const T L = scores(s, q.data(), b, t);
                if (targets[r] < 0) continue;
                for (long long k = 1; k <= t; k++)
                    if (tok_[(size_t)b * cap_ + k] == targets[r]) pcopy[r] += std::exp(s[k] - L);
            }
        classifier_forward_backward(out, (T*)nullptr, (T*)nullptr, lnf, m_.p.wte, targets, BN, m_.cfg.n_embd, m_.cfg.vocab_size, T(0),
                                    PointerMix<T>{gate.data(), pcopy.data(), nullptr});
    }

    // log p (V) of the mixture at the row whose final state is lnf_row (C), at position t of sequence b.
    void logits(T* out, const T* lnf_row, int b, long long t) const {
        std::vector<T> lm(m_.cfg.vocab_size), q(D_);
        matmul_forward(lm.data(), lnf_row, m_.p.wte, (const T*)nullptr, 1, m_.cfg.n_embd, m_.cfg.vocab_size);
        T gate;
        head(q.data(), &gate, lnf_row);
        pointer_mix_logprobs(out, lm.data(), q.data(), gate, kp_.data() + (size_t)b * cap_ * D_, (size_t)D_, tok_.data() + (size_t)b * cap_,
                             t, D_, m_.cfg.vocab_size);
    }

    // Sequence b becomes a copy of sequence from[b] of src (len positions each).
    void gather(const PointerCache& src, const std::vector<int>& from, long long len) {
        grow(len);
        for (int b = 0; b < B_; b++) {
            std::copy_n(src.kp_.begin() + (size_t)from[b] * src.cap_ * D_, (size_t)len * D_, kp_.begin() + (size_t)b * cap_ * D_);
            std::copy_n(src.tok_.begin() + (size_t)from[b] * src.cap_, (size_t)len, tok_.begin() + (size_t)b * cap_);
        }
    }

    size_t bytes() const { return kp_.size() * sizeof(T) + tok_.size() * sizeof(int); }

   private:
    const GPT<T>& m_;
    int B_, D_;
    long long cap_ = 0;     // positions each sequence has room for
    std::vector<T> kp_;     // (B, cap, D)
    std::vector<int> tok_;  // (B, cap)

    void grow(long long len) {
        if (len <= cap_) return;
        const long long cap = std::max(len, 2 * cap_);
        std::vector<T> kp((size_t)B_ * cap * D_);
        std::vector<int> tok((size_t)B_ * cap);
        for (int b = 0; b < B_ && cap_ > 0; b++) {
            std::copy_n(kp_.begin() + (size_t)b * cap_ * D_, (size_t)cap_ * D_, kp.begin() + (size_t)b * cap * D_);
            std::copy_n(tok_.begin() + (size_t)b * cap_, (size_t)cap_, tok.begin() + (size_t)b * cap);
        }
        kp_.swap(kp), tok_.swap(tok), cap_ = cap;
    }

    // The row's query (D) and gate logit from its final state (C).
    void head(T* q, T* gate, const T* lnf_row) const {
        const int C = m_.cfg.n_embd;
        matmul_forward(q, lnf_row, m_.p.ptrq, (const T*)nullptr, 1, C, D_);
        matmul_forward(gate, lnf_row, m_.p.ptrgw, m_.p.ptrgb, 1, C, 1);
    }

    // s[k] = scale q . K'_k for keys 0..t of sequence b; returns their log-sum-exp.
    T scores(std::vector<T>& s, const T* q, int b, long long t) const {
        const T scale = T(1) / std::sqrt((T)D_);
        s.assign((size_t)t + 1, T(0));  // key 0: the null key, score 0
        T mx = 0;
        for (long long k = 1; k <= t; k++) {
            s[k] = scale * pointer_dot(q, kp_.data() + ((size_t)b * cap_ + k - 1) * D_, D_);
            mx = std::max(mx, s[k]);
        }
        T sum = 0;
        for (long long k = 0; k <= t; k++) sum += std::exp(s[k] - mx);
        return mx + std::log(sum);
    }
};
