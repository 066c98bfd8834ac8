// Generation and perplexity on any backend. generate and perplexity recompute whole windows
// (simple, any backend, and what --cp runs); generate_cached and perplexity_cached run through
// a KV cache (model/kv_cache.h): the prompt or document prefilled in chunks, tokens decoded one
// at a time, every token at its global position.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "model/backend.h"
#include "model/kv_cache.h"
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

// progress(done, total) as the work goes; a callable rather than a function pointer, so that a
// caller keeps its progress state (the documents before this one, say) in a local.
using ProgressFn = std::function<void(long long done, long long total)>;

struct PerplexityResult {
    double total_nats = 0;
    long long tokens = 0;
};

// Scores every token of ids after the first, in windows of ctx tokens, each window from
// scratch. stride = ctx (or 0): consecutive windows, so a token sees at most ctx - 1 tokens
// before it. stride = ctx / 2: windows overlapping by half, each scoring only its last `stride`
// targets (the first window: all), so every token sees at least ctx - stride tokens before it
// (or all of them), what perplexity_cached's windows give, without a cache. With a parallel
// context (infer --cp), each window is split over the ranks of its ring as in training: every
// rank scores its zigzag rows with their global positions, the sums are reduced over ranks;
// a window is padded at its end to a multiple of 2 x CP with ignored targets (the model is
// causal, so the padding changes no real token's score).
inline PerplexityResult perplexity(ModelBackend& model, const std::vector<int>& ids, int ctx,
                                   const ProgressFn& progress = nullptr,
                                   const ParallelContext& px = ParallelContext{}, int stride = 0) {
    PerplexityResult r;
    if (stride <= 0 || stride > ctx) stride = ctx;
    const long long total = (long long)ids.size() - 1;
    const int unit = 2 * px.cp_size;
    std::vector<int> in, tg, li, lt;
    for (long long start = 0; start < total; start += stride) {
        const int n = (int)std::min<long long>(ctx, total - start);
        const long long score_from = start == 0 ? 0 : start + (ctx - stride);  // earlier targets: the window before's
        const int N = px.cp_size == 1 ? n : (n + unit - 1) / unit * unit;
        in.assign(N, 0), tg.assign(N, -1);
        for (int i = 0; i < n; i++) in[i] = ids[start + i], tg[i] = start + i >= score_from ? ids[start + i + 1] : -1;
        li.resize(N / px.cp_size), lt.resize(N / px.cp_size);
        px.take_rows(li.data(), in.data(), 1, N), px.take_rows(lt.data(), tg.data(), 1, N);
        const std::vector<int> pos = px.positions(N);
        model.forward(li.data(), lt.data(), nullptr, 1, N / px.cp_size, pos.data());
        double nats = model.last_loss_sum();
        px.sum(&nats, 1);
        r.total_nats += nats;
        r.tokens += n - std::max<long long>(0, std::min<long long>(n, score_from - start));
        if (progress) progress(r.tokens, total);
        if (start + n >= total) break;
    }
    return r;
}

// Prefills ids[from..] into the cache in chunks (the cache holds what comes before: nothing, or a
// loaded prompt), calls after_prefill(), then appends up to max_new sampled tokens, calling
// on_token(id) after each; stops early at the end-of-text token. With nothing to prefill, the
// first token comes from the cache's last position. progress(done, total) after each chunk.
template <class F, class G>
void generate_cached(IncrementalModel& m, int vocab, std::vector<int>& ids, size_t from, int max_new, Sampler& sampler,
                     int eos_id, F on_token, G after_prefill, const ProgressFn& progress = nullptr) {
    std::vector<float> logits(vocab);
    const long long todo = (long long)ids.size() - (long long)from;
    for (long long at = 0; at < todo;) {
        const int n = (int)std::min<long long>(m.max_chunk(), todo - at);
        m.append(ids.data() + from + at, n);
        at += n;
        if (progress) progress(at, todo);
    }
    after_prefill();
    int last = todo > 0 ? (int)((todo - 1) % m.max_chunk()) : 0;  // the last prefilled token's row in its chunk
    for (int i = 0; i < max_new; i++) {
        m.logits(logits.data(), 0, last);
        const int next = sampler.sample(logits.data(), (int)logits.size());
        if (next == eos_id) break;
        ids.push_back(next);
        on_token(next);
        if (i + 1 < max_new) m.append(&next, 1), last = 0;
    }
}

// Continues B prompts at once through a cache of B sequences that each hold the same context
// (IncrementalModel::replicate): every step appends one token to every sequence, so they stay at
// the same position. A sequence still in its prompt is fed its next prompt token; one past it,
// its last sampled token. Each samples up to max_new tokens (stopping at end-of-text), calling
// on_token(b, id) after each; prompts must not be empty. Returns the decode steps run.
template <class F>
long long generate_batch(IncrementalModel& m, int vocab, const std::vector<std::vector<int>>& prompts, int max_new,
                         Sampler& sampler, int eos_id, F on_token) {
    const int B = (int)prompts.size();
    std::vector<float> logits(vocab);
    std::vector<int> input(B, 0), made(B, 0);
    std::vector<char> done(B, max_new < 1);
    for (const std::vector<int>& p : prompts)
        if (p.empty()) fatal("generate_batch: an empty prompt (each needs at least one token)");
    long long steps = 0;
    for (long long t = 0;; t++) {
        bool all_done = true;
        for (int b = 0; b < B; b++) all_done = all_done && done[b];
        if (all_done) break;
        for (int b = 0; b < B; b++)
            if (t < (long long)prompts[b].size()) input[b] = prompts[b][t];  // else: its last sample, set below
        m.append(input.data(), 1);
        steps++;
        for (int b = 0; b < B; b++) {
            if (done[b] || t + 1 < (long long)prompts[b].size()) continue;
            m.logits(logits.data(), b, 0);
            const int next = sampler.sample(logits.data(), vocab);
            if (next == eos_id) {
                done[b] = 1;
                continue;
            }
            on_token(b, next);
            input[b] = next;
            done[b] = ++made[b] >= max_new;
        }
    }
    return steps;
}

// Mean loss per bucket of positions in the document [2^k, 2^(k+1)) (bucket 0 holds position 0
// too): how well a model uses its context (infer --per-position). The position is the token's
// place in the document, whatever window scored it.
struct PositionLosses {
    std::vector<double> nats;
    std::vector<long long> tokens;
    void add(long long pos, double loss) {
        int k = 0;
        while ((2LL << k) <= pos) k++;
        if ((int)nats.size() <= k) nats.resize(k + 1, 0), tokens.resize(k + 1, 0);
        nats[k] += loss, tokens[k]++;
    }
};

// Scores every token of ids after the first through the cache. When every layer's cache is
// bounded (dilated) or the document fits in ctx, in one window over the whole document: every
// token sees all the context its pattern allows. Otherwise in windows of ctx overlapping by half,
// each a fresh cache, scoring the second half (the first window: all of it), so every token
// sees at least ctx / 2 tokens before it (or all of them). factory() gives a fresh cache.
// sliding: windows of ctx overlapping by half even when one window would do (a long-context
// model scored with a short context, to measure what its context is worth). per_token, when
// given, gets every token's loss: (*per_token)[i] is the loss of predicting ids[i + 1], from the
// window that scored it (the copy loss, eval/copy_loss.h, reads spans of it). probe, when given,
// gets the attention weights of its pairs (positions in ids; model/attention_probe.h): only where
// the document is read in one window, and then in chunks of two or more tokens.
template <class Factory>
PerplexityResult perplexity_cached(Factory factory, const GPTConfig& cfg, const std::vector<int>& ids, int ctx,
                                   PositionLosses* by_position = nullptr,
                                   const ProgressFn& progress = nullptr, bool sliding = false,
                                   std::vector<float>* per_token = nullptr, AttnProbe* probe = nullptr) {
    PerplexityResult r;
    const long long total = (long long)ids.size() - 1;
    if (per_token) per_token->assign((size_t)std::max(0LL, total), std::nanf(""));  // every entry is set below
    bool bounded = true;
    for (int l = 0; l < cfg.n_layer; l++) bounded = bounded && kv_cache_rows(cfg.attn(l)) >= 0;
    const bool one_window = (bounded && !sliding) || total <= ctx;
    const long long window = one_window ? total : ctx, stride = one_window ? total : ctx / 2;
    if (probe && !one_window)
        fatal("the attention probe reads a document in one window: its %lld tokens need --ctx of at least %lld (got %d)", total,
              total, ctx);
    std::vector<float> losses;
    std::vector<int> tg;
    for (long long start = 0; start < total; start += stride) {
        std::unique_ptr<IncrementalModel> m = factory();
        if (probe && m->max_chunk() < kProbeMinChunk)
            fatal("the attention probe reads chunks of %d or more tokens (got --chunk %d): give --chunk 0 or at least %d",
                  kProbeMinChunk, m->max_chunk(), kProbeMinChunk);
        if (probe) m->set_probe(probe);
        const long long end = std::min(start + window, total), score_from = start == 0 ? 0 : start + (window - stride);
        for (long long at = start; at < end;) {
            int n = (int)std::min<long long>(m->max_chunk(), end - at);
            if (probe && n > 1 && end - at - n == 1) n--;  // no last chunk of one token: a step that may not be probed
            m->append(ids.data() + at, n);
            tg.assign(ids.begin() + at + 1, ids.begin() + at + 1 + n);
            for (int i = 0; i < n; i++)
                if (at + i < score_from) tg[i] = -1;  // context only: scored by the window before
            losses.resize(n);
            m->losses(losses.data(), tg.data());
            for (int i = 0; i < n; i++) {
                if (tg[i] < 0) continue;
                r.total_nats += losses[i], r.tokens++;
                if (by_position) by_position->add(at + i, losses[i]);
                if (per_token) (*per_token)[(size_t)(at + i)] = losses[i];
            }
            at += n;
            if (progress) progress(r.tokens, total);
        }
        if (end == total) break;
    }
    return r;
}
