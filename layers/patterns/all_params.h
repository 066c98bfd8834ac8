// The parameter header (<stem>_params.h) of every pattern of layers/patterns/list.h, spelled
// from its numbered lines (registry.h says why they are numbered).
#pragma once
#include "layers/patterns/registry.h"
#ifdef ATTN_PATTERN_0
#include ATTN_MODULE_HEADER(ATTN_PATTERN_0, _params.h)
#endif
#ifdef ATTN_PATTERN_1
#include ATTN_MODULE_HEADER(ATTN_PATTERN_1, _params.h)
#endif
#ifdef ATTN_PATTERN_2
#include ATTN_MODULE_HEADER(ATTN_PATTERN_2, _params.h)
#endif
#ifdef ATTN_PATTERN_3
#include ATTN_MODULE_HEADER(ATTN_PATTERN_3, _params.h)
#endif
#ifdef ATTN_PATTERN_4
#include ATTN_MODULE_HEADER(ATTN_PATTERN_4, _params.h)
#endif
#ifdef ATTN_PATTERN_5
#include ATTN_MODULE_HEADER(ATTN_PATTERN_5, _params.h)
#endif
#ifdef ATTN_PATTERN_6
#include ATTN_MODULE_HEADER(ATTN_PATTERN_6, _params.h)
#endif
#ifdef ATTN_PATTERN_7
#include ATTN_MODULE_HEADER(ATTN_PATTERN_7, _params.h)
#endif
#ifdef ATTN_PATTERN_8
#include ATTN_MODULE_HEADER(ATTN_PATTERN_8, _params.h)
#endif
#ifdef ATTN_PATTERN_9
#include ATTN_MODULE_HEADER(ATTN_PATTERN_9, _params.h)
#endif
#ifdef ATTN_PATTERN_10
#include ATTN_MODULE_HEADER(ATTN_PATTERN_10, _params.h)
#endif
#ifdef ATTN_PATTERN_11
#include ATTN_MODULE_HEADER(ATTN_PATTERN_11, _params.h)
#endif
#ifdef ATTN_PATTERN_12
#include ATTN_MODULE_HEADER(ATTN_PATTERN_12, _params.h)
#endif
#ifdef ATTN_PATTERN_13
#include ATTN_MODULE_HEADER(ATTN_PATTERN_13, _params.h)
#endif
#ifdef ATTN_PATTERN_14
#include ATTN_MODULE_HEADER(ATTN_PATTERN_14, _params.h)
#endif
#ifdef ATTN_PATTERN_15
#include ATTN_MODULE_HEADER(ATTN_PATTERN_15, _params.h)
#endif
