// Dense attention (docs/attention-spec.md#dense): every query attends every key (every
// key at or before it when causal, which attention_pattern.h applies to all patterns). The
// module interface every pattern implements: docs/patterns.md, "Adding a pattern".
#pragma once
#include <string>
#include <vector>
#include "core/flags.h"
#include "core/json.h"
#include "layers/patterns/pattern_params.h"

struct DensePattern {
    static constexpr const char* kName = "dense";

    static std::string validate(const AttnPattern&) { return ""; }
    static std::string heads_error(const AttnPattern&, int /*H*/) { return ""; }  // any number of heads

    // m(q, k) before the causal mask: every key once.
    ATTN_HD_TEMPLATE template <class P>  // AttnPattern or AttnPatternArgs
    ATTN_HD static int multiplicity(const P&, int /*head*/, int /*qpos*/, int /*kpos*/, int /*seq_len*/) { return 1; }

    // The spec's branches, softmaxes mixed by log-sum-exp: dense is one.
    static std::vector<AttnPattern> branches(const AttnPattern& p) { return {p}; }

    // What a KV cache keeps (docs/attention-spec.md#decoding): every row, as one branch; a later
    // query may need any earlier key, and a chunk needs no rows unpacked.
    static std::vector<CacheBranchShape> cache_branches(const AttnPattern&) { return {{kWholeSequence, 1, -1}}; }
    static long long cache_first_key(const AttnPattern&, long long) { return 0; }
    static long long cache_unpack_rows(const AttnPattern&, int) { return 0; }
    static constexpr bool kDecodesOneToken = true;  // one token: the decode kernel, straight against the cache
    static constexpr bool kCudnnRuns = true;        // cuDNN's SDPA runs it (dense only)
    static constexpr bool kLaunchesPerBranch = false;  // the flash kernels run it in one launch

    static double pairs_kept(const AttnPattern& p, int N, int H) {
        const double n = N;
        return H * (p.causal ? n * (n + 1) / 2 : n * n);
    }

    // Can a query with position in [q_lo, q_hi] attend a key in [k_lo, k_hi] (causal aside), and
    // is every such pair kept once (so the tile pair runs without an element mask)?
    static bool tiles_meet(const AttnPattern&, int, int, int, int, int /*seq_len*/) { return true; }
    static bool tiles_full(const AttnPattern&, int, int, int, int, int /*seq_len*/) { return true; }

    static void add_flags(Flags&, PatternFlags&) {}
    static void from_flags(const PatternFlags&, AttnPattern&) {}
    static std::string flags_text(const PatternFlags&) { return ""; }
    static std::string json_fields(const AttnPattern&) { return ""; }
    static void from_json(const Json&, AttnPattern&) {}
};
