// The dilated pattern's launch knobs (dilated_launch.cuh says what each does), variables so that
// the tests and the benchmark can set them; inline, so every program that includes this sees one
// variable, with no unit of its own to define it.
#pragma once

namespace flash {

inline long long dilated_min_chunk_tokens = 1 << 16;  // the backward's smallest dQ chunk (64K tokens)
inline int dilated_forward_group = 16;                // launch-order groups of virtual sequences
inline int dilated_backward_group = 16;               //   (0: plain grid order)

}  // namespace flash
