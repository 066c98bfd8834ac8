// Flash attention, CUDA: every tile configuration in flash::forward_variants / backward_variants
// (attention_flash.h), for the tests and benchmarks that compare them. Include this header in
// such a program and link build/obj/attention_flash_variants.o (the Makefile's
// ATTN_VARIANT_USERS); without that object the program only sees the variants the model runs
// (layers/cuda/attention/attention_flash.cu says why), so this header makes its link fail instead
// ("undefined reference to flash::full_variant_tables").
#pragma once
#include "layers/cuda/attention_flash.h"

namespace flash {

extern const int full_variant_tables;  // defined in attention_flash_variants.cu
// Kept (used) so that every program including this header refers to the object's symbol.
[[maybe_unused]] __attribute__((used)) static const int* const require_full_variant_tables = &full_variant_tables;

}  // namespace flash
