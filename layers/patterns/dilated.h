// Dilated attention (LongNet, docs/attention-spec.md#dilated). Branch i splits the
// sequence of N tokens (the GLOBAL length, however it is split across GPUs) into segments of
// w' = min(w_i, N); head h keeps, in each segment, the positions whose offset is congruent to
// h mod r_i; a kept query attends the kept keys of its own segment. A key kept by two branches
// counts twice (the branches mix by their log-sum-exp, which is one softmax over the multiset).
#pragma once
#include <algorithm>
#include <string>
#include <utility>
#include <vector>
#include "core/flags.h"
#include "core/json.h"
#include "layers/patterns/pattern_params.h"

// The offset class that head `head` keeps in a branch of dilation r (branch_class,
// pattern_common.h: what a KV cache's packed branches keep too).
ATTN_HD inline int dilated_class(int head, int r) { return branch_class(head, r); }

struct DilatedPattern {
    static constexpr const char* kName = "dilated";

    static std::string validate(const AttnPattern& p) {
        const DilatedParams& d = p.dilated;
        if (d.segments.empty()) return "--segments is empty: give at least one segment length";
        if (d.segments.size() != d.dilations.size())
            return "--segments has " + std::to_string(d.segments.size()) + " entries but --dilations has " +
                   std::to_string(d.dilations.size()) + ": give one dilation per segment";
        for (size_t i = 0; i < d.segments.size(); i++) {
            const int w = d.segments[i], r = d.dilations[i];
            if (w < 1 || r < 1) return "segment " + std::to_string(w) + " and dilation " + std::to_string(r) + " must be positive";
            if (r > w) return "dilation " + std::to_string(r) + " exceeds its segment " + std::to_string(w) + ": need r <= w";
        }
        if (d.branches() > kMaxDilatedBranches)
            return std::to_string(d.branches()) + " branches, at most " + std::to_string(kMaxDilatedBranches);
        return "";
    }
    // Any number of heads: head h keeps offset class h mod r.
    static std::string heads_error(const AttnPattern&, int /*H*/) { return ""; }

    ATTN_HD_TEMPLATE template <class P>  // AttnPattern or AttnPatternArgs
    ATTN_HD static int multiplicity(const P& p, int head, int qpos, int kpos, int seq_len) {
        int m = 0;  // one count per branch whose kept set holds both
        const auto& d = p.dilated;  // DilatedParams or DilatedArgs
        for (int i = 0; i < d.branches(); i++) {
            const int w = d.segment(i) < seq_len ? d.segment(i) : seq_len, r = d.dilation(i);
            const int seg = qpos / w, start = seg * w, cls = dilated_class(head, r);
            if (kpos / w == seg && (qpos - start) % r == cls && (kpos - start) % r == cls) m++;
        }
        return m;
    }

    // The spec's branches (each a softmax of its own, mixed by log-sum-exp): one pattern per
    // (segment, dilation).
    // What a KV cache keeps (docs/attention-spec.md#decoding): per branch (w_i, r_i), head h's
    // rows of the current segment, packed: ceil(w_i / r_i) rows whatever the context.
    static std::vector<CacheBranchShape> cache_branches(const AttnPattern& p) {
        const DilatedParams& d = p.dilated;
        std::vector<CacheBranchShape> out;
        for (size_t i = 0; i < d.segments.size(); i++)
            out.push_back({d.segments[i], d.dilations[i], ((long long)d.segments[i] + d.dilations[i] - 1) / d.dilations[i]});
        return out;
    }
    // The smallest key position a query at or after next_pos can attend: a query's keys lie in
    // its own segment of each branch, and segments are aligned to multiples of their length, so
    // none reaches before the earliest of the branches' current segments (less than the longest
    // segment back; segments need not divide one another).
    static long long cache_first_key(const AttnPattern& p, long long next_pos) {
        long long first = next_pos;
        for (int w : p.dilated.segments) first = std::min(first, next_pos / w * w);
        return first;
    }
    // Ordinary rows a chunk of up to `chunk` queries unpacks the packed rows into: the longest
    // segment plus the chunk.
    static long long cache_unpack_rows(const AttnPattern& p, int chunk) {
        const DilatedParams& d = p.dilated;
        return (long long)*std::max_element(d.segments.begin(), d.segments.end()) + chunk;
    }
    static constexpr bool kDecodesOneToken = true;  // one token: the decode kernel over the branches
    static constexpr bool kCudnnRuns = false;
    // The flash kernels run it branch by branch (dilated_launch.cuh), merging the branches'
    // softmaxes into O and L from O = 0, L = -inf; rows no branch keeps stay 0.
    static constexpr bool kLaunchesPerBranch = true;

    static std::vector<AttnPattern> branches(const AttnPattern& p) {
        const DilatedParams& d = p.dilated;
        std::vector<AttnPattern> out;
        for (int i = 0; i < d.branches(); i++) {
            AttnPattern one = p;
            one.dilated.segments = {d.segments[i]};
            one.dilated.dilations = {d.dilations[i]};
            out.push_back(one);
        }
        return out;
    }

    static double pairs_kept(const AttnPattern& p, int N, int H) {
        const DilatedParams& d = p.dilated;
        auto pairs = [&](double n) { return p.causal ? n * (n + 1) / 2 : n * n; };
        double total = 0;
        for (size_t i = 0; i < d.segments.size(); i++) {
            const int w = std::min(d.segments[i], N), r = d.dilations[i];
            for (long long start = 0; start < N; start += w) {  // 64-bit: start + w may pass INT_MAX
                const int len = (int)std::min<long long>(w, N - start);
                for (int h = 0; h < H; h++) {
                    const int cls = dilated_class(h, r);
                    total += pairs(cls < len ? (len - 1 - cls) / r + 1 : 0);
                }
            }
        }
        return total;
    }

    // Some branch has a segment holding a query position of [q_lo, q_hi] and a key position of
    // [k_lo, k_hi].
    static bool tiles_meet(const AttnPattern& p, int q_lo, int q_hi, int k_lo, int k_hi, int seq_len) {
        const DilatedParams& d = p.dilated;
        for (size_t i = 0; i < d.segments.size(); i++) {
            const int w = std::min(d.segments[i], seq_len);
            if (std::max(q_lo / w, k_lo / w) <= std::min(q_hi / w, k_hi / w)) return true;
        }
        return false;
    }
    // Only one branch of dilation 1 whose one segment holds both tiles keeps every pair once.
    static bool tiles_full(const AttnPattern& p, int q_lo, int q_hi, int k_lo, int k_hi, int seq_len) {
        const DilatedParams& d = p.dilated;
        if (d.segments.size() != 1 || d.dilations[0] != 1) return false;
        const int w = std::min(d.segments[0], seq_len);
        return q_lo / w == q_hi / w && k_lo / w == k_hi / w && q_lo / w == k_lo / w;
    }

    static void add_flags(Flags& flags, PatternFlags& f) {
        flags.add_string("segments", &f.dilated.segments, "dilated: segment length of each branch, e.g. 2048,4096,8192 (a segment longer than the sequence is the whole sequence)");
        flags.add_string("dilations", &f.dilated.dilations, "dilated: dilation rate of each branch, e.g. 1,2,4");
    }
    static void from_flags(const PatternFlags& f, AttnPattern& p) {
        DilatedParams& d = p.dilated;
        d.segments = branch_list(f.dilated.segments, "--segments");
        d.dilations = branch_list(f.dilated.dilations, "--dilations");
    }
    // validate speaks of entries ("dilation 16 exceeds its segment 8"): the lists say which.
    static std::string flags_text(const PatternFlags& f) { return " --segments " + f.dilated.segments + " --dilations " + f.dilated.dilations; }
    static std::string json_fields(const AttnPattern& p) {
        const DilatedParams& d = p.dilated;
        auto list = [](const std::vector<int>& v) {
            std::string out = "[";
            for (size_t i = 0; i < v.size(); i++) out += (i ? "," : "") + std::to_string(v[i]);
            return out + "]";
        };
        return ",\"segments\":" + list(d.segments) + ",\"dilations\":" + list(d.dilations);
    }
    static void from_json(const Json& j, AttnPattern& p) {
        DilatedParams& d = p.dilated;
        const long long kInt = 2147483647;
        // Any int: validate (the rule the flags have) refuses what the model cannot run, in the
        // flags' words (one rule per value).
        const std::vector<Json>& segments = j.at("segments").as_array("segments");
        const std::vector<Json>& dilations = j.at("dilations").as_array("dilations");
        if (segments.size() > (size_t)kMaxDilatedBranches || dilations.size() > (size_t)kMaxDilatedBranches)
            throw JsonError("a dilated pattern has more than " + std::to_string(kMaxDilatedBranches) + " segments or dilations");
        for (const Json& w : segments) d.segments.push_back((int)w.as_int("a segment", -kInt, kInt));
        for (const Json& r : dilations) d.dilations.push_back((int)r.as_int("a dilation", -kInt, kInt));
    }

   private:
    // A --segments / --dilations list, refused by its length before it is parsed, so that an
    // error never echoes megabytes of flag.
    static std::vector<int> branch_list(const std::string& text, const char* flag) {
        const size_t items = std::count(text.begin(), text.end(), ',') + 1;
        if (items > (size_t)kMaxDilatedBranches || text.size() > (size_t)kMaxDilatedBranches * 12)
            fatal("%s has %zu entries (%zu characters): at most %d branches are supported", flag, items, text.size(),
                  kMaxDilatedBranches);
        return parse_int_list(text, flag);
    }
};

// A dilated pattern of the given branches (tests, benchmarks).
inline AttnPattern dilated_pattern(bool causal, std::vector<int> segments, std::vector<int> dilations) {
    AttnPattern p = make_pattern(AttnKind::Dilated, causal);
    p.dilated.segments = std::move(segments), p.dilated.dilations = std::move(dilations);
    return p;
}
