// The patterns' GPU schedules, one set per pattern module (layers/patterns/<name>.cuh): what a
// query tile visits, what a key tile visits and, for patterns of virtual sequences, each block's
// row maps. Every kernel is instantiated for AllSchedules, gathered over the registry's list
// (ATTN_PATTERNS), and a launch runs the one schedule that serves it (launch_template.cuh).
#pragma once
#include "layers/cuda/attention/schedule_list.cuh"
#include "layers/patterns/all.cuh"
#include "layers/patterns/registry.h"

namespace flash {

#define FLASH_PATTERN_SCHEDULES(Kind, stem) , typename PatternSchedules<Kind##Pattern>::type
using AllSchedules = typename ConcatSchedules<ScheduleList<> ATTN_PATTERNS(FLASH_PATTERN_SCHEDULES)>::type;
#undef FLASH_PATTERN_SCHEDULES

}  // namespace flash
