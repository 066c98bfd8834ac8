// The registry's list: every attention pattern, one line each, X(Kind, stem): its module is
// <Kind>Pattern (layers/patterns/<stem>.h), its parameters AttnPattern's member <stem>. The
// macros that take X are written where they are used (e.g. layers/attention_pattern.h); what a
// module holds, and the include lines a new pattern adds beside this one: docs/patterns.md, "Adding a pattern".
#pragma once

#define ATTN_PATTERNS(X)             \
    X(Dense, dense)                  \
    X(Dilated, dilated)              \
    X(BlockSparse, block_sparse)     \
    X(Fixed, fixed)                  \
    /* the end of the list */
