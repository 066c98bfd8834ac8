// Flash attention, CUDA: the launchers mirroring the CPU reference (layers/attention.h),
//   attention_forward_cuda   ~ attention_forward
//   attention_backward_cuda  ~ attention_backward
// on bf16 storage with fp32 accumulation, head dims 64 and 128, for sm_90a: our kernels
// (layers/cuda/attention/; launch_template.cuh there lists them), for every pattern of the
// registry (layers/patterns/list.h), in tile configurations listed by the variant tables below
// (variant 0 is what the plain launchers run).
//
// Compiled once: this header only DECLARES the launchers, so a program that includes it compiles
// no attention kernel. The kernels and their launch code are built once into objects that the
// Makefile links into the programs using them (build/obj/):
//   attention_flash.o            attention/attention_flash.cu: the launchers below, every pattern, with
//                                the variants the model runs (forward 0, backward 0 and
//                                kDeterministicBackwardVariant)
//   attention_flash_variants.o   attention/attention_flash_variants.cu: the tile configurations only the
//                                tests and the benchmark compare (programs that include
//                                attention_flash_variants.h)
//
// Determinism: the forward is deterministic. The default backward adds dQ with fp32 atomics, so
// dQ can differ in the last bits from run to run (dK, dV do not); for bit-identical results use
// attention_backward_cuda_variant(flash::kDeterministicBackwardVariant, ...), an mma.sync kernel
// pair, slower than the default backward (see notes/attention.md, the deterministic backward).
//
// Layout (as the CPU reference): Q, K, V (B, N, H, D) read in place with token stride s.stride
// (3*H*D for slices of a QKV buffer (B, N, 3, H, D)); O (B, N, H, D) contiguous; L (B, H, N) fp32,
// natural log; a row with no key gets O = 0 and L = -inf. Causal and document masks use the
// global positions pos (N).
//
// Unlike the CPU reference, whose backward ADDS into its gradient buffers, attention_backward_cuda
// OVERWRITES dq, dk, dv (slices of a dQKV buffer, same strides as q, k, v): every element of the
// three slices is written, none is read before this call wrote it (a pattern launched branch by
// branch adds its later branches into what its first branch, or a zero-fill, wrote; likewise O
// and L forward).
//
// Patterns: every pattern of the registry (layers/patterns/list.h), each through its module
// (layers/patterns/<stem>.cuh, and <stem>_launch.cuh for one launched branch by branch). Dense
// reads the positions as given; the other modules' schedules cut segments, blocks and tile lists
// from positions and assume pos[i] = i. Workspace: attention_backward_workspace_bytes(s) is enough
// for every pattern; attention_backward_workspace_bytes(s, pattern) is the smaller exact size.
#pragma once
#include <cstddef>
#include "layers/attention.h"
#include "layers/cuda/common.cuh"

namespace flash {

struct Params;  // the kernels' parameters (layers/cuda/attention/params.cuh)

// A tile configuration, so that the tests and the benchmark can compare them.
struct Variant {
    const char* name;
    void (*run)(const Params&, int B, cudaStream_t);
    // Backward only, the pieces a launch per branch or per key block runs (a module's
    // PatternLaunches, the two-sided launchers): the dK/dV kernel (adding dQ into dq_accum when dq
    // is null) and the separate dQ kernel.
    void (*dkdv)(const Params&, int B, cudaStream_t) = nullptr;
    void (*dq)(const Params&, int B, cudaStream_t) = nullptr;
};

// The variants of head dim D (64 or 128), indexed as attention_*_cuda_variant takes them; variant
// 0 is what the public launchers use (chosen by the measurements in notes/attention.md). A program
// that links only attention_flash.o sees the variants the model runs (forward: 1, backward: 2, the
// second being kDeterministicBackwardVariant); one that also links attention_flash_variants.o
// sees every configuration, at the same indices (attention_flash.cu says why it is built so).
const Variant* forward_variants(int D, int* count);
const Variant* backward_variants(int D, int* count);

// Variant 1 of the backward is the deterministic one (no atomics: a separate dQ pass).
constexpr int kDeterministicBackwardVariant = 1;

// A pattern's own launch knobs are in its module (layers/patterns/<stem>_tuning.h).

// The warp-specialized forward (layers/cuda/attention/forward_ws.cuh) walks the query tiles with a
// block per SM when a (b, h) row or a virtual sequence (a pattern's segment) has at most this many
// tiles of 128 (32: rows up to 4096), and whenever it is not 0 for a pattern whose schedule asks
// (kAlwaysPersistent: short tile lists); else it runs a block per tile. A variable so that the
// tests run both ways (and the benchmark times both).
extern int ws_persistent_max_query_tiles;
// The persistent forward's grid: at most this many blocks (0: one per SM). The tests set a few,
// so that each block walks many tiles.
extern int persistent_grid_max;
// Rows of a pattern that groups them (kL2RowGroups: dense) run on the warp-specialized kernels in
// launch-order groups of as many (b, h) rows as
// keep what each block re-reads (K and V forward; Q, dO and dQ's accumulator backward) within this
// many bytes of the L2 (8 MiB, the best budget on an H200; 0: plain grid order),
// tile_scheduler.cuh and dense_l2_group say why.
extern long long dense_l2_budget;

}  // namespace flash

// Workspace of attention_backward_cuda for dense attention (the most any pattern needs).
size_t attention_backward_workspace_bytes(AttnShape s);

// The same for a given pattern, as its module's launches need (one that walks the sequence in
// chunks needs an fp32 dQ accumulator for one chunk only), never more than the above.
size_t attention_backward_workspace_bytes(AttnShape s, const AttnPattern& pattern);

// Forward with an explicit tile configuration (flash::forward_variants); variant 0 is the default.
void attention_forward_cuda_variant(int variant, bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                                    const int* pos, const int* doc_start, const AttnPattern& pattern, AttnShape s,
                                    float scale, cudaStream_t stream);

void attention_forward_cuda(bf16* out,          // (B, N, H, D)
                            float* lse,         // (B, H, N)
                            const bf16* q, const bf16* k, const bf16* v,  // (B, N, H, D), stride s.stride
                            const int* pos,        // (N) global positions, increasing
                            const int* doc_start,  // (B, N) or nullptr
                            const AttnPattern& pattern, AttnShape s, float scale, cudaStream_t stream);

// Backward with an explicit tile configuration (flash::backward_variants); variant 0 is the default.
void attention_backward_cuda_variant(int variant, bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* out,
                                     const float* lse, const bf16* q, const bf16* k, const bf16* v, const int* pos,
                                     const int* doc_start, const AttnPattern& pattern, AttnShape s, float scale,
                                     float* workspace, cudaStream_t stream);

void attention_backward_cuda(bf16* dq, bf16* dk, bf16* dv,  // (B, N, H, D), stride s.stride: OVERWRITTEN
                             const bf16* dout,   // (B, N, H, D)
                             const bf16* out,    // (B, N, H, D)
                             const float* lse,   // (B, H, N)
                             const bf16* q, const bf16* k, const bf16* v,  // (B, N, H, D), stride s.stride
                             const int* pos, const int* doc_start, const AttnPattern& pattern, AttnShape s,
                             float scale,
                             float* workspace,  // attention_backward_workspace_bytes(s, pattern)
                             cudaStream_t stream);
