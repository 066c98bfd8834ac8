// A pattern's parameters for a kernel (AttnPatternArgs), with what lives in host memory put on the
// device: each module's member from its GPU schedule's device_args (layers/patterns/<stem>.cuh;
// block-sparse uploads an explicit layout once and keeps it for the life of the program).
#pragma once
#include "layers/attention_pattern.h"
#include "layers/cuda/attention/schedules.cuh"

inline AttnPatternArgs pattern_args_cuda(const AttnPattern& p) {
    AttnPatternArgs a{};
    a.kind = p.kind;
    a.causal = p.causal;
#define ATTN_ARGS_CUDA(Kind, stem) a.stem = flash::PatternSchedules<Kind##Pattern>::device_args(p.stem);
    ATTN_PATTERNS(ATTN_ARGS_CUDA)
#undef ATTN_ARGS_CUDA
    return a;
}
