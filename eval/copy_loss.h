// The copy loss by gap (infer --copy-loss): a measure of reading that needs no task
// format. A passage of held-out text is repeated after a gap of G tokens, and the model's loss
// per token on the repeat is set against its loss on the first occurrence, gap by gap. A model
// that reads its context predicts the repeat from the first occurrence and drives its loss toward
// zero at every gap; one that cannot see that far (a short window, the 2K control) scores the
// repeat as it scored the first occurrence. Passkey and multi-key items ask for a format the
// model must have learnt (eval/task_eval.h); this asks only that it copy.
//
// A sequence: BOS, the passage H[s, s+P), the G tokens of text that follow it in the haystack
// H[s+P, s+P+G), the passage again H[s, s+P). The haystack is what data_tool tasks --haystack
// takes (data/tasks.h: documents joined by a newline). s, s+P and s+P+G are places where the text
// may be cut (Haystack::cut_ok), so the passage is whole words and the sequence is what its text
// would encode to. Nothing wraps around the haystack's end (that would put the passage inside its
// own gap): a haystack shorter than P + G fails, naming the fix.
//
// Every token is scored through the KV cache as perplexity_cached scores a document
// (model/generate.h): in one window when the model's caches are bounded or the sequence fits
// --ctx, else in windows of ctx overlapping by half, so a model whose window is shorter than the
// gap reads only its last tokens there. Both means skip the passage's token 0, which nothing
// before it predicts; the repeat's second half (tokens P/2..P-1) is reported too, since a model
// that copies may need a few tokens to find its place.
#pragma once
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/lists.h"
#include "core/io.h"
#include "core/output_path.h"
#include "core/rng.h"
#include "data/tasks.h"
#include "data/tokenizer.h"
#include "eval/task_report.h"
#include "model/generate.h"
#include "model/gpt_config.h"

struct CopyLossOptions {
    std::vector<long long> gaps;  // G, in the order given
    int passage = 256;            // P: tokens of the passage
    int samples = 4;              // sequences per gap
    uint64_t seed = 1;            // with the gap and the sample, where each passage starts
};

// One sequence: the passage at haystack token `start`, repeated after `gap` tokens.
struct CopyItem {
    long long gap = 0;
    int sample = 0;
    long long start = 0;
    int passage = 0;
    // Where the passage's token 0 lies in the sequence: after BOS, and after BOS, passage and gap.
    long long first_at() const { return 1; }
    long long repeat_at() const { return 1 + passage + gap; }
    long long length() const { return 1 + 2LL * passage + gap; }
};

// Mean loss (nats/token) over passage tokens 1..P-1 of each occurrence, and over P/2..P-1 of the
// repeat; and each of those tokens' own loss (passage token j at [j - 1]), for PREFIX_positions.csv.
struct CopyScore {
    double first = 0, repeat = 0, repeat_second_half = 0;
    std::vector<float> first_tokens, repeat_tokens;
};

// One row of the report: a gap's samples averaged (every sample scores the same P - 1 tokens).
struct CopyLossRow {
    long long gap = 0;
    int samples = 0, passage = 0;
    double first = 0, repeat = 0, repeat_second_half = 0;
};

// ---- the flags

// "2K,8K,1M" -> {2048, 8192, 1048576}: K is 1024 and M 1048576, as data_tool tasks --lengths reads
// them. A stray comma ("2K,,8K", "2K,") is a typo, not a list, and a repeated gap would score
// the same sequences twice; both are refused.
inline std::vector<long long> parse_gaps(const std::string& text) {
    std::vector<long long> gaps;
    for (const std::string& item : split_commas("--gaps", text)) gaps.push_back(parse_tokens("--gaps", item));
    refuse_repeats("--gaps", gaps);
    return gaps;
}

// The rules on the options alone, before any file is read.
inline void check_copy_loss_options(const CopyLossOptions& o) {
    if (o.gaps.empty()) fatal("--copy-loss needs --gaps, e.g. --gaps 2K,8K,32K,128K");
    if (o.passage < 2)
        fatal("--copy-passage must be at least 2 (got %d): the passage's token 0 is not scored, so a shorter one scores nothing",
              o.passage);
    if (o.samples < 1 || o.samples > (1 << 20)) fatal("--copy-samples must be in [1, 1048576] (got %d)", o.samples);
    for (long long g : o.gaps)
        if (1 + 2LL * o.passage + g > kMaxSeqLen)
            fatal("--gaps %lld with --copy-passage %d makes a sequence of %lld tokens, more than the %d a model reads: give a "
                  "smaller gap or passage", g, o.passage, 1 + 2LL * o.passage + g, kMaxSeqLen);
}

// ---- the haystack and the sequences

// Fails unless `path` can be a haystack: a directory, or a regular file (a token shard or text).
// Called before the checkpoint is loaded, so that a wrong path fails at once.
inline void check_copy_haystack_path(const std::string& path) {
    if (path == "filler")
        fatal("--copy-loss filler: the filler repeats one line, so every passage recurs inside its own gap: give held-out text "
              "(a corpus's val.bin, a text file or a directory)");
    if (is_directory(path)) return;
    check_regular_file(path, kReadFileMaxBytes, "--copy-loss",
                       "give a token shard (a corpus's val.bin), a text file or a directory of text files");
}

// The haystack through data/tasks.h's load_haystack; its messages name data_tool's flag
// (--haystack), which is --copy-loss here.
inline Haystack load_copy_haystack(const std::string& path, const Tokenizer& tok, const PieceKinds& kinds) {
    check_copy_haystack_path(path);
    try {
        return load_haystack(path, tok, kinds, 0);
    } catch (const FatalError& e) {
        std::string m = e.what();
        for (size_t at = m.find("--haystack"); at != std::string::npos; at = m.find("--haystack", at))
            m.replace(at, 10, "--copy-loss");
        fatal("%s", m.c_str());
    }
}

// A seed per sequence from the run's seed, the gap and the sample, mixed as data/prepare.cpp's
// item_seed mixes a grid cell: the same start for the same (seed, gap, sample) whatever other
// gaps or samples the run asks for.
inline uint64_t copy_item_seed(uint64_t seed, long long gap, int sample) {
    SplitMix64 r(seed);
    uint64_t h = r.next();
    for (uint64_t v : {(uint64_t)gap, (uint64_t)sample}) h = SplitMix64(h ^ v).next();
    return h;
}

// Every sequence's start, gap by gap in the order given, then sample by sample. A start is drawn
// uniformly from [0, N - P - G] and moved forward (round to 0 past the last) to the first place
// where s, s + P and s + P + G are cuts and no earlier sample of the gap starts: the samples of a
// gap are distinct passages.
inline std::vector<CopyItem> place_copy_items(const Haystack& hay, const CopyLossOptions& o) {
    check_copy_loss_options(o);
    const long long n = (long long)hay.tokens.size(), P = o.passage;
    if ((long long)hay.cut_ok.size() != n + 1) fatal("internal: the haystack %s has no cut marks", hay.source.c_str());
    std::vector<CopyItem> items;
    for (long long G : o.gaps) {
        if (n < P + G)
            fatal("--copy-loss %s holds %lld tokens, fewer than the %lld a passage of %lld and a gap of %s need: give a larger "
                  "haystack (more documents) or smaller --gaps (or --copy-passage)", hay.source.c_str(), n, P + G, P,
                  format_length(G).c_str());
        const long long room = n - P - G;  // starts in [0, room]
        std::vector<long long> used;
        for (int k = 0; k < o.samples; k++) {
            SplitMix64 rng(copy_item_seed(o.seed, G, k));
            long long s = (long long)rng.below((uint64_t)room + 1), tries = 0;
            auto fits = [&](long long at) {
                return hay.cut_ok[(size_t)at] && hay.cut_ok[(size_t)(at + P)] && hay.cut_ok[(size_t)(at + P + G)] &&
                       std::find(used.begin(), used.end(), at) == used.end();
            };
            while (!fits(s)) {
                s = s == room ? 0 : s + 1;
                if (++tries > room) {
                    if (used.empty())
                        fatal("--copy-loss %s: no place where a passage of %lld tokens and a gap of %s both begin and end between "
                              "words: give text (a corpus's val.bin, a text file)", hay.source.c_str(), P, format_length(G).c_str());
                    fatal("--copy-loss %s holds only %zu distinct passages of %lld tokens before a gap of %s, fewer than "
                          "--copy-samples %d: lower --copy-samples, or give a larger haystack", hay.source.c_str(), used.size(), P,
                          format_length(G).c_str(), o.samples);
                }
            }
            used.push_back(s);
            items.push_back(CopyItem{G, k, s, (int)P});
        }
    }
    return items;
}

// The sequence's tokens: BOS, H[s, s+P+G) (the passage and the text after it), H[s, s+P).
inline std::vector<int> copy_sequence(const Haystack& hay, const CopyItem& it, int bos) {
    std::vector<int> ids;
    ids.reserve((size_t)it.length());
    ids.push_back(bos);
    ids.insert(ids.end(), hay.tokens.begin() + it.start, hay.tokens.begin() + it.start + it.passage + it.gap);
    ids.insert(ids.end(), hay.tokens.begin() + it.start, hay.tokens.begin() + it.start + it.passage);
    return ids;
}

// ---- scoring

// token_losses[i] is the loss of predicting token i + 1 of the sequence from tokens 0..i (what
// perplexity_cached's per_token gives), so passage token j of the occurrence whose token 0 sits
// at sequence index a is scored by token_losses[a + j - 1].
inline CopyScore copy_score(const CopyItem& it, const std::vector<float>& token_losses) {
    if ((long long)token_losses.size() < it.repeat_at() + it.passage - 1)
        fatal("internal: %zu token losses for a copy sequence of %lld tokens", token_losses.size(), it.length());
    auto mean = [&](long long at, int from, int to) {  // passage tokens [from, to) of the occurrence at `at`
        double sum = 0;
        for (int j = from; j < to; j++) sum += token_losses[(size_t)(at + j - 1)];
        return sum / (to - from);
    };
    const int P = it.passage;
    CopyScore score{mean(it.first_at(), 1, P), mean(it.repeat_at(), 1, P), mean(it.repeat_at(), P / 2, P), {}, {}};
    for (int j = 1; j < P; j++) {
        score.first_tokens.push_back(token_losses[(size_t)(it.first_at() + j - 1)]);
        score.repeat_tokens.push_back(token_losses[(size_t)(it.repeat_at() + j - 1)]);
    }
    return score;
}

// Every item's sequence scored through a fresh cache from factory() (perplexity_cached, windows of
// ctx as it chooses them), one at a time: a 1M-gap sequence's cache is what one long document's
// is. progress(done, total) in tokens over all the items. probes, when given, holds one probe per
// item (its pairs set: eval/copy_attention.h), filled as its sequence is read.
template <class Factory>
std::vector<CopyScore> run_copy_loss(const Haystack& hay, const std::vector<CopyItem>& items, int bos, Factory factory,
                                     const GPTConfig& cfg, int ctx, const ProgressFn& progress = nullptr,
                                     std::vector<AttnProbe>* probes = nullptr) {
    if (probes && probes->size() != items.size()) fatal("internal: %zu probes for %zu copy sequences", probes->size(), items.size());
    long long total = 0, before = 0;
    for (const CopyItem& it : items) total += it.length() - 1;
    std::vector<CopyScore> scores;
    std::vector<float> token_losses;
    for (const CopyItem& it : items) {
        const std::vector<int> ids = copy_sequence(hay, it, bos);
        const ProgressFn within = [&](long long done, long long) {
            if (progress) progress(before + done, total);
        };
        perplexity_cached(factory, cfg, ids, ctx, nullptr, within, false, &token_losses,
                          probes ? &(*probes)[&it - items.data()] : nullptr);
        scores.push_back(copy_score(it, token_losses));
        before += it.length() - 1;
    }
    return scores;
}

// Whether every layer's cache is bounded (dilated): such a model reads a sequence of any length
// in one window, whatever ctx (perplexity_cached's rule).
inline bool copy_reads_whole(const GPTConfig& cfg, const CopyItem& it, int ctx) {
    bool bounded = true;
    for (int l = 0; l < cfg.n_layer; l++) bounded = bounded && kv_cache_rows(cfg.attn(l)) >= 0;
    return bounded || it.length() - 1 <= ctx;
}

// ---- the report

// Rows in the order of the gaps as given (items come gap by gap).
inline std::vector<CopyLossRow> summarize_copy_loss(const std::vector<CopyItem>& items, const std::vector<CopyScore>& scores) {
    std::vector<CopyLossRow> rows;
    for (size_t i = 0; i < items.size(); i++) {
        if (rows.empty() || rows.back().gap != items[i].gap) rows.push_back(CopyLossRow{items[i].gap, 0, items[i].passage, 0, 0, 0});
        CopyLossRow& r = rows.back();
        r.samples++;
        r.first += scores[i].first, r.repeat += scores[i].repeat, r.repeat_second_half += scores[i].repeat_second_half;
    }
    for (CopyLossRow& r : rows) r.first /= r.samples, r.repeat /= r.samples, r.repeat_second_half /= r.samples;
    return rows;
}

// The table infer prints: a row per gap.
inline std::string format_copy_loss_table(const std::vector<CopyLossRow>& rows) {
    std::string s = "copy loss by gap (nats/token over passage tokens 1..P-1; second half: P/2..P-1)\n";
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %8s %8s %8s %10s %10s %12s\n", "gap", "samples", "passage", "first", "repeat", "repeat 2nd");
    s += buf;
    for (const CopyLossRow& r : rows) {
        std::snprintf(buf, sizeof buf, "  %8s %8d %8d %10.4f %10.4f %12.4f\n", format_length(r.gap).c_str(), r.samples, r.passage,
                      r.first, r.repeat, r.repeat_second_half);
        s += buf;
    }
    return s;
}

inline const char* const kCopyLossCsvHeader = "gap,samples,passage,first_loss,repeat_loss,repeat_loss_second_half\n";
inline const char* const kCopyItemsCsvHeader = "gap,sample,start,first_loss,repeat_loss\n";
inline const char* const kCopyTokensCsvHeader = "gap,sample,first_at,repeat_at,passage,tokens\n";
inline const char* const kCopyPositionsCsvHeader = "gap,sample,position,token,first_loss,repeat_loss\n";

// PREFIX.csv: a row per gap.
inline std::string copy_loss_csv(const std::vector<CopyLossRow>& rows) {
    std::string s = kCopyLossCsvHeader;
    char buf[160];
    for (const CopyLossRow& r : rows) {
        std::snprintf(buf, sizeof buf, "%lld,%d,%d,%.6f,%.6f,%.6f\n", r.gap, r.samples, r.passage, r.first, r.repeat,
                      r.repeat_second_half);
        s += buf;
    }
    return s;
}

// PREFIX_items.csv: a row per sequence.
inline std::string copy_items_csv(const std::vector<CopyItem>& items, const std::vector<CopyScore>& scores) {
    std::string s = kCopyItemsCsvHeader;
    char buf[160];
    for (size_t i = 0; i < items.size(); i++) {
        std::snprintf(buf, sizeof buf, "%lld,%d,%lld,%.6f,%.6f\n", items[i].gap, items[i].sample, items[i].start, scores[i].first,
                      scores[i].repeat);
        s += buf;
    }
    return s;
}

// PREFIX_tokens.csv: a row per sequence with its token ids (space-separated), where each occurrence
// of the passage begins and its length: what another implementation needs to score the very same
// sequences (passage tokens 1..P-1 of each occurrence, as copy_score does).
inline std::string copy_tokens_csv(const Haystack& hay, const std::vector<CopyItem>& items, int bos) {
    std::string s = kCopyTokensCsvHeader;
    char buf[160];
    for (const CopyItem& it : items) {
        std::snprintf(buf, sizeof buf, "%lld,%d,%lld,%lld,%d,", it.gap, it.sample, it.first_at(), it.repeat_at(), it.passage);
        s += buf;
        const std::vector<int> ids = copy_sequence(hay, it, bos);
        for (size_t i = 0; i < ids.size(); i++) s += (i ? " " : "") + std::to_string(ids[i]);
        s += '\n';
    }
    return s;
}

// PREFIX_positions.csv: a row per passage token j = 1..P-1 of each sequence, its id and its loss at
// either occurrence: where in the repeat a copy's loss sits (the tokens before it finds its place,
// or tokens where it loses it) and on which tokens.
inline std::string copy_positions_csv(const Haystack& hay, const std::vector<CopyItem>& items, const std::vector<CopyScore>& scores) {
    if (scores.size() != items.size()) fatal("internal: %zu copy scores for %zu sequences", scores.size(), items.size());
    std::string s = kCopyPositionsCsvHeader;
    char buf[160];
    for (size_t i = 0; i < items.size(); i++) {
        const CopyItem& it = items[i];
        const CopyScore& sc = scores[i];
        if ((int)sc.first_tokens.size() != it.passage - 1 || (int)sc.repeat_tokens.size() != it.passage - 1)
            fatal("internal: %zu and %zu token losses for a passage of %d tokens", sc.first_tokens.size(), sc.repeat_tokens.size(),
                  it.passage);
        for (int j = 1; j < it.passage; j++) {
            std::snprintf(buf, sizeof buf, "%lld,%d,%d,%d,%.6f,%.6f\n", it.gap, it.sample, j, hay.tokens[(size_t)(it.start + j)],
                          sc.first_tokens[(size_t)j - 1], sc.repeat_tokens[(size_t)j - 1]);
            s += buf;
        }
    }
    return s;
}

// The check of core/output_path.h for the four CSVs (check_output_path), which knows no copy-loss
// kind: a file is overwritten only when it is absent, empty or an earlier copy-loss CSV of the
// same kind (told by its header), so that a re-run works and nothing else is replaced.
inline void check_copy_loss_output(const std::string& path, const char* header, const char* flag) {
    const OutputKind found = output_kind_of(path);
    if (found == OutputKind::Other) {
        std::string head(std::strlen(header), '\0');
        std::FILE* f = std::fopen(path.c_str(), "rb");
        head.resize(f ? std::fread(&head[0], 1, head.size(), f) : 0);
        if (f) std::fclose(f);
        if (head != header)
            fatal("%s %s is an existing file that is not an infer --copy-out CSV: give another path (or remove that file first)",
                  flag, path.c_str());
    } else if (found == OutputKind::Directory) {
        fatal("%s %s is a directory: give a file name", flag, path.c_str());
    } else if (found != OutputKind::None) {
        fatal("%s %s is %s: give another path", flag, path.c_str(), output_kind_name(found));
    }
    check_directory_writable(output_dir_of(path), path, flag);
}

inline void check_copy_loss_outputs(const std::string& prefix, const char* flag) {
    if (prefix.empty()) return;
    check_output_prefix(prefix, flag);
    check_copy_loss_output(prefix + ".csv", kCopyLossCsvHeader, flag);
    check_copy_loss_output(prefix + "_items.csv", kCopyItemsCsvHeader, flag);
    check_copy_loss_output(prefix + "_tokens.csv", kCopyTokensCsvHeader, flag);
    check_copy_loss_output(prefix + "_positions.csv", kCopyPositionsCsvHeader, flag);
}
