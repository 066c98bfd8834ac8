// Tests for the copy loss by gap (eval/copy_loss.h, infer --copy-loss): the sequences laid out
// exactly (the repeat is the first occurrence token for token, the gap exactly G, every end at a
// cut, starts deterministic in the seed and distinct per sample); a haystack too small fails in
// one line; the per-token losses through the KV cache are a plain forward's, token for token, in
// one window and in windows of ctx; a model that copies whatever its window holds scores the
// repeat at 0 when it sees the first occurrence and exactly as the first occurrence when the gap
// passes its window; and the summary reads the right spans (a loss vector whose every entry
// outside them is wrong, so an off-by-one fails). Prints PASS/FAIL lines and "N passed, M failed".
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "data/tasks.h"
#include "data/train_tokenizer.h"
#include "eval/copy_loss.h"
#include "model/generate.h"
#include "model/gpt.h"
#include "model/kv_cache.h"
#include "tests/check.h"
#include "tests/test_text.h"


// A haystack of n distinct tokens (first, first + 1, ...), every place a cut: no two-token
// sequence occurs twice in it, so only the copy repeats one.
static Haystack distinct_haystack(long long n, int first) {
    Haystack h;
    h.source = "distinct tokens";
    for (long long i = 0; i < n; i++) h.tokens.push_back(first + (int)i);
    h.cut_ok.assign((size_t)n + 1, 1);
    return h;
}

// A "model" that copies whatever its cache holds: predicting t after x costs nothing when x was
// followed by t earlier in this cache, else base(x, t), a value that differs from pair to pair.
// Through perplexity_cached's windows (a fresh cache each) it sees only what its window holds.
static double copier_base(int x, int t) { return 1.0 + ((x * 131 + t * 31) % 97) / 97.0; }

class CopierCache : public IncrementalModel {
  public:
    explicit CopierCache(int max_chunk) : max_chunk_(max_chunk) {}
    void append(const int* tokens, int n) override {
        last_.assign(tokens, tokens + n);
        seen_.insert(seen_.end(), tokens, tokens + n);
    }
    void logits(float*, int, int) override { fatal("internal: the copier gives losses only"); }
    void losses(float* out, const int* targets) override {
        const long long p0 = (long long)seen_.size() - (long long)last_.size();
        for (size_t i = 0; i < last_.size(); i++) {
            const int x = last_[i], t = targets[i];
            bool copied = false;
            for (long long q = 0; q < p0 + (long long)i && !copied; q++) copied = seen_[q] == x && seen_[q + 1] == t;
            out[i] = t < 0 ? 0.0f : copied ? 0.0f : (float)copier_base(x, t);
        }
    }
    long long position() const override { return (long long)seen_.size(); }
    size_t bytes() const override { return seen_.size() * sizeof(int); }
    int max_chunk() const override { return max_chunk_; }
    State export_state() override { fatal("internal: the copier has no state to export"); }
    void import_state(const State&) override { fatal("internal: the copier imports no state"); }
    void gather(const IncrementalModel&, const std::vector<int>&) override { fatal("internal: the copier gathers nothing"); }
    int batch() const override { return 1; }

  private:
    int max_chunk_;
    std::vector<int> last_, seen_;
};

static GPTConfig dense_config(int vocab) {
    GPTConfig c;
    c.vocab_size = vocab, c.n_layer = 2, c.n_embd = 24, c.n_head = 2;
    return c;
}

// ---- the flags

static void test_options() {
    const std::vector<long long> g = parse_gaps("2K,8k,1M,300");
    check(g == std::vector<long long>{2048, 8192, 1048576, 300}, "--gaps 2K,8k,1M,300 reads 2048, 8192, 1048576, 300");
    expect_fatal("--gaps with a stray comma", [] { parse_gaps("2K,,8K"); }, {"--gaps '2K,,8K'", "stray comma"});
    expect_fatal("--gaps ending in a comma", [] { parse_gaps("2K,"); }, {"stray comma"});
    expect_fatal("--gaps 0", [] { parse_gaps("0"); }, {"--gaps '0' must be an integer in [1, 268435456]"});
    expect_fatal("--gaps 2X", [] { parse_gaps("2X"); }, {"--gaps '2X' must be an integer"});
    expect_fatal("--gaps -5", [] { parse_gaps("-5"); }, {"--gaps '-5' must be an integer"});
    expect_fatal("--gaps past 2^28", [] { parse_gaps("257M"); }, {"--gaps '257' must be an integer in [1, 256]"});
    expect_fatal("--gaps with a gap twice", [] { parse_gaps("2K,2048"); }, {"--gaps lists entry 1 again as entry 2"});
    CopyLossOptions o{{64}, 0, 1, 1};
    expect_fatal("--copy-passage 0", [&] { check_copy_loss_options(o); }, {"--copy-passage must be at least 2 (got 0)"});
    o.passage = 8, o.samples = 0;
    expect_fatal("--copy-samples 0", [&] { check_copy_loss_options(o); }, {"--copy-samples"});
    o.samples = 1, o.gaps = {};
    expect_fatal("no gaps", [&] { check_copy_loss_options(o); }, {"--gaps"});
}

// ---- the sequences

static void test_layout(const Haystack& hay, int bos) {
    CopyLossOptions o{{16, 100, 1000}, 12, 5, 7};
    const std::vector<CopyItem> items = place_copy_items(hay, o);
    bool order = items.size() == 15, exact = true, cuts = true;
    std::string detail;
    for (size_t i = 0; i < items.size(); i++) {
        const CopyItem& it = items[i];
        order = order && it.gap == o.gaps[i / 5] && it.sample == (int)(i % 5) && it.passage == 12;
        const std::vector<int> ids = copy_sequence(hay, it, bos);
        const long long P = it.passage, G = it.gap, s = it.start, r = it.repeat_at();
        bool ok = (long long)ids.size() == 1 + 2 * P + G && it.length() == (long long)ids.size() && ids[0] == bos && r == 1 + P + G;
        for (long long j = 0; ok && j < P; j++) ok = ids[1 + j] == hay.tokens[s + j] && ids[r + j] == ids[1 + j];
        for (long long j = 0; ok && j < G; j++) ok = ids[1 + P + j] == hay.tokens[s + P + j];
        if (!ok && detail.empty()) detail = strf("gap %lld sample %d start %lld", G, it.sample, s);
        exact = exact && ok;
        cuts = cuts && hay.cut_ok[s] && hay.cut_ok[s + P] && hay.cut_ok[s + P + G];
    }
    check(order, "items gap by gap (16, 100, 1000), samples 0..4 each, passage 12");
    check(exact, "each sequence: BOS, H[s, s+P), the G tokens after it, H[s, s+P) again (the repeat token for token)", detail);
    check(cuts, "the passage's start and end and the gap's end are cuts of the haystack");
    bool distinct = true;
    for (size_t a = 0; a < items.size(); a++)
        for (size_t b = a + 1; b < items.size(); b++)
            if (items[a].gap == items[b].gap && items[a].start == items[b].start) distinct = false;
    check(distinct, "the samples of a gap start at different places");
    const std::vector<CopyItem> again = place_copy_items(hay, o);
    bool same = again.size() == items.size();
    for (size_t i = 0; same && i < items.size(); i++) same = again[i].start == items[i].start;
    check(same, "the same seed places the same passages");
    o.seed = 8;
    const std::vector<CopyItem> other = place_copy_items(hay, o);
    int moved = 0;
    for (size_t i = 0; i < items.size(); i++) moved += other[i].start != items[i].start;
    check(moved >= 12, "another seed places them elsewhere", strf("%d of 15 moved", moved));
    // A start depends on (seed, gap, sample) only, not on the other gaps of the run.
    const std::vector<CopyItem> alone = place_copy_items(hay, CopyLossOptions{{100}, 12, 5, 7});
    bool independent = alone.size() == 5;
    for (size_t i = 0; independent && i < 5; i++) independent = alone[i].start == items[5 + i].start;
    check(independent, "gap 100's passages are the same without the other gaps");
}

static void test_too_small(const Haystack& hay) {
    const long long n = (long long)hay.tokens.size();
    expect_fatal("a haystack smaller than passage + gap",
                 [&] { place_copy_items(hay, CopyLossOptions{{n}, 12, 1, 1}); },
                 {"--copy-loss test text holds " + std::to_string(n) + " tokens", "fewer than the " + std::to_string(n + 12),
                  "gap of " + format_length(n), "larger haystack", "smaller --gaps"});
    const Haystack tiny = distinct_haystack(50, 3);
    const std::vector<CopyItem> exact = place_copy_items(tiny, CopyLossOptions{{38}, 12, 1, 1});
    check(exact.size() == 1 && exact[0].start == 0, "a haystack of exactly passage + gap tokens holds one passage, at 0");
    expect_fatal("one token short", [&] { place_copy_items(tiny, CopyLossOptions{{39}, 12, 1, 1}); },
                 {"holds 50 tokens, fewer than the 51", "gap of 39"});
    expect_fatal("more samples than places", [&] { place_copy_items(tiny, CopyLossOptions{{37}, 12, 3, 1}); },
                 {"only 2 distinct passages", "--copy-samples 3"});
}

// ---- the losses through the cache

// Per-token losses of a forward over ids[start, end) scoring targets from `from` on, into want.
static void forward_losses(GPT<float>& m, const std::vector<int>& ids, long long start, long long end, long long from,
                           std::vector<float>& want) {
    std::vector<int> tg(ids.begin() + start + 1, ids.begin() + end + 1);
    for (long long i = 0; i < end - start; i++)
        if (start + i < from) tg[i] = -1;
    m.forward(ids.data() + start, tg.data(), nullptr, 1, (int)(end - start));
    for (long long i = 0; i < end - start; i++)
        if (start + i >= from) want[start + i] = m.losses[i];
}

static void test_cache_matches_forward(const Haystack& hay, int bos, int vocab, bool dilated) {
    GPTConfig cfg = dense_config(vocab);
    if (dilated) cfg.layer_attn.assign(cfg.n_layer, dilated_pattern(true, {4, 8}, {1, 2}));
    GPT<float> m(cfg);
    m.init_weights(11);
    const CopyItem it = place_copy_items(hay, CopyLossOptions{{30}, 10, 1, 3})[0];
    const std::vector<int> ids = copy_sequence(hay, it, bos);
    const long long total = (long long)ids.size() - 1;
    auto factory = [&] { return std::unique_ptr<IncrementalModel>(new CpuIncremental(m, 1, 7)); };
    // One window (ctx holds the sequence; for the dilated model whatever ctx), then windows of 16.
    for (int ctx : {64, 16}) {
        std::vector<float> got, want((size_t)total, -1.0f);
        const PerplexityResult r = perplexity_cached(factory, cfg, ids, ctx, nullptr, nullptr, false, &got);
        const bool one = dilated || total <= ctx;
        for (long long start = 0; start < total; start += one ? total : ctx / 2) {
            const long long end = std::min(start + (one ? total : ctx), total), from = start == 0 ? 0 : start + (one ? 0 : ctx / 2);
            forward_losses(m, ids, start, end, from, want);
            if (end == total) break;
        }
        double worst = 0, sum = 0;
        for (long long i = 0; i < total; i++) worst = std::max(worst, (double)std::fabs(got[i] - want[i])), sum += got[i];
        check((long long)got.size() == total && worst < 1e-4 && std::fabs(sum - r.total_nats) < 1e-3 && r.tokens == total,
              strf("%s model, ctx %d (%s): per-token losses through the cache == a plain forward, token for token", dilated ? "dilated" : "dense",
                   ctx, one ? "one window" : "windows of 16 overlapping by half"),
              strf("worst %.2g over %lld tokens", worst, total));
        // The copy loss reads those same numbers.
        const std::vector<CopyScore> s = run_copy_loss(hay, {it}, bos, factory, cfg, ctx);
        const CopyScore w = copy_score(it, want);
        check(std::fabs(s[0].first - w.first) < 1e-4 && std::fabs(s[0].repeat - w.repeat) < 1e-4,
              strf("%s model, ctx %d: run_copy_loss scores what the forward's losses give", dilated ? "dilated" : "dense", ctx));
    }
}

// ---- what the summary reads

// A copier that sees the first occurrence: the repeat at 0, the first occurrence at its true
// value; one whose window the gap passes: the repeat exactly as the first occurrence.
static void test_copier() {
    const Haystack hay = distinct_haystack(3000, 5);
    GPTConfig cfg = dense_config(4000);
    cfg.n_layer = 1;  // unbounded (dense): perplexity_cached's windows of ctx apply
    const CopyLossOptions o{{64, 1000}, 8, 3, 2};
    const std::vector<CopyItem> items = place_copy_items(hay, o);
    auto factory = [] { return std::unique_ptr<IncrementalModel>(new CopierCache(5)); };
    const int bos = 1;
    // The first occurrence's true value: the mean of base over passage tokens 1..7.
    std::vector<double> truth(items.size()), truth_half(items.size());
    for (size_t i = 0; i < items.size(); i++) {
        const std::vector<int> ids = copy_sequence(hay, items[i], bos);
        for (int j = 1; j < 8; j++) truth[i] += copier_base(ids[j], ids[1 + j]) / 7;
        for (int j = 4; j < 8; j++) truth_half[i] += copier_base(ids[j], ids[1 + j]) / 4;
    }
    const std::vector<CopyScore> whole = run_copy_loss(hay, items, bos, factory, cfg, 1 << 20);
    bool zero = true, first_true = true;
    for (size_t i = 0; i < items.size(); i++) {
        zero = zero && whole[i].repeat == 0 && whole[i].repeat_second_half == 0;
        first_true = first_true && std::fabs(whole[i].first - truth[i]) < 1e-6;
    }
    check(zero, "a copier that sees the whole sequence: repeat loss 0 at every gap");
    check(first_true, "... and the first occurrence at its true value (mean over tokens 1..P-1)",
          strf("%.6f vs %.6f", whole[0].first, truth[0]));
    const std::vector<CopyLossRow> rows = summarize_copy_loss(items, whole);
    check(rows.size() == 2 && rows[0].gap == 64 && rows[1].gap == 1000 && rows[0].samples == 3 && rows[0].passage == 8 &&
              std::fabs(rows[1].first - (truth[3] + truth[4] + truth[5]) / 3) < 1e-6 && rows[1].repeat == 0,
          "the summary: a row per gap, its samples' mean");
    // Windows of 32 overlapping by half: the repeat sees at most 31 tokens back, never the first occurrence.
    const std::vector<CopyScore> windowed = run_copy_loss(hay, items, bos, factory, cfg, 32);
    bool same = true;
    for (size_t i = 0; i < items.size(); i++)
        same = same && std::fabs(windowed[i].repeat - truth[i]) < 1e-6 && std::fabs(windowed[i].first - truth[i]) < 1e-6 &&
               std::fabs(windowed[i].repeat_second_half - truth_half[i]) < 1e-6;
    check(same, "the same copier limited to a window of 32 (gaps 64, 1000): repeat loss == first-occurrence loss",
          strf("repeat %.6f first %.6f", windowed[0].repeat, windowed[0].first));
    const CopyLossOptions near{{8}, 8, 2, 2};
    const std::vector<CopyItem> close = place_copy_items(hay, near);
    const std::vector<CopyScore> seen = run_copy_loss(hay, close, bos, factory, cfg, 32);
    check(seen[0].repeat == 0 && seen[1].repeat == 0 && seen[0].first > 1, "... and with a gap of 8 inside that window: repeat loss 0");
    const std::string table = format_copy_loss_table(rows), csv = copy_loss_csv(rows), items_csv = copy_items_csv(items, whole);
    check(table.find("1000") != std::string::npos && table.find("      64        3        8") != std::string::npos,
          "the table: a row per gap with its samples and passage", table);
    check(csv.rfind(kCopyLossCsvHeader, 0) == 0 && csv.find("\n64,3,8,") != std::string::npos &&
              csv.find("\n1000,3,8,") != std::string::npos && std::count(csv.begin(), csv.end(), '\n') == 3,
          "PREFIX.csv: the header and a row per gap");
    check(items_csv.rfind(kCopyItemsCsvHeader, 0) == 0 && std::count(items_csv.begin(), items_csv.end(), '\n') == 7 &&
              items_csv.find(strf("\n1000,2,%lld,", items[5].start)) != std::string::npos,
          "PREFIX_items.csv: the header and a row per passage");
    // PREFIX_positions.csv: a row per passage token j = 1..7 of each sequence, in order: its id (the
    // sequence's token 1 + j), the copier's loss on it at the first occurrence, 0 on the repeat.
    const std::string pos_csv = copy_positions_csv(hay, items, whole);
    bool rows_ok = pos_csv.rfind(kCopyPositionsCsvHeader, 0) == 0 &&
                   std::count(pos_csv.begin(), pos_csv.end(), '\n') == 1 + 7 * (long)items.size();
    size_t at = pos_csv.find('\n') + 1;
    std::string bad;
    for (size_t i = 0; i < items.size() && rows_ok; i++) {
        const std::vector<int> ids = copy_sequence(hay, items[i], bos);
        for (int j = 1; j < 8 && rows_ok; j++, at = pos_csv.find('\n', at) + 1) {
            long long gap = 0;
            int sample = 0, position = 0, token = 0;
            double first = 0, repeat = 0;
            rows_ok = std::sscanf(pos_csv.c_str() + at, "%lld,%d,%d,%d,%lf,%lf", &gap, &sample, &position, &token, &first, &repeat) == 6 &&
                      gap == items[i].gap && sample == items[i].sample && position == j && token == ids[(size_t)(1 + j)] &&
                      std::fabs(first - copier_base(ids[(size_t)j], ids[(size_t)(1 + j)])) < 1e-5 && repeat == 0;
            if (!rows_ok) bad = pos_csv.substr(at, pos_csv.find('\n', at) - at);
        }
    }
    check(rows_ok, "PREFIX_positions.csv: a row per passage token 1..P-1: its id, its loss at the first occurrence and the repeat", bad);
    std::vector<CopyScore> short_scores = whole;
    short_scores[2].repeat_tokens.pop_back();
    expect_fatal("positions of a score missing a token's loss", [&] { copy_positions_csv(hay, items, short_scores); },
                 {"internal: 7 and 6 token losses for a passage of 8 tokens"});
}

// The spans to the token: a loss vector that is 0 exactly where the repeat's tokens 1..P-1 are
// scored, 9 at its token 0 and past its end, the first occurrence's tokens 1..P-1 at j (mean P/2)
// and 9 around them. Reading one token early or late in any span changes a number.
static void test_spans() {
    for (int P : {8, 9}) {
        CopyItem it{20, 0, 0, P};
        const long long r = it.repeat_at();
        std::vector<float> L((size_t)(it.length() - 1 + 3), 9.0f);  // longer than the sequence: a late read finds 9
        for (int j = 1; j < P; j++) L[(size_t)(it.first_at() + j - 1)] = (float)j;
        for (int j = 1; j < P; j++) L[(size_t)(r + j - 1)] = j < P / 2 ? 1.0f : 0.0f;
        const CopyScore s = copy_score(it, L);
        bool each = (int)s.first_tokens.size() == P - 1 && (int)s.repeat_tokens.size() == P - 1;
        for (int j = 1; j < P && each; j++) each = s.first_tokens[(size_t)j - 1] == j && s.repeat_tokens[(size_t)j - 1] == (j < P / 2 ? 1 : 0);
        check(each, strf("P = %d: each of tokens 1..P-1 keeps its own loss, at either occurrence", P));
        const double first = P / 2.0, repeat = (double)(P / 2 - 1) / (P - 1);
        check(std::fabs(s.first - first) < 1e-9 && std::fabs(s.repeat - repeat) < 1e-9 && s.repeat_second_half == 0,
              strf("P = %d: the summary reads tokens 1..P-1 of each occurrence and P/2..P-1 of the repeat", P),
              strf("first %.4f (want %.4f), repeat %.4f (want %.4f), second half %.4f (want 0)", s.first, first, s.repeat, repeat,
                   s.repeat_second_half));
    }
    // Every token of each span its own value (j), so a span that starts or ends a token off
    // changes its mean: the second half is the mean of P/2..P-1.
    for (int P : {8, 9}) {
        CopyItem it{20, 0, 0, P};
        std::vector<float> L((size_t)(it.length() - 1), 100.0f);
        for (int j = 1; j < P; j++) L[(size_t)(it.first_at() + j - 1)] = L[(size_t)(it.repeat_at() + j - 1)] = (float)j;
        double half = 0;
        for (int j = P / 2; j < P; j++) half += (double)j / (P - P / 2);
        const CopyScore s = copy_score(it, L);
        check(std::fabs(s.first - P / 2.0) < 1e-9 && std::fabs(s.repeat - P / 2.0) < 1e-9 && std::fabs(s.repeat_second_half - half) < 1e-9,
              strf("P = %d, token j's loss j: first and repeat %.2f, the repeat's second half %.2f", P, P / 2.0, half),
              strf("first %.4f, repeat %.4f, second half %.4f", s.first, s.repeat, s.repeat_second_half));
    }
    // The check can fail: the same vector read one token late (a span off by one) is caught.
    CopyItem late{20, 0, 0, 8};
    std::vector<float> L((size_t)(late.length() - 1 + 3), 9.0f);
    for (int j = 1; j < 8; j++) L[(size_t)(late.repeat_at() + j - 1)] = 0.0f;
    std::vector<float> shifted(L.begin() + 1, L.end());
    check(copy_score(late, shifted).repeat > 1, "control: the spans one token off read a repeat loss above 0");
}

static void test_outputs() {
    const std::string dir = "build/test_copy_loss_cpu.d", p = dir + "/copy";
    ::mkdir(dir.c_str(), 0755);
    std::remove((p + ".csv").c_str()), std::remove((p + "_items.csv").c_str());
    check_copy_loss_outputs(p, "--copy-out");
    check(true, "--copy-out: no files there yet is accepted");
    write_file_atomic(p + ".csv", std::string(kCopyLossCsvHeader) + "64,1,8,1,0,0\n");
    write_file_atomic(p + "_items.csv", std::string(kCopyItemsCsvHeader) + "64,0,5,1,0\n");
    check_copy_loss_outputs(p, "--copy-out");
    check(true, "--copy-out over an earlier run's CSVs is accepted");
    write_file_atomic(p + "_items.csv", "my notes\n");
    expect_fatal("--copy-out over a file of another kind", [&] { check_copy_loss_outputs(p, "--copy-out"); },
                 {"--copy-out " + p + "_items.csv is an existing file that is not an infer --copy-out CSV"});
    write_file_atomic(p + "_items.csv", std::string(kCopyLossCsvHeader));
    expect_fatal("--copy-out: the report CSV where the items CSV goes", [&] { check_copy_loss_outputs(p, "--copy-out"); },
                 {"_items.csv is an existing file"});
    expect_fatal("--copy-out in a missing directory", [&] { check_copy_loss_outputs(dir + "/no/such", "--copy-out"); },
                 {"does not exist"});
    std::remove((p + ".csv").c_str()), std::remove((p + "_items.csv").c_str()), ::rmdir(dir.c_str());
}

static int main_body() {
    test_options();
    const std::string text = test_text(3, 4000);
    Tokenizer tok;
    tok.load_serialized(train_bpe_tokenizer(text, 400));
    const PieceKinds kinds(tok);
    std::vector<std::vector<int>> docs;
    for (int d = 0; d < 6; d++) docs.push_back(tok.encode(test_text(100 + d, 300)));
    const Haystack hay = haystack_from_docs(docs, "test text", kinds);
    std::printf("haystack: %zu tokens, vocabulary %d\n", hay.tokens.size(), tok.vocab_size());
    test_layout(hay, tok.bos_id());
    test_too_small(hay);
    test_cache_matches_forward(hay, tok.bos_id(), tok.vocab_size(), false);
    test_cache_matches_forward(hay, tok.bos_id(), tok.vocab_size(), true);
    test_copier();
    test_spans();
    test_outputs();
    return check_report();
}

int main() { return guarded_main([] { return main_body(); }); }
