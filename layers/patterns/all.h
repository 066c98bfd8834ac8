// Every pattern module of layers/patterns/list.h (<stem>.h), spelled from its numbered lines
// (registry.h says why they are numbered).
#pragma once
#include "layers/patterns/pattern_params.h"
#include "layers/patterns/registry.h"
#ifdef ATTN_PATTERN_0
#include ATTN_MODULE_HEADER(ATTN_PATTERN_0, .h)
#endif
#ifdef ATTN_PATTERN_1
#include ATTN_MODULE_HEADER(ATTN_PATTERN_1, .h)
#endif
#ifdef ATTN_PATTERN_2
#include ATTN_MODULE_HEADER(ATTN_PATTERN_2, .h)
#endif
#ifdef ATTN_PATTERN_3
#include ATTN_MODULE_HEADER(ATTN_PATTERN_3, .h)
#endif
#ifdef ATTN_PATTERN_4
#include ATTN_MODULE_HEADER(ATTN_PATTERN_4, .h)
#endif
#ifdef ATTN_PATTERN_5
#include ATTN_MODULE_HEADER(ATTN_PATTERN_5, .h)
#endif
#ifdef ATTN_PATTERN_6
#include ATTN_MODULE_HEADER(ATTN_PATTERN_6, .h)
#endif
#ifdef ATTN_PATTERN_7
#include ATTN_MODULE_HEADER(ATTN_PATTERN_7, .h)
#endif
#ifdef ATTN_PATTERN_8
#include ATTN_MODULE_HEADER(ATTN_PATTERN_8, .h)
#endif
#ifdef ATTN_PATTERN_9
#include ATTN_MODULE_HEADER(ATTN_PATTERN_9, .h)
#endif
#ifdef ATTN_PATTERN_10
#include ATTN_MODULE_HEADER(ATTN_PATTERN_10, .h)
#endif
#ifdef ATTN_PATTERN_11
#include ATTN_MODULE_HEADER(ATTN_PATTERN_11, .h)
#endif
#ifdef ATTN_PATTERN_12
#include ATTN_MODULE_HEADER(ATTN_PATTERN_12, .h)
#endif
#ifdef ATTN_PATTERN_13
#include ATTN_MODULE_HEADER(ATTN_PATTERN_13, .h)
#endif
#ifdef ATTN_PATTERN_14
#include ATTN_MODULE_HEADER(ATTN_PATTERN_14, .h)
#endif
#ifdef ATTN_PATTERN_15
#include ATTN_MODULE_HEADER(ATTN_PATTERN_15, .h)
#endif
