// The GPU schedule (<stem>.cuh) of every pattern of layers/patterns/list.h, spelled from its
// numbered lines (registry.h says why they are numbered).
#pragma once
#include "layers/patterns/all.h"
#include "layers/patterns/registry.h"
#ifdef ATTN_PATTERN_0
#include ATTN_MODULE_HEADER(ATTN_PATTERN_0, .cuh)
#endif
#ifdef ATTN_PATTERN_1
#include ATTN_MODULE_HEADER(ATTN_PATTERN_1, .cuh)
#endif
#ifdef ATTN_PATTERN_2
#include ATTN_MODULE_HEADER(ATTN_PATTERN_2, .cuh)
#endif
#ifdef ATTN_PATTERN_3
#include ATTN_MODULE_HEADER(ATTN_PATTERN_3, .cuh)
#endif
#ifdef ATTN_PATTERN_4
#include ATTN_MODULE_HEADER(ATTN_PATTERN_4, .cuh)
#endif
#ifdef ATTN_PATTERN_5
#include ATTN_MODULE_HEADER(ATTN_PATTERN_5, .cuh)
#endif
#ifdef ATTN_PATTERN_6
#include ATTN_MODULE_HEADER(ATTN_PATTERN_6, .cuh)
#endif
#ifdef ATTN_PATTERN_7
#include ATTN_MODULE_HEADER(ATTN_PATTERN_7, .cuh)
#endif
#ifdef ATTN_PATTERN_8
#include ATTN_MODULE_HEADER(ATTN_PATTERN_8, .cuh)
#endif
#ifdef ATTN_PATTERN_9
#include ATTN_MODULE_HEADER(ATTN_PATTERN_9, .cuh)
#endif
#ifdef ATTN_PATTERN_10
#include ATTN_MODULE_HEADER(ATTN_PATTERN_10, .cuh)
#endif
#ifdef ATTN_PATTERN_11
#include ATTN_MODULE_HEADER(ATTN_PATTERN_11, .cuh)
#endif
#ifdef ATTN_PATTERN_12
#include ATTN_MODULE_HEADER(ATTN_PATTERN_12, .cuh)
#endif
#ifdef ATTN_PATTERN_13
#include ATTN_MODULE_HEADER(ATTN_PATTERN_13, .cuh)
#endif
#ifdef ATTN_PATTERN_14
#include ATTN_MODULE_HEADER(ATTN_PATTERN_14, .cuh)
#endif
#ifdef ATTN_PATTERN_15
#include ATTN_MODULE_HEADER(ATTN_PATTERN_15, .cuh)
#endif
