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

struct AttnPattern {
    AttnKind kind = AttnKind::Dense;
    bool causal = true;
    // Dilated (LongNet): branch i has segment length segments[i] and dilation dilations[i].
    std::vector<int> segments, dilations;
};

// The pattern flags of train and attention_tool, as given (each module parses its own).
struct PatternFlags {
    std::string segments = "2048,4096,8192", dilations = "1,2,4";
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
