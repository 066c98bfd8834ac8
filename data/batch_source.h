// The training batches of a whole run: windows from the corpus and, by fraction, from other
// token shards (train --mix tasks.bin:0.5), with a window length and batch size that change at
// given steps (train --seq-len/--batch, then --schedule 8192x16@300,...: a length curriculum).
//
// Every batch is a pure function of (seed, step), so a resumed run draws exactly what the
// uninterrupted run would have:
//   - stage k (from its first step) draws windows of T_k tokens, B_k per step;
//   - window g of a stage (g = (step - first step) * B_k + b) comes from mixed source j when
//     u_g = frac(g * 0.618...) falls in [F_{j-1}, F_j) (F: the fractions' running sums), else from
//     the corpus: a low-discrepancy sequence, so every batch holds its share of each source, not
//     only the average of many batches;
//   - each source's windows come from its own shuffled DataLoader (data/loader.h) at the stage's
//     length, drawn in turn; stage 0's corpus loader has the run's seed, so a run without --mix or
//     --schedule draws exactly the windows it always did;
//   - in windows of a mixed shard, the BOS that starts a document is no target (next_batch).
#pragma once
#include <cctype>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/train_stages.h"
#include "data/loader.h"
#include "data/shard.h"

struct MixedShard {
    std::string path;
    double fraction = 0;
};

// "a.bin:0.5,b.bin:0.1" -> shards and fractions (summing to at most 1) for every stage;
// "a.bin:0.5;b.bin:0.5" -> one such list per stage, ';' between stages (a retrieval shard whose
// documents are as long as the stage's window, say). An empty list: the corpus alone.
constexpr double kMinMixFraction = 1e-6;  // one window in a million
inline std::vector<std::vector<MixedShard>> parse_mix(const std::string& text, size_t n_stages) {
    std::vector<std::vector<MixedShard>> per_stage;
    for (size_t at = 0; at <= text.size() && !text.empty();) {
        size_t end = text.find(';', at);
        if (end == std::string::npos) end = text.size();
        const std::string group = text.substr(at, end - at);
        std::vector<MixedShard> shards;
        double total = 0;
        for (size_t a = 0; !group.empty() && a <= group.size();) {  // "a.bin:0.5," ends in an empty entry: refused
            size_t e = group.find(',', a);
            if (e == std::string::npos) e = group.size();
            const std::string item = group.substr(a, e - a);
            const size_t colon = item.rfind(':');
            char* stop = nullptr;
            const double f = colon == std::string::npos ? NAN : std::strtod(item.c_str() + colon + 1, &stop);
            // A fraction under kMinMixFraction (1e-300, say) draws no window in any run this
            // project makes: the user meant another number. A sign or space is refused too.
            const bool plain = colon != std::string::npos && colon + 1 < item.size() &&
                               (std::isdigit((unsigned char)item[colon + 1]) || item[colon + 1] == '.');
            if (!plain || colon == 0 || *stop || !(f >= kMinMixFraction && f <= 1))
                fatal("--mix '%s': each entry is SHARD:FRACTION with a fraction in [%g, 1], e.g. tasks.bin:0.5 (got '%s')",
                      text.c_str(), kMinMixFraction, item.c_str());
            const std::string path = item.substr(0, colon);
            for (const MixedShard& m : shards)
                if (m.path == path)
                    fatal("--mix '%s': %s is given twice in one stage: give it once with the fractions added", text.c_str(), path.c_str());
            shards.push_back({path, f});
            total += f;
            a = e + 1;
        }
        if (total > 1 + 1e-9) fatal("--mix '%s': the fractions of a stage add up to %g, more than 1", text.c_str(), total);
        per_stage.push_back(shards);
        at = end + 1;
    }
    if (per_stage.size() == 1) per_stage.resize(n_stages, per_stage[0]);
    if (!per_stage.empty() && per_stage.size() != n_stages)
        fatal("--mix '%s' gives %zu stages (';' between them) but the run has %zu (--seq-len, then --schedule's entries): give one "
              "list for all stages or one per stage", text.c_str(), per_stage.size(), n_stages);
    if (per_stage.empty()) per_stage.resize(n_stages);
    return per_stage;
}

// A stage of the shape of the stage before it changes nothing but which windows are drawn: a typo,
// not a curriculum (`--schedule 32x2@2` after --seq-len 32 --batch 2). Unless --mix lists its
// shards stage by stage (';' between stages): then each stage is spelled out as its caller meant
// it (a study whose toy windows repeat a shape with the same or another shard). train checks the
// flags as given; a run a checkpoint recorded is read as it was.
inline void check_stages_change(const std::vector<TrainStage>& stages, const std::string& mix) {
    if (mix.find(';') != std::string::npos) return;
    for (size_t i = 1; i < stages.size(); i++)
        if (stages[i].seq_len == stages[i - 1].seq_len && stages[i].batch == stages[i - 1].batch)
            fatal("--schedule's stage from step %d has the shape of the stage before it (windows of %d tokens, %d per step): "
                  "each stage must change the window or the batch (or --mix give each stage its shards); drop the entry",
                  stages[i].first_step, stages[i].seq_len, stages[i].batch);
}

class BatchSource {
   public:
    // The shards are referenced, not copied: they must outlive the source. mixed[k]: stage k's
    // shards and fractions. bos: the tokenizer's BOS id, which starts every document.
    BatchSource(const TokenShard& corpus, std::vector<std::vector<std::pair<const TokenShard*, double>>> mixed,
                std::vector<TrainStage> stages, uint64_t seed, int bos)
        : corpus_(&corpus), mixed_(std::move(mixed)), stages_(std::move(stages)), seed_(seed), bos_(bos) {
        if (mixed_.size() != stages_.size()) fatal("internal: BatchSource needs one mix per stage");
        bounds_.resize(stages_.size());
        for (size_t k = 0; k < stages_.size(); k++) {
            double run = 0;
            for (const auto& m : mixed_[k]) bounds_[k].push_back(run += m.second);
            const int T = stages_[k].seq_len;
            auto check = [&](const TokenShard& s, const char* what) {
                if (s.n_tokens() < (uint64_t)T + 1)
                    fatal("%s %d is longer than %s %s (%llu tokens): lower it or give more data", k == 0 ? "--seq-len" : "--schedule's window",
                          T, what, s.path.c_str(), (unsigned long long)s.n_tokens());
            };
            check(corpus, "the corpus");
            for (const auto& m : mixed_[k]) check(*m.first, "--mix");
        }
        seek(0);
    }

    const std::vector<TrainStage>& stages() const { return stages_; }
    int stage_of(int step) const {
        int k = 0;
        while (k + 1 < (int)stages_.size() && stages_[k + 1].first_step <= step) k++;
        return k;
    }
    const TrainStage& stage_at(int step) const { return stages_[stage_of(step)]; }

    // Positions the source at the start of `step` (0-based: the batch of training step step + 1).
    void seek(int step) {
        stage_ = stage_of(step);
        const TrainStage& s = stages_[stage_];
        loaders_.clear();
        for (size_t j = 0; j <= mixed_[stage_].size(); j++) {
            const TokenShard& shard = j == 0 ? *corpus_ : *mixed_[stage_][j - 1].first;
            // Stage 0's corpus keeps the run's seed: a run without --mix or --schedule is unchanged.
            const uint64_t seed = stage_ == 0 && j == 0 ? seed_ : seed_ ^ (0x9E3779B97F4A7C15ull * (uint64_t)(stage_ * 64 + j + 1));
            loaders_.push_back(std::make_unique<DataLoader>(shard, 1, s.seq_len, seed, true));
        }
        std::vector<uint64_t> drawn(loaders_.size(), 0);
        const uint64_t windows = (uint64_t)(step - s.first_step) * (uint64_t)s.batch;
        for (uint64_t g = 0; g < windows; g++) drawn[source_of(stage_, g)]++;
        for (size_t j = 0; j < loaders_.size(); j++) {
            const uint64_t n = loaders_[j]->n_windows();
            loaders_[j]->restore({drawn[j] / n, drawn[j] % n});
        }
        next_window_ = windows;
        step_ = step;
    }

    // The batch of `step`: (B, T) of its stage each. Steps come in order (another step seeks).
    void next_batch(int step, int* inputs, int* targets, int* doc_start) {
        if (step != step_ || stage_of(step) != stage_) seek(step);
        const TrainStage& s = stages_[stage_];
        for (int b = 0; b < s.batch; b++) {
            const size_t off = (size_t)b * (size_t)s.seq_len;
            const size_t j = source_of(stage_, next_window_++);
            loaders_[j]->next_batch(inputs + off, targets + off, doc_start + off);
            // A mixed shard's documents may all have one length (data_tool task-shard's do): were
            // the BOS that starts the next one a target, the model would learn that position
            // (length - 1) ends a document, whatever it reads. So there it is no target.
            for (int t = 0; j > 0 && t < s.seq_len; t++)
                if (targets[off + t] == bos_) targets[off + t] = -1;
        }
        step_ = step + 1;
    }

    uint64_t corpus_windows() const { return loaders_[0]->n_windows(); }
    // The corpus loader's place after the batches of `step` steps, as (epoch, cursor) in the
    // stage of `step`: what a checkpoint at `step` records and a resume checks.
    LoaderState expected_corpus_state(int step) const {
        const int k = stage_of(step);
        const TrainStage& s = stages_[k];
        const uint64_t windows = (uint64_t)(step - s.first_step) * (uint64_t)s.batch;
        uint64_t drawn = 0;
        for (uint64_t g = 0; g < windows; g++) drawn += source_of(k, g) == 0;
        const uint64_t n = DataLoader(*corpus_, 1, s.seq_len, 0, false).n_windows();
        return {drawn / n, drawn % n};
    }

   private:
    const TokenShard* corpus_;
    std::vector<std::vector<std::pair<const TokenShard*, double>>> mixed_;
    std::vector<std::vector<double>> bounds_;  // per stage: running sums of the fractions
    std::vector<TrainStage> stages_;
    uint64_t seed_;
    int bos_;
    int stage_ = 0, step_ = 0;
    uint64_t next_window_ = 0;
    std::vector<std::unique_ptr<DataLoader>> loaders_;  // the stage's corpus, then its mixed shards

    // Window g of stage k: 0 for the corpus, j for the stage's mixed shard j - 1.
    size_t source_of(int k, uint64_t g) const {
        const std::vector<double>& b = bounds_[k];
        if (b.empty()) return 0;
        const double u = std::fmod((double)g * 0.6180339887498949, 1.0);
        for (size_t j = 0; j < b.size(); j++)
            if (u < b[j]) return j + 1;
        return 0;
    }
};
