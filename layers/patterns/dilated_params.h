// Dilated attention's parameters (layers/patterns/dilated.h): branch i has segment length
// segments[i] and dilation dilations[i]. A kernel takes them by value, in arrays of fixed size.
#pragma once
#include <string>
#include <vector>
#include "core/error.h"
#include "layers/patterns/pattern_common.h"

constexpr int kMaxDilatedBranches = 64;

struct DilatedParams {
    std::vector<int> segments, dilations;
    int branches() const { return (int)segments.size(); }
    int segment(int i) const { return segments[i]; }
    int dilation(int i) const { return dilations[i]; }
};

// The same by value, with no heap memory, for a CUDA kernel's parameters (multiplicity reads
// either through branches(), segment(i) and dilation(i)).
struct DilatedArgs {
    int n_branches;
    int segments_[kMaxDilatedBranches], dilations_[kMaxDilatedBranches];
    ATTN_HD int branches() const { return n_branches; }
    ATTN_HD int segment(int i) const { return segments_[i]; }
    ATTN_HD int dilation(int i) const { return dilations_[i]; }
};

inline DilatedArgs to_args(const DilatedParams& p) {
    if (p.branches() > kMaxDilatedBranches) fatal("attention pattern: %d branches, at most %d", p.branches(), kMaxDilatedBranches);
    DilatedArgs a{};
    a.n_branches = p.branches();
    for (int i = 0; i < p.branches(); i++) a.segments_[i] = p.segments[i], a.dilations_[i] = p.dilations[i];
    return a;
}

// What a flash-kernel launch of one branch carries (the segments a block runs) lives in the
// kernels' generic SequenceGrid (layers/cuda/attention/params.cuh), which dilated_launch.cuh
// sets per branch: nothing here.
struct DilatedLaunchArgs {};

struct DilatedFlags {
    std::string segments = "2048,4096,8192", dilations = "1,2,4";  // LongNet's first three branches
};
