// The parameters of an attention pattern, of every kind (each module reads its own), and the
// flag values they are built from. The list of kinds is layers/patterns/registry.h.
#pragma once
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>
#include "layers/patterns/registry.h"
#include "layers/common.h"
#include "model/json.h"

enum class AttnKind {
#define ATTN_KIND_ENUM(Kind, Module) Kind,
    ATTN_PATTERNS(ATTN_KIND_ENUM)
#undef ATTN_KIND_ENUM
};

// The pattern math (each module's `multiplicity`) runs on the host and in CUDA kernels.
// ATTN_HD_TEMPLATE goes before such a template: its host instantiation (for AttnPattern, whose
// members are host-only) is then not flagged as a host call from a device function.
#ifdef __CUDACC__
#define ATTN_HD __host__ __device__
#define ATTN_HD_TEMPLATE _Pragma("nv_exec_check_disable")
#else
#define ATTN_HD
#define ATTN_HD_TEMPLATE
#endif

constexpr int kMaxDilatedBranches = 64;

struct AttnPattern {
    AttnKind kind = AttnKind::Dense;
    bool causal = true;
    // Dilated (LongNet): branch i has segment length segments[i] and dilation dilations[i].
    std::vector<int> segments, dilations;

    int branches() const { return (int)segments.size(); }
    int segment(int i) const { return segments[i]; }
    int dilation(int i) const { return dilations[i]; }
};

// The same pattern by value, with no heap memory, for a CUDA kernel's parameters (the modules'
// `multiplicity` is a template over the two).
struct AttnPatternArgs {
    AttnKind kind;
    bool causal;
    int n_branches;
    int segments_[kMaxDilatedBranches], dilations_[kMaxDilatedBranches];

    ATTN_HD int branches() const { return n_branches; }
    ATTN_HD int segment(int i) const { return segments_[i]; }
    ATTN_HD int dilation(int i) const { return dilations_[i]; }
};

inline AttnPatternArgs pattern_args(const AttnPattern& p) {
    if (p.branches() > kMaxDilatedBranches) fatal("attention pattern: %d branches, at most %d", p.branches(), kMaxDilatedBranches);
    AttnPatternArgs a{};
    a.kind = p.kind;
    a.causal = p.causal;
    a.n_branches = p.branches();
    for (int i = 0; i < p.branches(); i++) {
        a.segments_[i] = p.segments[i];
        a.dilations_[i] = p.dilations[i];
    }
    return a;
}

// The pattern flags of train and attention_tool, as given (each module parses its own).
struct PatternFlags {
    std::string segments, dilations;  // dilated: "2048,4096,8192", "1,2,4"
};

// "2048,4096,8192" -> {2048, 4096, 8192}; fatal naming the flag on anything else.
inline std::vector<int> parse_int_list(const std::string& text, const char* flag) {
    std::vector<int> out;
    size_t at = 0;
    while (at <= text.size() && !text.empty()) {
        const size_t comma = std::min(text.find(',', at), text.size());
        const std::string item = text.substr(at, comma - at);
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end || v < -2147483647L || v > 2147483647L)
            fatal("%s expects a comma-separated list of integers, got '%s'", flag, text.c_str());
        out.push_back((int)v);
        at = comma + 1;
    }
    return out;
}
