// Gradient checkpointing: what a transformer block keeps from its forward for its backward,
// and what the backward recomputes first. Both backends (model/gpt.h, model/gpt_cuda.cuh)
// implement the same three policies, block by block:
//
//   policy     kept per block (per token)                     recomputed in the backward
//   none       x after attention, x out, qkv, attention out,  nothing
//              its log-sum-exp, ln1, ln2, fc before and after
//              GELU, LayerNorm statistics
//   selective  x after attention, x out, qkv, attention out,  ln1, ln2 (LayerNorms), the MLP's up
//              its log-sum-exp                                projection and its GELU
//   full       x out                                          the whole block up to its GELU, from
//                                                             the block's input (the previous x out)
//
// Selective keeps what is expensive to recompute (attention, the QKV projection) and drops the
// MLP's 8C of 16C activations for one extra up-projection (8C^2 of the block's 72C^2 multiply-adds
// per token, forward and backward). Full keeps C per block and recomputes the block's forward
// except its last projection (the block's output is kept). A recomputed value is computed by the
// same kernel from the same inputs as in the forward, so it is the same bits: the gradients of
// every policy are identical wherever the backward itself is deterministic (the tests check this).
#pragma once
#include <string>
#include "layers/common.h"

enum class Recompute { None, Selective, Full };

// Fastest first: the planner takes the first that fits.
constexpr Recompute kRecomputePolicies[] = {Recompute::None, Recompute::Selective, Recompute::Full};

inline const char* recompute_name(Recompute r) {
    return r == Recompute::None ? "none" : r == Recompute::Selective ? "selective" : "full";
}

// "auto" sets *is_auto and leaves *out alone; anything else must name a policy.
inline void parse_recompute(const std::string& s, Recompute* out, bool* is_auto) {
    *is_auto = s == "auto";
    if (*is_auto) return;
    for (Recompute r : kRecomputePolicies)
        if (s == recompute_name(r)) {
            *out = r;
            return;
        }
    fatal("--recompute must be auto, none, selective or full (got '%s')", s.c_str());
}
