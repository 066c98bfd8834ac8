// The flash launches (<stem>_launch.cuh: a PatternLaunches specialization) of the patterns of
// layers/patterns/list.h that are launched branch by branch, one line each, in the list's order;
// the others run one launch over their schedule (launch_template.cuh's PatternLaunches).
#pragma once
#include "layers/cuda/attention/launch_template.cuh"
#include "layers/patterns/dilated_launch.cuh"
