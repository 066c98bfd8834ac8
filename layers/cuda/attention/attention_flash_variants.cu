// Flash attention, CUDA: the tile configurations that only the tests and the benchmark compare,
// compiled once into build/obj/attention_flash_variants.o and linked only into the programs that
// compare them (not into train or infer). Before main, they are appended to the tables of
// flash::forward_variants / backward_variants, after the variants attention_flash.cu compiles
// (what the model runs); that file says why the tables are split this way.
#include "layers/cuda/attention_flash_variants.h"
#include "layers/cuda/attention/launch_template.cuh"

namespace flash {
namespace {

// Forward variants 1-5 (0, the warp-specialized kernel, is in attention_flash.cu): 1 is the
// wgmma kernel that was variant 0 before it (the rung below it on the ladder).
const Variant kForward64[] = {
    {"fwd wgmma wg2 bn64", fwd_wgmma<64, 2, 64>},
    {"fwd wgmma wg2 bn128", fwd_wgmma<64, 2, 128>},
    {"fwd wgmma wg1 bn64", fwd_wgmma<64, 1, 64>},
    {"fwd wgmma wg1 bn128", fwd_wgmma<64, 1, 128>},
    {"fwd mma.sync mt2 w4 bn128", fwd<64, 2, 4, 128>},
};
const Variant kForward128[] = {
    {"fwd wgmma wg2 bn128", fwd_wgmma<128, 2, 128>},
    {"fwd wgmma wg2 bn64", fwd_wgmma<128, 2, 64>},
    {"fwd wgmma wg1 bn64", fwd_wgmma<128, 1, 64>},
    {"fwd mma.sync mt2 w4 bn64", fwd<128, 2, 4, 64>},
    {"fwd mma.sync mt2 w4 bn32", fwd<128, 2, 4, 32>},
};
// Backward variants 2 and up (0, the warp-specialized backward, and 1 = kDeterministicBackwardVariant
// are in attention_flash.cu): 2 is the wgmma backward (the rung below it on the ladder); at D = 64,
// 4 is the warp-specialized backward with 64 queries a step (the next step's S^T, dP^T under this
// step's dQ: see notes/fa3-speed.md, the backward at D = 64).
const Variant kBackward64[] = {
    {"bwd wgmma atomic wg2 bn128 bm64", bwd_atomic_wgmma<64>, launch_backward_dkdv_wgmma<64>},
    {"bwd mma.sync atomic mt2 w4 bm32", bwd_atomic<64, 2, 4, 32>, launch_backward_dkdv<64, 2, 4, 32, true>},
    {"bwd ws tma wg2 bn128 bm64 s3 | wgmma atomic wg2 bn128 bm64", bwd_ws<64, 3, 64>, launch_backward_dkdv_ws<64, 3, 64>},
};
const Variant kBackward128[] = {
    {"bwd wgmma atomic wg2 bn128 bm64", bwd_atomic_wgmma<128>, launch_backward_dkdv_wgmma<128>},
    {"bwd mma.sync atomic mt1 w8 bm64", bwd_atomic<128, 1, 8, 64>, launch_backward_dkdv<128, 1, 8, 64, true>},
};

template <int N>
void add(bool backward, int D, int first, const Variant (&v)[N]) {
    add_variants(backward, D, first, v, N);
}

int register_variants() {
    add(false, 64, 1, kForward64);
    add(false, 128, 1, kForward128);
    add(true, 64, kDeterministicBackwardVariant + 1, kBackward64);
    add(true, 128, kDeterministicBackwardVariant + 1, kBackward128);
    return 1;
}

}  // namespace

// Initialised (the variants appended) before main; attention_flash_variants.h refers to it.
extern const int full_variant_tables = register_variants();

}  // namespace flash
