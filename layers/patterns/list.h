// The registry's list: one line per attention pattern, (file stem, Kind). Adding a pattern is
// writing its module, layers/patterns/<stem>_params.h, <stem>.h and <stem>.cuh (what each holds:
// layers/patterns/registry.h), and one line here with the next number. Write the stem first,
// right after the parenthesis: the module headers' names are spelled from it
// (ATTN_MODULE_HEADER), and a space there would become part of the name.
#pragma once

#define ATTN_PATTERN_0 (dense, Dense)
#define ATTN_PATTERN_1 (dilated, Dilated)
#define ATTN_PATTERN_2 (block_sparse, BlockSparse)
#define ATTN_PATTERN_3 (fixed, Fixed)
