// The Sparse Transformer's "fixed" pattern (Child et al. 2019; docs/attention-spec.md#fixed).
// The sequence is cut into blocks of l tokens (the stride). A query keeps every key of its own
// block, and the last c keys (the summary) of every earlier block: in layer 1 the summary
// positions read their whole block, in layer 2 any query reads every block's summary, so two
// layers reach the whole sequence with about l + c N / l keys per query. Causal only (the
// pattern of the paper, for autoregressive models). A key counts once whatever rule keeps it.
#pragma once
#include <algorithm>
#include <string>
#include <vector>
#include "core/flags.h"
#include "core/json.h"
#include "layers/patterns/pattern_params.h"

struct FixedPattern {
    static constexpr const char* kName = "fixed";

    static std::string validate(const AttnPattern& p) {
        if (!p.causal) return "the fixed pattern is causal (Child et al.'s autoregressive pattern): use --causal on";
        if (p.fixed.stride < 1 || p.fixed.stride > (1 << 24)) return "--stride " + std::to_string(p.fixed.stride) + " must be in [1, 2^24]";
        if (p.fixed.summary < 1 || p.fixed.summary > p.fixed.stride)
            return "--summary " + std::to_string(p.fixed.summary) + " must be in [1, --stride " + std::to_string(p.fixed.stride) + "]";
        return "";
    }

    static std::string heads_error(const AttnPattern&, int /*H*/) { return ""; }  // any number of heads

    // Own block, or a summary key (its offset in its block is among the last c).
    ATTN_HD_TEMPLATE template <class P>  // AttnPattern or AttnPatternArgs
    ATTN_HD static int multiplicity(const P& p, int /*head*/, int q, int k, int /*seq_len*/) {
        return keeps(p.fixed.stride, p.fixed.summary, q, k) ? 1 : 0;
    }
    ATTN_HD static bool keeps(int l, int c, int q, int k) { return q / l == k / l || k % l >= l - c; }

    static std::vector<AttnPattern> branches(const AttnPattern& p) { return {p}; }  // one joint softmax

    // Per query q (causal): q - start + 1 keys of its own block, c per earlier block.
    static double pairs_kept(const AttnPattern& p, int N, int H) {
        double total = 0;
        for (long long start = 0; start < N; start += p.fixed.stride) {
            const double len = (double)std::min<long long>(p.fixed.stride, N - start), earlier = (double)(start / p.fixed.stride);
            total += len * (len + 1) / 2 + len * earlier * p.fixed.summary;
        }
        return total * H;
    }

    // Can a query of [q_lo, q_hi] keep a key of [k_lo, k_hi] (k_lo <= q_hi: the caller applied the
    // causal mask)? When some block holds both a query and a key, or some summary key lies at or
    // before the last query.
    static bool tiles_meet(const AttnPattern& p, int q_lo, int q_hi, int k_lo, int k_hi, int) {
        const int l = p.fixed.stride;
        if (std::max(q_lo / l, k_lo / l) <= std::min(q_hi / l, k_hi / l)) return true;
        const int k_end = std::min(k_hi, q_hi);
        const int first_summary = k_lo % l >= l - p.fixed.summary ? k_lo : k_lo / l * l + l - p.fixed.summary;
        return first_summary <= k_end;
    }
    // Every key a summary key, or one block holding all queries and keys.
    static bool tiles_full(const AttnPattern& p, int q_lo, int q_hi, int k_lo, int k_hi, int) {
        const int l = p.fixed.stride;
        if (k_lo / l == k_hi / l && k_lo % l >= l - p.fixed.summary) return true;
        return q_lo / l == q_hi / l && k_lo / l == k_hi / l && q_lo / l == k_lo / l;
    }

    // What a KV cache keeps (docs/attention-spec.md#decoding): every row (a later query reads the
    // summaries of every block and its own block's rows); one token goes through the flash
    // kernels' two-sided path, as block-sparse does.
    static std::vector<CacheBranchShape> cache_branches(const AttnPattern&) { return {{kWholeSequence, 1, -1}}; }
    static long long cache_first_key(const AttnPattern&, long long) { return 0; }
    static long long cache_unpack_rows(const AttnPattern&, int) { return 0; }
    static constexpr bool kDecodesOneToken = false;
    static constexpr bool kCudnnRuns = false;
    static constexpr bool kLaunchesPerBranch = false;  // one launch over its computed tiles

    static void add_flags(Flags& flags, PatternFlags& f) {
        flags.add_int("stride", &f.fixed.stride, "fixed: block length l: a query keeps every key of its own block of l tokens");
        flags.add_int("summary", &f.fixed.summary, "fixed: c: and the last c keys of every earlier block");
    }
    static void from_flags(const PatternFlags& f, AttnPattern& p) { p.fixed.stride = f.fixed.stride, p.fixed.summary = f.fixed.summary; }
    static std::string flags_text(const PatternFlags&) { return ""; }  // validate names the flags
    static std::string json_fields(const AttnPattern& p) {
        return ",\"stride\":" + std::to_string(p.fixed.stride) + ",\"summary\":" + std::to_string(p.fixed.summary);
    }
    static void from_json(const Json& j, AttnPattern& p) {
        // Any int: validate (the rule the flags have) refuses the rest in the flags' words.
        p.fixed.stride = (int)j.at("stride").as_int("stride", -2147483647, 2147483647);
        p.fixed.summary = (int)j.at("summary").as_int("summary", -2147483647, 2147483647);
    }
};
