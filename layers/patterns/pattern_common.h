// What every pattern module uses, before any of them: the host/device markers for the pattern
// math, what a KV cache keeps of a layer, and the integer lists of the flags.
#pragma once
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>
#include "core/error.h"

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

// What a KV cache keeps of a layer (docs/attention-spec.md#decoding), as its pattern module says
// (cache_branches): branches (w, r) whose head h keeps the rows of the current segment of w
// positions with offset h mod r, packed, ceil(w / r) rows each; or the one branch
// (kWholeSequence, 1) that keeps every row (rows -1: it grows with the sequence).
constexpr long long kWholeSequence = 1LL << 62;  // a branch of one segment, never restarting
// The offset class h mod r that head h keeps in a branch of dilation r (the decode kernels unpack
// packed rows by it).
ATTN_HD inline int branch_class(int head, int r) { return head % r; }
struct CacheBranchShape {
    long long w;
    int r;
    long long rows;
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
        // strtol also takes leading spaces and a '+': the list takes digits with an optional '-' only.
        if (item.empty() || !(std::isdigit((unsigned char)item[0]) || item[0] == '-') || *end || v < -2147483647L || v > 2147483647L)
            fatal("%s expects a comma-separated list of integers, got '%s'", flag, text.c_str());
        out.push_back((int)v);
        at = comma + 1;
    }
    return out;
}
