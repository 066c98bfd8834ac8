// The stages of a training run: from which step what window (--seq-len) and batch (--batch), then
// --schedule's "8192x16@300,32768x4@600" (a length curriculum). Parsed here, once, for train's
// flags, for the batches (data/batch_source.h) and for a checkpoint's recorded run
// (model/checkpoint.h, model/train_rules.h).
#pragma once
#include <string>
#include <vector>
#include "core/error.h"

struct TrainStage {
    int first_step = 0, seq_len = 0, batch = 0;
};

// A --schedule number: digits only, at most 2^31 - 1 (the window, batch and step are ints).
inline bool parse_stage_number(const std::string& text, int* out) {
    if (text.empty() || text.size() > 10 || text.find_first_not_of("0123456789") != std::string::npos) return false;
    const long long v = std::stoll(text);
    if (v > 2147483647LL) return false;
    *out = (int)v;
    return true;
}

// The stages of a run: stage 0 from --seq-len and --batch, then "8192x16@300,32768x4@600"
// (--schedule). Every stage's shape is checked here, the one place: a window of at least 2 tokens,
// a batch of at least 1, at most max_tokens tokens in a window and in a step; each stage after a
// step of its own. (A stage that changes nothing is train's to refuse: check_stages_change,
// data/batch_source.h.)
inline std::vector<TrainStage> parse_schedule(const std::string& text, TrainStage first, int steps, long long max_tokens) {
    auto check = [&](const TrainStage& s, const std::string& which) {
        if (s.batch < 1 || s.seq_len < 2)
            fatal("%s: the batch must be >= 1 and the window (--seq-len) >= 2 (got %d, %d)", which.c_str(), s.batch, s.seq_len);
        if (s.seq_len > max_tokens) fatal("%s: --seq-len must be at most %lld (got %d)", which.c_str(), max_tokens, s.seq_len);
        if ((long long)s.batch * s.seq_len > max_tokens)
            fatal("%s: --batch %d x --seq-len %d is more than %lld tokens per step: lower one of them", which.c_str(), s.batch,
                  s.seq_len, max_tokens);
    };
    check(first, "--batch and --seq-len");
    std::vector<TrainStage> stages{first};
    for (size_t at = 0; !text.empty() && at <= text.size();) {  // "64x8@10," ends in an empty entry: refused
        size_t end = text.find(',', at);
        if (end == std::string::npos) end = text.size();
        const std::string item = text.substr(at, end - at);
        TrainStage s;
        // Each number digits only, in int's range (sscanf's %d would wrap 4294967360 to 64).
        const size_t x = item.find('x'), at_sign = item.find('@', x == std::string::npos ? 0 : x);
        const bool parsed = x != std::string::npos && at_sign != std::string::npos &&
                            parse_stage_number(item.substr(0, x), &s.seq_len) &&
                            parse_stage_number(item.substr(x + 1, at_sign - x - 1), &s.batch) &&
                            parse_stage_number(item.substr(at_sign + 1), &s.first_step);
        if (!parsed)
            fatal("--schedule '%s': each entry is SEQ_LENxBATCH@STEP of numbers up to 2147483647, e.g. 8192x16@300 (got '%s')",
                  text.c_str(), item.c_str());
        check(s, "--schedule entry '" + item + "'");
        if (s.first_step <= stages.back().first_step || s.first_step >= steps)
            fatal("--schedule entry '%s': steps must increase and lie in (0, --steps %d)", item.c_str(), steps);
        stages.push_back(s);
        at = end + 1;
    }
    return stages;
}
