// The attention patterns the project knows. Each is a module, one header in layers/patterns/,
// a struct with static members that own everything about the pattern:
//   kName                         its name in flags (--attn NAME) and checkpoints
//   validate(p)                   "" or what is wrong, in terms of the flags
//   multiplicity(p, h, q, k, N)   how often the query at global position q counts the key at
//                                 global position k in head h of a sequence of N tokens, before
//                                 the causal mask (which layers/attention_pattern.h applies)
//   pairs_kept(p, N, H)           the sum of multiplicities with causality: the FLOP count
//   branches(p)                   the spec's branches: patterns whose softmaxes, mixed by their
//                                 log-sum-exp, give p (one for a single-softmax pattern); the
//                                 GPU test's plain bf16 implementation runs each on its own
//   tiles_meet / tiles_full       the tile schedule: can a query tile meet a key tile (given
//                                 their position ranges), and does every pair count exactly once
//                                 (no element mask needed)
//   add_flags(flags, f)           declares its flags (train and attention_tool ask every module)
//   from_flags, json_fields, from_json   its flags and its part of the checkpoint config
//   flags_text(flags)             its flags as given, for an error line, when validate's
//                                 messages need them to be understood ("" when they name them)
//   cache_branches, cache_first_key, cache_unpack_rows   what a KV cache keeps of its layer
//                                 (every row, or packed branches), the earliest key a later
//                                 query needs, the rows a chunk unpacks packed rows into
//   kDecodesOneToken, kCudnnRuns  one token through the decode kernel; cuDNN's SDPA runs it
//   kLaunchesPerBranch            the flash kernels run it branch by branch (launch_dilated.cuh)
// and, in <name>.cuh, its GPU schedule: which key tiles a query tile visits and which query tiles
// a key tile visits (a range, or a list for a sparse layout), per-block maps if its blocks run
// virtual sequences, its kernel flags, which launches each schedule serves, and
// PatternSchedules<Pattern> naming them, with bind(Params&, pattern): what its launches carry
// beyond the shapes (block-sparse rules and tile lists; fixed's stride and summary). Every flash kernel is instantiated for the schedules of
// the patterns listed below (layers/cuda/attention/schedules.cuh, which includes each .cuh).
// Adding a pattern means writing its module (<name>.h, <name>.cuh), adding one line below, its
// two includes (layers/attention_pattern.h, layers/cuda/attention/schedules.cuh) and its fields
// in pattern_params.h (AttnPattern, AttnPatternArgs, PatternFlags). The fixed pattern touched
// exactly those files, tests and docs aside (notes/one-room-per-concern.md counts them).
#pragma once

#define ATTN_PATTERNS(X)               \
    X(Dense, DensePattern)             \
    X(Dilated, DilatedPattern)         \
    X(BlockSparse, BlockSparsePattern) \
    X(Fixed, FixedPattern)
