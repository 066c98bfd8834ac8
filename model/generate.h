// Generation and perplexity on any backend. Both recompute the whole context window for each
// step (no KV cache yet): simple, and exact for every attention pattern.
#pragma once
#include <string>
#include <vector>
#include "data/tokenizer.h"
#include "model/backend.h"
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
// window starting fresh (so a token sees at most ctx - 1 tokens before it).
inline PerplexityResult perplexity(ModelBackend& model, const std::vector<int>& ids, int ctx,
                                   void (*progress)(long long done, long long total) = nullptr) {
    PerplexityResult r;
    const long long total = (long long)ids.size() - 1;
    for (long long start = 0; start < total; start += ctx) {
        const int n = (int)std::min<long long>(ctx, total - start);
        const double mean = model.forward(ids.data() + start, ids.data() + start + 1, nullptr, 1, n);
        r.total_nats += mean * n;
        r.tokens += n;
        if (progress) progress(r.tokens, total);
    }
    return r;
}
