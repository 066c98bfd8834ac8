// The attention patterns the project knows: what a pattern module holds, and the list (list.h)
// that everything written once per pattern is expanded from: the kind enum, the parameter members
// of AttnPattern, AttnPatternArgs and PatternFlags, the one switch over kinds, the flag and JSON
// loops, the kernels' instance tables. The modules' headers are included by three plain lists,
// one line per pattern each: all_params.h (<stem>_params.h), all.h (<stem>.h), all.cuh (<stem>.cuh).
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
//     kLaunchesPerBranch            the flash kernels run it branch by branch (dilated_launch.cuh)
//   <stem>.cuh        its GPU schedule: which key tiles a query tile visits and which query tiles
//                     a key tile visits (a range, or a list for a sparse layout), per-block maps
//                     if its blocks run virtual sequences, its kernel flags, which launches each
//                     schedule serves, and PatternSchedules<Pattern> naming them, with
//                     bind(Params&, pattern): what its launches carry beyond the shapes
//                     (block-sparse rules and tile lists; fixed's stride and summary)
// Every flash kernel is instantiated for the schedules of every listed pattern
// (layers/cuda/attention/schedules.cuh).
//
//
// Adding a pattern: its three files, its line in list.h, and its line in each of all_params.h,
// all.h and all.cuh (tests/check_pattern_module.sh takes a pattern out by those alone).
#pragma once
#include "layers/patterns/list.h"
