// The attention patterns the project knows: what a pattern module holds, and the list (list.h)
// that everything written once per pattern is expanded from: the kind enum, the parameter members
// of AttnPattern, AttnPatternArgs and PatternFlags, the one switch over kinds, the flag and JSON
// loops, the kernels' instance tables. The modules' headers are included by three plain lists,
// one line per pattern each: all_params.h (<stem>_params.h), all.h (<stem>.h), all.cuh (<stem>.cuh).
//
// What a module holds, which hooks it fills and the tests that then run on it:
// docs/patterns.md, "Adding a pattern" (walked through on the fixed pattern). Every flash kernel
// is instantiated for the schedules of every listed pattern (layers/cuda/attention/schedules.cuh).
#pragma once
#include "layers/patterns/list.h"
