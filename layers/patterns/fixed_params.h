// The fixed pattern's parameters (layers/patterns/fixed.h): blocks of `stride` tokens, the last
// `summary` of each seen by every later block. Plain values, so a kernel takes them as they are.
#pragma once

struct FixedParams {
    int stride = 0, summary = 0;
};
using FixedArgs = FixedParams;
inline FixedArgs to_args(const FixedParams& p) { return p; }

// What its flash-kernel launch carries (PatternLaunchArgs, set by fixed.cuh's bind): l and c.
struct FixedLaunchArgs {
    int stride, summary;
};

struct FixedFlags {
    int stride = 128, summary = 16;  // Child et al.'s l = 128 and a summary of c = 16
};
