// The parameters of an attention pattern, of every kind (each module reads its own), and the
// flag values they are built from. The list of kinds is layers/patterns/registry.h.
#pragma once
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>
#include "layers/patterns/registry.h"
#include "layers/common.h"
#include "core/json.h"

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

// An explicit block layout (block-sparse, read from a file): per head (or one for all heads), per
// query block, its sorted key blocks, as CSR. The view is plain pointers, so that the pattern
// math can ask it on the host and, once the layout is on the device, in a kernel.
struct BlockLayoutView {
    const int* row_ptr = nullptr;  // (heads * n_blocks + 1)
    const int* cols = nullptr;     // sorted key blocks of each (head, query block) row
    int n_blocks = 0, heads = 0;   // heads: 1 (shared) or the model's H
    ATTN_HD bool has(int head, int qb, int kb) const {
        if (!row_ptr || qb >= n_blocks || (heads > 1 && head >= heads)) return false;  // heads past a per-head layout keep nothing
        const int row = (heads == 1 ? 0 : head) * n_blocks + qb;
        int lo = row_ptr[row], hi = row_ptr[row + 1];
        while (lo < hi) {  // binary search in the sorted row
            const int mid = (lo + hi) / 2;
            if (cols[mid] < kb) lo = mid + 1;
            else hi = mid;
        }
        return lo < row_ptr[row + 1] && cols[lo] == kb;
    }
};
struct BlockLayout {
    std::vector<int> row_ptr, cols;
    int n_blocks = 0, heads = 1;
    std::string source;  // the file it came from, for messages
    BlockLayoutView view() const { return BlockLayoutView{row_ptr.data(), cols.data(), n_blocks, heads}; }
};

// What a KV cache keeps of a layer (docs/attention-spec.md#decoding), as its pattern module says
// (cache_branches): branches (w, r) whose head h keeps the rows of the current segment of w
// positions with offset h mod r, packed, ceil(w / r) rows each; or the one branch
// (kWholeSequence, 1) that keeps every row (rows -1: it grows with the sequence).
constexpr long long kWholeSequence = 1LL << 62;  // a branch of one segment, never restarting
struct CacheBranchShape {
    long long w;
    int r;
    long long rows;
};

struct AttnPattern {
    AttnKind kind = AttnKind::Dense;
    bool causal = true;
    // Dilated (LongNet): branch i has segment length segments[i] and dilation dilations[i].
    std::vector<int> segments, dilations;
    // Block-sparse: block size b and the layout's builders, united (0: unused): a window of W
    // tokens, the first g tokens global, key blocks at block distances that are multiples of r
    // within a window, `count` random key blocks per query block row, an explicit layout.
    int block = 0, window = 0, global = 0, dilated_r = 0, dilated_window = 0, random_count = 0;
    uint64_t random_seed = 0;
    std::shared_ptr<const BlockLayout> layout;
    // Fixed (Sparse Transformer): blocks of `stride` tokens, the last `summary` of each seen by later blocks.
    int stride = 0, summary = 0;

    int branches() const { return (int)segments.size(); }
    BlockLayoutView layout_view() const { return layout ? layout->view() : BlockLayoutView{}; }
    int segment(int i) const { return segments[i]; }
    int dilation(int i) const { return dilations[i]; }
};

// Dense or dilated patterns in one expression (tests, defaults): the aggregate has more members.
inline AttnPattern make_pattern(AttnKind kind, bool causal, std::vector<int> segments = {}, std::vector<int> dilations = {}) {
    AttnPattern p;
    p.kind = kind, p.causal = causal, p.segments = std::move(segments), p.dilations = std::move(dilations);
    return p;
}

// The same pattern by value, with no heap memory, for a CUDA kernel's parameters (the modules'
// `multiplicity` is a template over the two).
struct AttnPatternArgs {
    AttnKind kind;
    bool causal;
    int n_branches;
    int segments_[kMaxDilatedBranches], dilations_[kMaxDilatedBranches];
    int block, window, global, dilated_r, dilated_window, random_count;
    uint64_t random_seed;
    int stride, summary;
    BlockLayoutView layout;  // device pointers: pattern_args_cuda (layers/cuda/pattern_args.cuh) uploads it
    ATTN_HD BlockLayoutView layout_view() const { return layout; }

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
    a.block = p.block, a.window = p.window, a.global = p.global, a.dilated_r = p.dilated_r;
    a.dilated_window = p.dilated_window, a.random_count = p.random_count, a.random_seed = p.random_seed;
    a.stride = p.stride, a.summary = p.summary;
    if (p.layout) fatal("internal: a block-sparse layout needs its device copy: use pattern_args_cuda (layers/cuda/pattern_args.cuh)");
    return a;
}

// The pattern flags of train and attention_tool, as given (each module parses its own).
struct PatternFlags {
    std::string segments = "2048,4096,8192", dilations = "1,2,4";  // dilated: LongNet's first three branches
    // block-sparse: block size, window and global tokens, "r,window" dilated blocks,
    // "count,seed" random blocks, a layout file
    int block = 64, window = 0, global = 0;
    std::string dilated_blocks, random_blocks, layout_file;
    int stride = 128, summary = 16;  // fixed: Child et al.'s l = 128 and a summary of c = 16
    // Read before the builders: a layout file's rows are checked against the causal mask
    // (train is always causal; attention_tool has --causal).
    bool causal = true;
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
