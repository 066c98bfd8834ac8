// The parameters of an attention pattern, of every kind, and the flag values they are built
// from: each registered module contributes its own member, named after its stem (p.dilated,
// p.block_sparse, p.fixed, ...), of the types its <stem>_params.h defines. The list of kinds is
// layers/patterns/list.h; nothing here names a pattern.
#pragma once
#include <string>
#include "layers/patterns/pattern_common.h"
#include "layers/patterns/registry.h"
#include "layers/patterns/all_params.h"

enum class AttnKind {
#define ATTN_KIND_ENUM(Kind, stem) Kind,
    ATTN_PATTERNS(ATTN_KIND_ENUM)
#undef ATTN_KIND_ENUM
};

struct AttnPattern {
    AttnKind kind = AttnKind::Dense;
    bool causal = true;
    // Each module's parameters (only the member of `kind` is read).
#define ATTN_PARAMS_MEMBER(Kind, stem) Kind##Params stem;
    ATTN_PATTERNS(ATTN_PARAMS_MEMBER)
#undef ATTN_PARAMS_MEMBER
};

// A pattern of `kind` with every parameter at its zero value (tests fill in their own).
inline AttnPattern make_pattern(AttnKind kind, bool causal) {
    AttnPattern p;
    p.kind = kind, p.causal = causal;
    return p;
}

// The same pattern by value, with no heap memory, for a CUDA kernel's parameters (the modules'
// `multiplicity` is a template over the two).
struct AttnPatternArgs {
    AttnKind kind;
    bool causal;
#define ATTN_ARGS_MEMBER(Kind, stem) Kind##Args stem;
    ATTN_PATTERNS(ATTN_ARGS_MEMBER)
#undef ATTN_ARGS_MEMBER
};

// What a flash-kernel launch carries for its pattern beyond the shapes (flash::Params::args):
// the member of the launch's kind (the others unused), set by its module's GPU schedule
// (layers/patterns/<stem>.cuh, bind and bind_tiles) and read by it.
struct PatternLaunchArgs {
#define ATTN_LAUNCH_MEMBER(Kind, stem) Kind##LaunchArgs stem;
    ATTN_PATTERNS(ATTN_LAUNCH_MEMBER)
#undef ATTN_LAUNCH_MEMBER
};

// Host memory a module's parameters hold (a block-sparse layout) needs its device copy first:
// pattern_args_cuda (layers/cuda/pattern_args.cuh) makes it, with each module's device_args.
inline AttnPatternArgs pattern_args(const AttnPattern& p) {
    AttnPatternArgs a{};
    a.kind = p.kind;
    a.causal = p.causal;
#define ATTN_ARGS_FROM(Kind, stem) a.stem = to_args(p.stem);
    ATTN_PATTERNS(ATTN_ARGS_FROM)
#undef ATTN_ARGS_FROM
    return a;
}

// The pattern flags of train and attention_tool, as given (each module declares and parses its
// own member).
struct PatternFlags {
#define ATTN_FLAGS_MEMBER(Kind, stem) Kind##Flags stem;
    ATTN_PATTERNS(ATTN_FLAGS_MEMBER)
#undef ATTN_FLAGS_MEMBER
    // Read before the builders: a layout file's rows are checked against the causal mask
    // (train is always causal; attention_tool has --causal).
    bool causal = true;
};
