// The attention patterns the project knows, and the macros that expand their list (list.h) into
// everything that is written once per pattern elsewhere: the kind enum, the parameter members of
// AttnPattern, AttnPatternArgs and PatternFlags, the one switch over kinds, the flag and JSON
// loops, the kernels' instance tables, and the includes of the modules' headers.
//
// A pattern is one module, three files in layers/patterns/ named from its stem (and its types
// from its Kind):
//   <stem>_params.h   its parameters as plain data, before AttnPattern exists:
//                     <Kind>Params (host; AttnPattern's member <stem>), <Kind>Args (by value for
//                     a kernel; AttnPatternArgs's member <stem>), to_args(<Kind>Params) -> Args,
//                     and <Kind>Flags (its flags as given, with their defaults; PatternFlags's
//                     member <stem>)
//   <stem>.h          struct <Kind>Pattern, static members that own everything else:
//     kName                         its name in flags (--attn NAME) and checkpoints
//     heads_error(p, H)             "" or why p cannot run with H heads (a per-head layout)
//     validate(p)                   "" or what is wrong, in terms of the flags
//     multiplicity(p, h, q, k, N)   how often the query at global position q counts the key at
//                                   global position k in head h of a sequence of N tokens, before
//                                   the causal mask (which layers/attention_pattern.h applies);
//                                   p is an AttnPattern or an AttnPatternArgs
//     pairs_kept(p, N, H)           the sum of multiplicities with causality: the FLOP count
//     branches(p)                   the spec's branches: patterns whose softmaxes, mixed by their
//                                   log-sum-exp, give p (one for a single-softmax pattern); the
//                                   GPU test's plain bf16 implementation runs each on its own
//     tiles_meet / tiles_full       the tile schedule: can a query tile meet a key tile (given
//                                   their position ranges), and does every pair count exactly
//                                   once (no element mask needed)
//     add_flags(flags, f)           declares its flags (train and attention_tool ask every module)
//     from_flags, json_fields, from_json   its flags and its part of the checkpoint config
//     flags_text(flags)             its flags as given, for an error line, when validate's
//                                   messages need them to be understood ("" when they name them)
//     cache_branches, cache_first_key, cache_unpack_rows   what a KV cache keeps of its layer
//                                   (every row, or packed branches), the earliest key a later
//                                   query needs, the rows a chunk unpacks packed rows into
//     kDecodesOneToken, kCudnnRuns  one token through the decode kernel; cuDNN's SDPA runs it
//     kLaunchesPerBranch            the flash kernels run it branch by branch (launch_dilated.cuh)
//   <stem>.cuh        its GPU schedule: which key tiles a query tile visits and which query tiles
//                     a key tile visits (a range, or a list for a sparse layout), per-block maps
//                     if its blocks run virtual sequences, its kernel flags, which launches each
//                     schedule serves, and PatternSchedules<Pattern> naming them, with
//                     bind(Params&, pattern): what its launches carry beyond the shapes
//                     (block-sparse rules and tile lists; fixed's stride and summary)
// Every flash kernel is instantiated for the schedules of every listed pattern
// (layers/cuda/attention/schedules.cuh).
//
// Why numbered lines and not one X-macro list: an #include cannot be derived from an X-macro, so
// the includes are spelled from numbered entries (all_params.h, all.h, all.cuh) and the X-macros below are
// built from the same entries. Up to 16 patterns.
#pragma once
#include "layers/patterns/list.h"

// X(Kind, Module) for every pattern, in the list's order (Module is <Kind>Pattern).
#define ATTN_PATTERNS(X) ATTN_EACH_(ATTN_KIND_MODULE_, X)
// X(Kind, stem) for every pattern: the members named after its stem.
#define ATTN_PATTERN_MEMBERS(X) ATTN_EACH_(ATTN_KIND_STEM_, X)

// "layers/patterns/<stem><suffix>" for an entry (all_params.h, all.h and all.cuh include them).
#define ATTN_MODULE_HEADER(entry, suffix) ATTN_STR_(layers/patterns/ATTN_ID_(ATTN_STEM_ entry)suffix)

// The expansion, slot by slot.
#define ATTN_ID_(x) x
#define ATTN_STR2_(x) #x
#define ATTN_STR_(x) ATTN_STR2_(x)
#define ATTN_STEM_(stem, Kind) stem
#define ATTN_UNPAREN_(...) __VA_ARGS__
#define ATTN_CALL_(m, ...) m(__VA_ARGS__)
#define ATTN_KIND_MODULE_(X, stem, Kind) X(Kind, Kind##Pattern)
#define ATTN_KIND_STEM_(X, stem, Kind) X(Kind, stem)
#define ATTN_ENTRY_(how, X, entry) ATTN_CALL_(how, X, ATTN_UNPAREN_ entry)
#ifdef ATTN_PATTERN_16
#error "layers/patterns/list.h: at most 16 patterns (ATTN_PATTERN_0 .. ATTN_PATTERN_15); add slots in registry.h, all_params.h, all.h and all.cuh"
#endif
#ifdef ATTN_PATTERN_0
#define ATTN_SLOT_0_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_0)
#else
#define ATTN_SLOT_0_(how, X)
#endif
#ifdef ATTN_PATTERN_1
#define ATTN_SLOT_1_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_1)
#else
#define ATTN_SLOT_1_(how, X)
#endif
#ifdef ATTN_PATTERN_2
#define ATTN_SLOT_2_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_2)
#else
#define ATTN_SLOT_2_(how, X)
#endif
#ifdef ATTN_PATTERN_3
#define ATTN_SLOT_3_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_3)
#else
#define ATTN_SLOT_3_(how, X)
#endif
#ifdef ATTN_PATTERN_4
#define ATTN_SLOT_4_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_4)
#else
#define ATTN_SLOT_4_(how, X)
#endif
#ifdef ATTN_PATTERN_5
#define ATTN_SLOT_5_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_5)
#else
#define ATTN_SLOT_5_(how, X)
#endif
#ifdef ATTN_PATTERN_6
#define ATTN_SLOT_6_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_6)
#else
#define ATTN_SLOT_6_(how, X)
#endif
#ifdef ATTN_PATTERN_7
#define ATTN_SLOT_7_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_7)
#else
#define ATTN_SLOT_7_(how, X)
#endif
#ifdef ATTN_PATTERN_8
#define ATTN_SLOT_8_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_8)
#else
#define ATTN_SLOT_8_(how, X)
#endif
#ifdef ATTN_PATTERN_9
#define ATTN_SLOT_9_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_9)
#else
#define ATTN_SLOT_9_(how, X)
#endif
#ifdef ATTN_PATTERN_10
#define ATTN_SLOT_10_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_10)
#else
#define ATTN_SLOT_10_(how, X)
#endif
#ifdef ATTN_PATTERN_11
#define ATTN_SLOT_11_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_11)
#else
#define ATTN_SLOT_11_(how, X)
#endif
#ifdef ATTN_PATTERN_12
#define ATTN_SLOT_12_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_12)
#else
#define ATTN_SLOT_12_(how, X)
#endif
#ifdef ATTN_PATTERN_13
#define ATTN_SLOT_13_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_13)
#else
#define ATTN_SLOT_13_(how, X)
#endif
#ifdef ATTN_PATTERN_14
#define ATTN_SLOT_14_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_14)
#else
#define ATTN_SLOT_14_(how, X)
#endif
#ifdef ATTN_PATTERN_15
#define ATTN_SLOT_15_(how, X) ATTN_ENTRY_(how, X, ATTN_PATTERN_15)
#else
#define ATTN_SLOT_15_(how, X)
#endif
#define ATTN_EACH_(how, X) \
    ATTN_SLOT_0_(how, X) \
    ATTN_SLOT_1_(how, X) \
    ATTN_SLOT_2_(how, X) \
    ATTN_SLOT_3_(how, X) \
    ATTN_SLOT_4_(how, X) \
    ATTN_SLOT_5_(how, X) \
    ATTN_SLOT_6_(how, X) \
    ATTN_SLOT_7_(how, X) \
    ATTN_SLOT_8_(how, X) \
    ATTN_SLOT_9_(how, X) \
    ATTN_SLOT_10_(how, X) \
    ATTN_SLOT_11_(how, X) \
    ATTN_SLOT_12_(how, X) \
    ATTN_SLOT_13_(how, X) \
    ATTN_SLOT_14_(how, X) \
    ATTN_SLOT_15_(how, X)
