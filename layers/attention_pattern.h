// The attention pattern of a layer, and the one plain function that says which keys a query
// attends. Every implementation (CPU reference, CUDA kernels, ring over GPUs) computes
//   O(p) = sum_k m(p,k) exp(s q_p.k_k - L(p)) v_k,   L(p) = log sum_k m(p,k) exp(s q_p.k_k)
// where m(p,k) = key_multiplicity(...) counts how often key k is in the multiset of keys of
// query p (see docs/attention-spec.md#common). Positions are GLOBAL sequence positions and N the
// GLOBAL sequence length, so the same function stays right once a sequence is split across GPUs.
//
// Each pattern is a module in layers/patterns/ (listed in list.h, described in registry.h); the functions below
// dispatch to it through that list, so the host code (config, checkpoints, flags, references,
// FLOP counts) never switches on the kind; the GPU launchers choose each pattern's kernel
// instance in layers/cuda/.
#pragma once
#include <algorithm>
#include <string>
#include <vector>
#include "core/flags.h"
#include "layers/patterns/all.h"
#include "layers/patterns/pattern_params.h"

// Calls f(Module{}) for the module of `kind`: the one switch over the patterns.
template <typename F>
decltype(auto) with_pattern_module(AttnKind kind, F&& f) {
    switch (kind) {
#define ATTN_KIND_CASE(Kind, stem) \
    case AttnKind::Kind: return f(Kind##Pattern{});
        ATTN_PATTERNS(ATTN_KIND_CASE)
#undef ATTN_KIND_CASE
    }
    fatal("attention pattern kind %d is not registered", (int)kind);
}

inline const char* attn_kind_name(AttnKind kind) {
    return with_pattern_module(kind, [](auto m) { return decltype(m)::kName; });
}

// The kind named `name` (as in --attn and checkpoints); false if there is none.
inline bool attn_kind_from_name(const std::string& name, AttnKind* kind) {
#define ATTN_KIND_NAME(Kind, stem) \
    if (name == Kind##Pattern::kName) return *kind = AttnKind::Kind, true;
    ATTN_PATTERNS(ATTN_KIND_NAME)
#undef ATTN_KIND_NAME
    return false;
}

// "dense or dilated": the names, for error messages and help.
inline std::string attn_kind_names() {
    std::vector<std::string> names;
#define ATTN_KIND_LIST(Kind, stem) names.push_back(Kind##Pattern::kName);
    ATTN_PATTERNS(ATTN_KIND_LIST)
#undef ATTN_KIND_LIST
    std::string out;
    for (size_t i = 0; i < names.size(); i++) out += (i ? (i + 1 == names.size() ? " or " : ", ") : "") + names[i];
    return out;
}

// How many times the query at global position qpos counts the key at global position kpos
// (0: masked out), for head `head` of a sequence of `seq_len` tokens.
// P is AttnPattern on the host or AttnPatternArgs in a kernel (layers/cuda/attention_naive.cuh).
ATTN_HD_TEMPLATE template <class P>
ATTN_HD inline int key_multiplicity(const P& pattern, int head, int qpos, int kpos, int seq_len) {
    if (pattern.causal && kpos > qpos) return 0;
    switch (pattern.kind) {
#define ATTN_KIND_MULTIPLICITY(Kind, stem) \
    case AttnKind::Kind: return Kind##Pattern::multiplicity(pattern, head, qpos, kpos, seq_len);
        ATTN_PATTERNS(ATTN_KIND_MULTIPLICITY)
#undef ATTN_KIND_MULTIPLICITY
    }
    return 0;
}

// "" when the pattern is well formed, else what is wrong with it (in terms of the flags).
inline std::string pattern_error(const AttnPattern& p) {
    return with_pattern_module(p.kind, [&](auto m) { return decltype(m)::validate(p); });
}

// "" when the pattern works with H heads, else why not (a per-head layout for another count).
inline std::string pattern_heads_error(const AttnPattern& p, int H) {
    return with_pattern_module(p.kind, [&](auto m) { return decltype(m)::heads_error(p, H); });
}

// Query-key pairs the pattern keeps (a key counted as often as its multiplicity), summed over H
// heads of one sequence of N tokens: the FLOP count is 4 * D * pairs forward, 3.5x that for
// forward + backward (docs/attention-spec.md#flops).
inline double pairs_kept(const AttnPattern& p, int N, int H) {
    return with_pattern_module(p.kind, [&](auto m) { return decltype(m)::pairs_kept(p, N, H); });
}

// The spec's branches of p: patterns whose softmaxes, mixed by log-sum-exp, give p (the sum of
// their multiplicities is p's).
inline std::vector<AttnPattern> pattern_branches(const AttnPattern& p) {
    return with_pattern_module(p.kind, [&](auto m) { return decltype(m)::branches(p); });
}

// What a KV cache keeps of a layer with pattern p, and how it decodes (the module says).
inline std::vector<CacheBranchShape> pattern_cache_branches(const AttnPattern& p) {
    return with_pattern_module(p.kind, [&](auto m) { return decltype(m)::cache_branches(p); });
}
inline bool pattern_cache_keeps_every_row(const AttnPattern& p) {
    const std::vector<CacheBranchShape> b = pattern_cache_branches(p);
    return b.size() == 1 && b[0].w == kWholeSequence;
}
inline long long pattern_cache_first_key(const AttnPattern& p, long long next_pos) {
    return with_pattern_module(p.kind, [&](auto m) { return decltype(m)::cache_first_key(p, next_pos); });
}
inline long long pattern_cache_unpack_rows(const AttnPattern& p, int chunk) {
    return with_pattern_module(p.kind, [&](auto m) { return decltype(m)::cache_unpack_rows(p, chunk); });
}
inline bool pattern_decodes_one_token(const AttnPattern& p) {
    return with_pattern_module(p.kind, [](auto m) { return decltype(m)::kDecodesOneToken; });
}
inline bool pattern_cudnn_runs(const AttnPattern& p) {
    return with_pattern_module(p.kind, [](auto m) { return decltype(m)::kCudnnRuns; });
}
// The flash kernels run p branch by branch (dilated), merging from O = 0, L = -inf.
inline bool pattern_launches_per_branch(const AttnPattern& p) {
    return with_pattern_module(p.kind, [](auto m) { return decltype(m)::kLaunchesPerBranch; });
}

// The tile schedule of the CPU tiled kernel (layers/attention_tiled.h): may queries with
// positions in [q_lo, q_hi] attend keys in [k_lo, k_hi] at all, and does every such pair count
// exactly once (then the tile needs no element mask beyond causality and documents)?
inline bool pattern_tiles_meet(const AttnPattern& p, int q_lo, int q_hi, int k_lo, int k_hi, int seq_len) {
    if (p.causal && k_lo > q_hi) return false;
    return with_pattern_module(p.kind, [&](auto m) { return decltype(m)::tiles_meet(p, q_lo, q_hi, k_lo, k_hi, seq_len); });
}
inline bool pattern_tiles_full(const AttnPattern& p, int q_lo, int q_hi, int k_lo, int k_hi, int seq_len) {
    return with_pattern_module(p.kind, [&](auto m) { return decltype(m)::tiles_full(p, q_lo, q_hi, k_lo, k_hi, seq_len); });
}

// Every pattern's flags (each module adds its own, in the registry's order), and their names.
inline void add_pattern_flags(Flags& flags, PatternFlags& f) {
#define ATTN_KIND_FLAGS(Kind, stem) Kind##Pattern::add_flags(flags, f);
    ATTN_PATTERNS(ATTN_KIND_FLAGS)
#undef ATTN_KIND_FLAGS
}
inline std::vector<std::string> pattern_flag_names() {
    Flags flags("", "");
    PatternFlags f;
    add_pattern_flags(flags, f);
    return flags.names();
}

// The pattern flags given on the command line (flags.was_set), by name.
inline std::vector<std::string> given_pattern_flags(const Flags& flags) {
    std::vector<std::string> given;
    for (const std::string& name : pattern_flag_names())
        if (flags.was_set(name.c_str())) given.push_back(name);
    return given;
}

// A module's flag given while no layer uses the module would be silently ignored (train
// --layout-file F without --attn block-sparse trains a dense model): refused, one line, before
// anything is written. `used` names the patterns the layers have (kName each), `pattern_flag`
// the flag that chooses them (train's --attn, attention_tool's --pattern).
template <class Module>
void refuse_unused_flags_of(const std::vector<std::string>& given, const std::vector<std::string>& used, const char* pattern_flag) {
    if (std::find(used.begin(), used.end(), Module::kName) != used.end()) return;
    Flags mine("", "");
    PatternFlags scratch;
    Module::add_flags(mine, scratch);
    for (const std::string& name : mine.names())
        if (std::find(given.begin(), given.end(), name) != given.end())
            fatal("--%s has no effect without %s %s (no layer is %s): add %s to %s, or drop --%s", name.c_str(), pattern_flag,
                  Module::kName, Module::kName, Module::kName, pattern_flag, name.c_str());
}
inline void refuse_unused_pattern_flags(const std::vector<std::string>& given, const std::vector<std::string>& used,
                                        const char* pattern_flag) {
#define ATTN_KIND_UNUSED(Kind, stem) refuse_unused_flags_of<Kind##Pattern>(given, used, pattern_flag);
    ATTN_PATTERNS(ATTN_KIND_UNUSED)
#undef ATTN_KIND_UNUSED
}

// The pattern `name` from its flags; fatal naming the flags on a bad value. `pattern_flag` is
// the flag that chose the pattern (train's --attn, attention_tool's --pattern).
inline AttnPattern pattern_from_flags(const std::string& name, const PatternFlags& flags, const char* pattern_flag = "--attn") {
    AttnPattern p;
    if (!attn_kind_from_name(name, &p.kind))
        fatal("%s must be %s (got '%s')", pattern_flag, attn_kind_names().c_str(), name.c_str());
    p.causal = flags.causal;
    with_pattern_module(p.kind, [&](auto m) { decltype(m)::from_flags(flags, p); });
    const std::string why = pattern_error(p);
    const std::string given = with_pattern_module(p.kind, [&](auto m) { return decltype(m)::flags_text(flags); });
    if (!why.empty()) fatal("%s %s%s: %s", pattern_flag, name.c_str(), given.c_str(), why.c_str());
    return p;
}

// {"kind":"dilated","causal":true,"segments":[...],...}
inline std::string pattern_to_json(const AttnPattern& p) {
    const std::string fields = with_pattern_module(p.kind, [&](auto m) { return decltype(m)::json_fields(p); });
    return std::string("{\"kind\":\"") + attn_kind_name(p.kind) + "\",\"causal\":" + (p.causal ? "true" : "false") +
           fields + "}";
}

// The first key of `given` (an object, and objects inside it) that `known` lacks, as "layout.x";
// "" when there is none.
inline std::string pattern_json_unknown_key(const Json& given, const Json& known, const std::string& prefix) {
    if (given.kind != Json::Object || known.kind != Json::Object) return "";
    for (const auto& [key, value] : given.obj) {
        if (!known.has(key)) return prefix + key.substr(0, 40);
        const std::string inner = pattern_json_unknown_key(value, known.at(key), prefix + key + ".");
        if (!inner.empty()) return inner;
    }
    return "";
}
// "causal, kind, segments, dilations": the keys of a pattern's JSON object.
inline std::string pattern_json_keys(const Json& known) {
    std::string keys;
    for (const auto& kv : known.obj) keys += (keys.empty() ? "" : ", ") + kv.first;
    return keys;
}

// Throws JsonError on a malformed entry (validation is the caller's: pattern_error).
inline AttnPattern pattern_from_json(const Json& j) {
    AttnPattern p;
    const std::string& kind = j.at("kind").as_string();
    if (!attn_kind_from_name(kind, &p.kind)) throw JsonError("unknown attention kind " + kind);
    p.causal = j.at("causal").as_bool("causal");  // first: a block-sparse layout is checked against the mask
    with_pattern_module(p.kind, [&](auto m) { decltype(m)::from_json(j, p); });
    // A key this build does not read is refused, not dropped, as the config's own keys
    // are: a pattern written by a newer build or edited by hand would otherwise run as another
    // pattern. The keys read are those this build writes for the pattern just read, nested
    // objects (a block-sparse layout) included.
    const std::string unknown = pattern_json_unknown_key(j, JsonParser(pattern_to_json(p)).parse(), "");
    if (!unknown.empty())
        throw JsonError("unknown key \"" + unknown + "\" in a " + attn_kind_name(p.kind) + " layer's pattern (this build reads " +
                        pattern_json_keys(JsonParser(pattern_to_json(p)).parse()) + "): use the build that wrote it, or remove the key");
    return p;
}
