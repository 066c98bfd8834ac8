// Generation and perplexity on any backend. Both recompute the whole context window for each
// step (no KV cache yet): simple, and exact for every attention pattern.
#pragma once
#include <string>
#include <vector>
#include "data/tokenizer.h"
#include "model/backend.h"
#include "model/parallel.h"
#include "model/sampler.h"

// Appends up to max_new sampled tokens to ids, calling on_token(id) after each. The model sees
// at most the last ctx tokens. Stops early at the end-of-text token.
template <class F>
void generate(ModelBackend& model, std::vector<int>& ids, int max_new, int ctx, Sampler& sampler, int eos_id, F on_token) {
    std::vector<float> logits(model.config().vocab_size);
    for (int i = 0; i < max_new; i++) {
        const int n = (int)ids.size() < ctx ? (int)ids.size() : ctx;
        model.forward(ids.data() + ids.size() - n, nullptr, nullptr, 1, n);
        model.logits_at(logits.data(), 0, n - 1);
        const int next = sampler.sample(logits.data(), (int)logits.size());
        if (next == eos_id) break;
        ids.push_back(next);
        on_token(next);
    }
}

struct PerplexityResult {
    double total_nats = 0;
    long long tokens = 0;
};

// Scores every token of ids after the first, in consecutive windows of ctx targets, each
// window starting fresh (so a token sees at most ctx - 1 tokens before it). With a parallel
// context (infer --cp), each window is split over the ranks of its ring as in training: every
// rank scores its zigzag rows with their global positions, the sums are reduced over ranks;
// a window is padded at its end to a multiple of 2 x CP with ignored targets (the model is
// causal, so the padding changes no real token's score).
inline PerplexityResult perplexity(ModelBackend& model, const std::vector<int>& ids, int ctx,
                                   void (*progress)(long long done, long long total) = nullptr,
                                   const ParallelContext& px = ParallelContext{}) {
    PerplexityResult r;
    const long long total = (long long)ids.size() - 1;
    const int unit = 2 * px.cp_size;
    std::vector<int> in, tg, li, lt;
    for (long long start = 0; start < total; start += ctx) {
        const int n = (int)std::min<long long>(ctx, total - start);
        const int N = px.cp_size == 1 ? n : (n + unit - 1) / unit * unit;
        in.assign(N, 0), tg.assign(N, -1);
        for (int i = 0; i < n; i++) in[i] = ids[start + i], tg[i] = ids[start + i + 1];
        li.resize(N / px.cp_size), lt.resize(N / px.cp_size);
        px.take_rows(li.data(), in.data(), 1, N), px.take_rows(lt.data(), tg.data(), 1, N);
        const std::vector<int> pos = px.positions(N);
        model.forward(li.data(), lt.data(), nullptr, 1, N / px.cp_size, pos.data());
        double nats = model.last_loss_sum();
        px.sum(&nats, 1);
        r.total_nats += nats;
        r.tokens += n;
        if (progress) progress(r.tokens, total);
    }
    return r;
}
