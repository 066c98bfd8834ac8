// Tests for the attention probe (model/attention_probe.h) through the CPU's KV cache, and the
// pairs the copy loss asks it for (eval/copy_attention.h):
//   - queries of zero (the q rows of the QKV product zeroed) weigh every visible key alike: a
//     dense layer 1 / (p + 1) at position p, a block-sparse layer 1 / (its keys), a hidden key 0;
//   - on random weights, every query's weights over all its keys sum to 1 in every head of every
//     measured layer, NoPE with log-n included, and a dilated layer is left unmeasured (NaN);
//   - prefill in chunks of 7 gives the weights of one chunk of 64; a one-token step stays NaN;
//   - with attention sinks, each key's weight is the sinkless one scaled by its query's sum (< 1);
//   - the copy pairs: the query reads passage token j - 1 of the repeat, "next" is token j of the
//     first occurrence, "same" token j - 1, checked on the sequence's own tokens; the means, table
//     and CSV; perplexity_cached refuses a probe over windows or in chunks of fewer than 3;
//   - a cache of two sequences probes sequence 0 as a cache holding it alone.
// Prints PASS/FAIL lines and "N passed, M failed".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "eval/copy_attention.h"
#include "model/generate.h"
#include "model/gpt.h"
#include "model/kv_cache.h"
#include "tests/check.h"

// Four layers: dense rotary, dense NoPE with log-n from 8, block-sparse (window 12, blocks of 4),
// dilated (not measured). Head dim 8: small enough that a float forward is exact to 1e-6.
static GPTConfig probe_config() {
    GPTConfig c;
    c.vocab_size = 60, c.n_layer = 4, c.n_embd = 16, c.n_head = 2;
    AttnPattern bs = make_pattern(AttnKind::BlockSparse, true);
    bs.block_sparse.block = 4, bs.block_sparse.window = 12;
    c.layer_attn = {AttnPattern{}, AttnPattern{}, bs, dilated_pattern(true, {8, 16}, {1, 2})};
    c.nope_layers = {1}, c.logn_attn = 8;
    return c;
}

static std::vector<int> random_tokens(int n, int vocab, uint64_t seed) {
    SplitMix64 rng(seed);
    std::vector<int> t(n);
    for (int& x : t) x = (int)rng.below((uint64_t)vocab);
    return t;
}

// Reads tokens through a CPU cache in chunks of `chunk` (the last two or more tokens, as
// perplexity_cached reads with a probe, unless last_alone), probing `pairs`.
static AttnProbe probe_run(const GPT<float>& m, const std::vector<int>& tokens, int chunk, std::vector<ProbePair> pairs,
                           bool last_alone = false) {
    AttnProbe probe;
    probe.reset(std::move(pairs), m.cfg.n_layer, m.cfg.n_head);
    CpuIncremental cache(m, 1, chunk);
    cache.set_probe(&probe);
    for (size_t at = 0; at < tokens.size();) {
        int n = (int)std::min<size_t>(chunk, tokens.size() - at);
        if (!last_alone && n > 1 && tokens.size() - at - n == 1) n--;
        cache.append(tokens.data() + at, n);
        at += n;
    }
    return probe;
}

// max(a, b) with NaN as the largest: a check of the worst error must not pass over a NaN.
static double worst_of(double a, double b) { return std::isnan(b) ? INFINITY : std::max(a, b); }

static std::vector<ProbePair> all_keys_of(const std::vector<long long>& queries) {
    std::vector<ProbePair> pairs;
    for (long long q : queries)
        for (long long k = 0; k <= q; k++) pairs.push_back({q, k});
    return pairs;
}

static void test_zero_queries() {
    const GPTConfig cfg = probe_config();
    GPT<float> m(cfg);
    m.init_weights(3);
    const int C = cfg.n_embd;
    for (int l = 0; l < cfg.n_layer; l++) {  // out = x W^T + b: W's first C rows and b's first C entries make q
        for (int i = 0; i < C * C; i++) m.p.blocks[l].qkvw[i] = 0;
        for (int i = 0; i < C; i++) m.p.blocks[l].qkvb[i] = 0;
    }
    const std::vector<int> tokens = random_tokens(40, cfg.vocab_size, 5);
    const AttnProbe pr = probe_run(m, tokens, 7, {{30, 0}, {30, 17}, {30, 30}, {9, 4}, {39, 20}, {39, 39}});
    double worst = 0;
    for (size_t p = 0; p < pr.pairs.size(); p++)
        for (int h = 0; h < cfg.n_head; h++)
            for (int l : {0, 1}) worst = worst_of(worst, std::fabs(pr.at(p, l, h) - 1.0 / (pr.pairs[p].query + 1)));
    check(worst < 1e-6, "zero queries: a dense layer (rotary and NoPE with log-n) weighs each key 1 / (p + 1)",
          strf("worst %.2g", worst));
    // Block-sparse, window 12 (docs/attention-spec.md: 0 <= p - k < 12): the query at 30 sees keys 19..30, at 9 keys
    // 0..9, at 39 keys 28..39; keys 0 and 17 are hidden from 30.
    const bool bs = std::fabs(pr.at(0, 2, 0)) == 0 && std::fabs(pr.at(1, 2, 1)) == 0 && std::fabs(pr.at(2, 2, 0) - 1.0 / 12) < 1e-6 &&
                    std::fabs(pr.at(3, 2, 1) - 1.0 / 10) < 1e-6 && pr.at(4, 2, 0) == 0 && std::fabs(pr.at(5, 2, 1) - 1.0 / 12) < 1e-6;
    check(bs, "zero queries: a block-sparse layer weighs its window's keys alike and a hidden key 0",
          strf("w(30,30) %.4f w(9,4) %.4f w(39,39) %.4f", pr.at(2, 2, 0), pr.at(3, 2, 1), pr.at(5, 2, 1)));
    check(std::isnan(pr.at(0, 3, 0)) && std::isnan(pr.at(5, 3, 1)), "a dilated layer is not measured (NaN)");
}

static void test_sums_and_chunks() {
    const GPTConfig cfg = probe_config();
    GPT<float> m(cfg);
    m.init_weights(9);
    for (float& w : m.params) w *= 4;  // sharper attention: weights far from uniform
    const std::vector<int> tokens = random_tokens(64, cfg.vocab_size, 7);
    const std::vector<long long> queries = {1, 6, 7, 31, 63};
    const AttnProbe a = probe_run(m, tokens, 7, all_keys_of(queries)), b = probe_run(m, tokens, 64, all_keys_of(queries));
    double worst_sum = 0, worst_diff = 0, spread = 0;
    for (int l = 0; l < 3; l++)
        for (int h = 0; h < cfg.n_head; h++) {
            size_t p = 0;
            for (long long q : queries) {
                double sum = 0, mx = 0;
                for (long long k = 0; k <= q; k++, p++) {
                    sum += a.at(p, l, h), mx = worst_of(mx, (double)a.at(p, l, h));
                    worst_diff = worst_of(worst_diff, (double)std::fabs(a.at(p, l, h) - b.at(p, l, h)));
                }
                worst_sum = worst_of(worst_sum, std::fabs(sum - 1));
                if (q == 63) spread = worst_of(spread, mx);
            }
        }
    check(worst_sum < 1e-5, "random weights: each query's weights over its keys sum to 1 (every head, dense, NoPE log-n, block-sparse)",
          strf("worst |sum - 1| %.2g", worst_sum));
    check(spread > 3.0 / 64, "the check is not of uniform weights: some head at position 63 puts over 3/64 on one key",
          strf("largest weight %.3f", spread));
    check(worst_diff < 1e-6, "prefill in chunks of 7 gives the weights of one chunk of 64", strf("worst %.2g", worst_diff));
    const AttnProbe alone = probe_run(m, tokens, 7, {{63, 10}, {62, 10}}, /*last_alone=*/true);
    check(std::isnan(alone.at(0, 0, 0)) && std::isfinite(alone.at(1, 0, 0)),
          "a one-token step (the dense layers' decode) is not probed: its pairs stay NaN (perplexity_cached never reads one)");
}

// With sinks the keys' weights are the sinkless model's scaled by one factor per query, their own
// sum (1 less the sink's share, below 1): the same weights otherwise, the sinks far from -inf.
static void test_sinks() {
    const GPTConfig plain = probe_config();
    GPTConfig with = plain;
    with.attn_sink = true;
    GPT<float> a(plain), b(with);
    a.init_weights(9);
    b.init_weights(9);
    for (float& w : a.params) w *= 4;
    for (const ParamTensor& t : b.layout) {
        if (t.name.find("attn.sink") != std::string::npos) {
            for (size_t i = 0; i < t.size; i++) b.params[t.offset + i] = 1.0f + (float)i;
            continue;
        }
        const auto same = std::find_if(a.layout.begin(), a.layout.end(), [&](const ParamTensor& p) { return p.name == t.name; });
        std::copy(a.params.begin() + same->offset, a.params.begin() + same->offset + same->size, b.params.begin() + t.offset);
    }
    const std::vector<int> tokens = random_tokens(64, plain.vocab_size, 7);
    const std::vector<long long> queries = {1, 6, 31, 63};
    // Layer 0 only: the layers above it see another input once layer 0's sinks take their share.
    const AttnProbe pa = probe_run(a, tokens, 7, all_keys_of(queries)), pb = probe_run(b, tokens, 7, all_keys_of(queries));
    double worst = 0, lowest_sum = 1;
    for (int h = 0; h < plain.n_head; h++) {
        size_t p = 0;
        for (long long q : queries) {
            double sum = 0;
            for (long long k = 0; k <= q; k++) sum += pb.at(p + k, 0, h);
            for (long long k = 0; k <= q; k++, p++) worst = worst_of(worst, std::fabs(pb.at(p, 0, h) - pa.at(p, 0, h) * sum));
            lowest_sum = std::min(lowest_sum, sum);
        }
    }
    check(worst < 1e-5 && lowest_sum < 0.99, "sinks: each key's weight is the sinkless one times the query's sum, which is below 1",
          strf("worst %.2g, lowest sum %.3f", worst, lowest_sum));
}

static void test_copy_pairs() {
    Haystack hay;
    hay.source = "distinct tokens";
    for (int i = 0; i < 400; i++) hay.tokens.push_back(5 + i);
    hay.cut_ok.assign(hay.tokens.size() + 1, 1);
    const std::vector<CopyItem> items = place_copy_items(hay, CopyLossOptions{{16, 100}, 12, 2, 4});
    bool ok = true;
    for (const CopyItem& it : items) {
        const std::vector<int> ids = copy_sequence(hay, it, 1);
        const std::vector<ProbePair> pairs = copy_probe_pairs(it);
        const int P1 = it.passage - 1;
        ok = ok && (int)pairs.size() == 2 * P1;
        for (int j = 1; j < it.passage && ok; j++) {
            const ProbePair next = pairs[j - 1], same = pairs[P1 + j - 1];
            // The query reads passage token j - 1 of the repeat and predicts token j.
            ok = next.query == it.repeat_at() + j - 1 && ids[next.query + 1] == ids[it.repeat_at() + j] &&
                 ids[next.key] == ids[next.query + 1] && ids[next.key - 1] == ids[next.query] &&  // "next": the token to write
                 same.query == next.query && ids[same.key] == ids[same.query] && same.key < it.repeat_at();
        }
    }
    check(ok, "copy pairs: the query reads token j - 1 of the repeat; next = token j, same = token j - 1 of the first occurrence");

    // The probe through run_copy_loss: every pair measured in the measured layers.
    const GPTConfig cfg = probe_config();
    GPTConfig c = cfg;
    c.vocab_size = 500;
    GPT<float> m(c);
    m.init_weights(4);
    std::vector<AttnProbe> probes(items.size());
    for (size_t i = 0; i < items.size(); i++) probes[i].reset(copy_probe_pairs(items[i]), c.n_layer, c.n_head);
    auto factory = [&] { return std::unique_ptr<IncrementalModel>(new CpuIncremental(m, 1, 9)); };
    run_copy_loss(hay, items, 1, factory, c, 512, nullptr, &probes);
    bool measured = true;
    for (const AttnProbe& pr : probes)
        for (size_t p = 0; p < pr.pairs.size(); p++)
            for (int h = 0; h < c.n_head; h++)
                measured = measured && std::isfinite(pr.at(p, 0, h)) && pr.at(p, 0, h) >= 0 && pr.at(p, 0, h) <= 1 &&
                           std::isnan(pr.at(p, 3, h));
    check(measured, "run_copy_loss with probes: every pair measured in each dense layer (a weight in [0, 1]), none in the dilated one");
    const CopyAttention a = copy_attention_of(items[0], probes[0]);
    const int P1 = items[0].passage - 1;
    double next = 0, same = 0;
    for (int j = 0; j < P1; j++) next += probes[0].at(j, 1, 1), same += probes[0].at(P1 + j, 1, 1);
    check(std::fabs(a.next[1 * c.n_head + 1] - next / P1) < 1e-6 && std::fabs(a.same[1 * c.n_head + 1] - same / P1) < 1e-6 &&
              std::fabs(next - same) > 1e-6,
          "copy_attention_of: the means over the next pairs and over the same pairs (which differ)");
    std::vector<CopyAttention> attn;
    for (size_t i = 0; i < items.size(); i++) attn.push_back(copy_attention_of(items[i], probes[i]));
    check_copy_attention(attn, c);
    check(true, "check_copy_attention: every measured layer's means are numbers");
    CopyAttention hole = attn[0];
    hole.next[2 * c.n_head] = std::nanf("");
    expect_fatal("a measured layer left NaN", [&] { check_copy_attention({hole}, c); }, {"internal: the attention probe left layer 2 head 0 unmeasured"});
    const std::vector<CopyAttentionRow> rows = summarize_copy_attention(items, attn);
    int best = 0;
    for (int h = 1; h < c.n_head; h++)
        if (rows[0].mean.next[(size_t)1 * c.n_head + h] > rows[0].mean.next[(size_t)1 * c.n_head + best]) best = h;
    const std::string table = format_copy_attention_table(rows, c);
    char cell[64];
    std::snprintf(cell, sizeof cell, " h%-2d %7.3f / %6.3f", best, rows[0].mean.next[(size_t)1 * c.n_head + best],
                  rows[0].mean.same[(size_t)1 * c.n_head + best]);
    check(table.find("layer 2") != std::string::npos && table.find("layer 3") == std::string::npos && table.find("100") != std::string::npos &&
              table.find(cell) != std::string::npos,
          "the table has a column per measured layer, a row per gap, and layer 1's best head at gap 16 with its weights", table);
    const std::string csv = copy_attention_csv(items, attn, c);
    check(std::count(csv.begin(), csv.end(), '\n') == 1 + (long)items.size() * 3 * c.n_head && csv.find(",3,") == std::string::npos,
          "PREFIX_attn.csv: a row per sequence, measured layer and head; none for the dilated layer");

    expect_fatal("a probe over windows", [&] {
        AttnProbe pr;
        pr.reset(copy_probe_pairs(items.back()), c.n_layer, c.n_head);
        perplexity_cached(factory, c, copy_sequence(hay, items.back(), 1), 64, nullptr, nullptr, false, nullptr, &pr);
    }, {"the attention probe reads a document in one window", "--ctx of at least"});
    expect_fatal("a probe with chunks of 2", [&] {
        AttnProbe pr;
        pr.reset(copy_probe_pairs(items[0]), c.n_layer, c.n_head);
        perplexity_cached([&] { return std::unique_ptr<IncrementalModel>(new CpuIncremental(m, 1, 2)); }, c,
                          copy_sequence(hay, items[0], 1), 512, nullptr, nullptr, false, nullptr, &pr);
    }, {"the attention probe reads chunks of 3 or more tokens (got --chunk 2)"});
}

// A cache of two sequences probes sequence 0: the weights of a cache holding it alone, whatever
// sequence 1 holds.
static void test_two_sequences() {
    const GPTConfig cfg = probe_config();
    GPT<float> m(cfg);
    m.init_weights(6);
    const int N = 40, chunk = 8;
    const std::vector<int> t0 = random_tokens(N, cfg.vocab_size, 21), t1 = random_tokens(N, cfg.vocab_size, 22);
    const std::vector<long long> queries = {12, 39};
    const AttnProbe alone = probe_run(m, t0, chunk, all_keys_of(queries));
    AttnProbe two;
    two.reset(all_keys_of(queries), cfg.n_layer, cfg.n_head);
    CpuIncremental cache(m, 2, chunk);
    cache.set_probe(&two);
    for (int at = 0; at < N; at += chunk) {
        std::vector<int> both(t0.begin() + at, t0.begin() + at + chunk);
        both.insert(both.end(), t1.begin() + at, t1.begin() + at + chunk);
        cache.append(both.data(), chunk);
    }
    double worst = 0;
    for (size_t i = 0; i < alone.weights.size(); i++)
        worst = worst_of(worst, std::isnan(alone.weights[i]) && std::isnan(two.weights[i]) ? 0.0 : std::fabs(alone.weights[i] - two.weights[i]));
    check(worst < 1e-6, "a cache of two sequences probes sequence 0 as a cache holding it alone", strf("worst %.2g", worst));
}

int main() {
    return guarded_main([] {
        test_zero_queries();
        test_sums_and_chunks();
        test_sinks();
        test_copy_pairs();
        test_two_sequences();
        return check_report();
    });
}
