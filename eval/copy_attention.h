// Where the heads look while a model reads a repeated passage (infer --copy-loss --copy-attn).
// The copy loss (eval/copy_loss.h) says how well the repeat is predicted; this says whether the
// attention found the first occurrence. Reading passage token j - 1 of the repeat (the query that
// predicts token j), an induction head attends the key just after that token's first occurrence,
// passage token j of the first occurrence ("next": its value is the token to write), and a
// duplicate-token head attends the first occurrence of the token itself ("same"). For every
// layer that keeps all its rows and every head: the mean weight on each over tokens 1..P-1,
// measured through the KV cache by model/attention_probe.h.
//
// A far repeat read at a high loss with a head that puts most of its weight on "next" fails after
// the match (the values or the later layers); one with no such head fails to find the source.
#pragma once
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "eval/copy_loss.h"
#include "model/attention_probe.h"

// One sequence: (n_layer, H) mean weights; NaN for a layer whose rows are packed (dilated).
struct CopyAttention {
    std::vector<float> next, same;
};

// The probe's pairs of a sequence: first the P - 1 "next" pairs, then the P - 1 "same" pairs.
inline std::vector<ProbePair> copy_probe_pairs(const CopyItem& it) {
    std::vector<ProbePair> pairs;
    for (int j = 1; j < it.passage; j++) pairs.push_back({it.repeat_at() + j - 1, it.first_at() + j});
    for (int j = 1; j < it.passage; j++) pairs.push_back({it.repeat_at() + j - 1, it.first_at() + j - 1});
    return pairs;
}

// The means over the sequence's pairs, from the probe after the sequence was read.
inline CopyAttention copy_attention_of(const CopyItem& it, const AttnProbe& probe) {
    const int P1 = it.passage - 1, LH = probe.n_layer * probe.n_head;
    CopyAttention a{std::vector<float>(LH, 0.0f), std::vector<float>(LH, 0.0f)};
    for (int l = 0; l < probe.n_layer; l++)
        for (int h = 0; h < probe.n_head; h++) {
            double next = 0, same = 0;
            for (int j = 0; j < P1; j++) next += probe.at(j, l, h), same += probe.at(P1 + j, l, h);
            a.next[l * probe.n_head + h] = (float)(next / P1), a.same[l * probe.n_head + h] = (float)(same / P1);
        }
    return a;
}

// A row per gap (items come gap by gap): the samples' means, per layer and head.
struct CopyAttentionRow {
    long long gap;
    int samples;
    CopyAttention mean;
};

inline std::vector<CopyAttentionRow> summarize_copy_attention(const std::vector<CopyItem>& items,
                                                              const std::vector<CopyAttention>& attn) {
    std::vector<CopyAttentionRow> rows;
    for (size_t i = 0; i < items.size(); i++) {
        if (rows.empty() || rows.back().gap != items[i].gap)
            rows.push_back({items[i].gap, 0, {std::vector<float>(attn[i].next.size(), 0.0f), std::vector<float>(attn[i].same.size(), 0.0f)}});
        CopyAttentionRow& r = rows.back();
        r.samples++;
        for (size_t k = 0; k < attn[i].next.size(); k++) r.mean.next[k] += attn[i].next[k], r.mean.same[k] += attn[i].same[k];
    }
    for (CopyAttentionRow& r : rows)
        for (size_t k = 0; k < r.mean.next.size(); k++) r.mean.next[k] /= r.samples, r.mean.same[k] /= r.samples;
    return rows;
}

// The layers the probe measures: those that keep every row.
inline std::vector<int> copy_attention_layers(const GPTConfig& cfg) {
    std::vector<int> layers;
    for (int l = 0; l < cfg.n_layer; l++)
        if (pattern_cache_keeps_every_row(cfg.attn(l))) layers.push_back(l);
    return layers;
}

// Every measured layer's means are numbers: a NaN would hide a layer from the table and the CSV.
inline void check_copy_attention(const std::vector<CopyAttention>& attn, const GPTConfig& cfg) {
    for (const CopyAttention& a : attn)
        for (int l : copy_attention_layers(cfg))
            for (int h = 0; h < cfg.n_head; h++)
                if (!std::isfinite(a.next[(size_t)l * cfg.n_head + h]) || !std::isfinite(a.same[(size_t)l * cfg.n_head + h]))
                    fatal("internal: the attention probe left layer %d head %d unmeasured (a non-finite weight)", l, h);
}

// The table infer prints: a row per gap, a column per measured layer: its best head on "next",
// with that head's weight on "same" beside it.
inline std::string format_copy_attention_table(const std::vector<CopyAttentionRow>& rows, const GPTConfig& cfg) {
    const int n_head = cfg.n_head;
    std::string s =
        "attention on the first occurrence while reading the repeat (mean weight over passage tokens 1..P-1; per layer the head "
        "that puts most on the token after the current token's first occurrence: next / same, the weight on that token / on the "
        "current token's first occurrence; dilated layers are not measured)\n";
    char buf[96];
    std::snprintf(buf, sizeof buf, "  %8s", "gap");
    s += buf;
    const std::vector<int> layers = copy_attention_layers(cfg);
    for (int l : layers) {
        std::snprintf(buf, sizeof buf, " %20s", ("layer " + std::to_string(l)).c_str());
        s += buf;
    }
    s += "\n";
    for (const CopyAttentionRow& r : rows) {
        std::snprintf(buf, sizeof buf, "  %8s", format_length(r.gap).c_str());
        s += buf;
        for (int l : layers) {
            int best = 0;
            for (int h = 1; h < n_head; h++)
                if (r.mean.next[(size_t)l * n_head + h] > r.mean.next[(size_t)l * n_head + best]) best = h;
            std::snprintf(buf, sizeof buf, " h%-2d %7.3f / %6.3f", best, r.mean.next[(size_t)l * n_head + best],
                          r.mean.same[(size_t)l * n_head + best]);
            s += buf;
        }
        s += "\n";
    }
    return s;
}

inline const char* const kCopyAttentionCsvHeader = "gap,sample,layer,head,next,same\n";

// PREFIX_attn.csv: a row per sequence, measured layer and head.
inline std::string copy_attention_csv(const std::vector<CopyItem>& items, const std::vector<CopyAttention>& attn,
                                      const GPTConfig& cfg) {
    std::string s = kCopyAttentionCsvHeader;
    char buf[128];
    for (size_t i = 0; i < items.size(); i++)
        for (int l : copy_attention_layers(cfg))
            for (int h = 0; h < cfg.n_head; h++) {
                const size_t k = (size_t)l * cfg.n_head + h;
                std::snprintf(buf, sizeof buf, "%lld,%d,%d,%d,%.6f,%.6f\n", items[i].gap, items[i].sample, l, h, attn[i].next[k],
                              attn[i].same[k]);
                s += buf;
            }
    return s;
}
