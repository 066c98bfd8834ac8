// Hopper's asynchronous machinery for the warp-specialized kernels (forward_ws.cuh): the Tensor
// Memory Accelerator (TMA) that copies a tile from global to shared memory on its own, the
// mbarriers that say when such a copy has landed (and when consumers are done with a buffer),
// named barriers that order two warpgroups, register reallocation between warpgroups, and the
// TMA's reduce-add of a shared-memory box into global memory.
// PTX ISA: "cp.async.bulk.tensor", "cp.reduce.async.bulk.tensor", "mbarrier", "bar.sync / bar.arrive", "setmaxnreg".
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cstdint>
#include "layers/cuda/common.cuh"

namespace flash {

// ---- mbarriers (64-bit, in shared memory). A phase completes when `count` arrivals happened and
// every byte announced by expect_tx has landed; waiters name the parity of the phase they wait for.

__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
// Makes the initialised barriers visible to the async proxy (the TMA unit) before any copy uses them.
__device__ __forceinline__ void mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
// One arrival, announcing `bytes` that copies will deliver to this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Announces `bytes` without arriving: the announcing thread arrives later, after its own stores.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Blocks until the phase of the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, int parity) {
    asm volatile(
        "{\n.reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n"
        "}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}

// ---- TMA: a 3-D box (64 columns, `rows` rows, 1 batch) of a tensor map to shared memory, the
// copy's bytes counted on `bar`. Coordinates innermost first: column, row, batch.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int col, int row, int batch, uint32_t bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(col), "r"(row), "r"(batch), "r"(bar)
        : "memory");
}
// The same from a 4-D map (a folded row map, make_row_tensor_map): column, phase, folded row, batch.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, int col, int phase, int row, int batch,
                                            uint32_t bar) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(col), "r"(phase), "r"(row), "r"(batch), "r"(bar)
        : "memory");
}
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// ---- TMA reduce-add: the fp32 box in shared memory at `src` (laid out as the tensor map's box and
// swizzle) added into global memory at the L2, box corner at (col, row, batch). The issuing thread
// tracks it in its bulk groups: commit, then wait until the source is read (the shared memory may
// be written again) or until the adds are done.
__device__ __forceinline__ void tma_reduce_add_3d(const CUtensorMap* map, uint32_t src, int col, int row, int batch) {
    asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(src), "r"(col), "r"(row), "r"(batch)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_read_all() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// ---- Named barriers (ids 1..15; 0 is __syncthreads): `threads` in all, some arriving (not
// waiting), some syncing (waiting for the rest).
__device__ __forceinline__ void named_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- Register reallocation between warpgroups (every thread of a warpgroup executes it).
template <int N>
__device__ __forceinline__ void regs_decrease() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N>
__device__ __forceinline__ void regs_increase() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }

// ---- Host: the driver's tensor-map encoder (found once; CUDA 12 or newer).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
    static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found;
        CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
        if (found != cudaDriverEntryPointSuccess) fatal("attention: the CUDA driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12 and a Hopper GPU)");
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }();
    return encode;
}

// ---- Host: the tensor map of one side of attention, Q, K or V read in place: `batch` sequences
// of `tokens` rows (row stride `stride` elements, `cols` = H*D of them used), boxes of 64 columns
// (128 bytes, the 128-byte swizzle's row) by `box_rows` rows, stored in shared memory in the
// canonical 128-byte-swizzled layout the wgmma descriptors read (wgmma.cuh,
// smem_tiles.cuh's sw128_offset). With `step` > 1 a box takes every step-th row from its first one (the TMA's
// element stride: a dilated branch's virtual sequence), still packed as box_rows rows in shared
// memory. Rows past `tokens` read as zeros. With `fold` = a > 1 (a step over the TMA's 8,
// tma_rows.cuh: ws_fold) the map is 4-D, token t at (column, t % a, t / a, batch), so that rows
// `step` apart are step / a apart in its third dimension: a must divide step and tokens (rows
// past `tokens` then still read as zeros). Returns false when TMA cannot read the buffer this
// way (an address or stride not a multiple of 16 bytes; box_rows * step / fold over the TMA's
// 256, or step / fold over its 8): the caller uses a kernel without TMA.
inline bool make_row_tensor_map(CUtensorMap* map, const bf16* base, int cols, int tokens, int stride, int batch, int box_rows,
                                int step = 1, int fold = 1) {
    if ((reinterpret_cast<uintptr_t>(base) & 15) || (stride * 2) % 16 || cols % 64) return false;
    if (fold < 1 || step % fold || tokens % fold) return false;
    const int s = step / fold;  // the element stride
    if (s < 1 || s > 8 || box_rows * s > 256) return false;
    const cuuint64_t row = (cuuint64_t)stride * 2;  // bytes
    const cuuint64_t dims[4] = {(cuuint64_t)cols, (cuuint64_t)fold, (cuuint64_t)(tokens / fold), (cuuint64_t)batch};
    const cuuint64_t strides[3] = {row, row * fold, row * tokens};  // dims 1, 2, 3
    const cuuint32_t box[4] = {64, 1, (cuuint32_t)(box_rows * s), 1}, steps[4] = {1, 1, (cuuint32_t)s, 1};
    // Unfolded: the 3-D map of the same rows (dimension 1 of size 1 dropped).
    const cuuint64_t dims3[3] = {dims[0], (cuuint64_t)tokens, dims[3]}, strides3[2] = {row, row * tokens};
    const cuuint32_t box3[3] = {64, box[2], 1}, steps3[3] = {1, steps[2], 1};
    const bool folded = fold > 1;
    const CUresult r = tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, folded ? 4 : 3, const_cast<bf16*>(base),
                                            folded ? dims : dims3, folded ? strides : strides3, folded ? box : box3,
                                            folded ? steps : steps3, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS;
}

// ---- Host: the tensor map of an fp32 accumulator (batch, tokens, cols) written by reduce-adds:
// boxes of 32 columns (128 bytes) by `box_rows` rows, 128-byte swizzled in shared memory (16-byte
// chunk c of row r at chunk c ^ (r % 8)). With `step` > 1 a box adds into every step-th row from
// its first one (a dilated branch's virtual sequence), as make_row_tensor_map reads them. Rows
// past `tokens` are not written.
inline bool make_accum_tensor_map(CUtensorMap* map, const float* base, int cols, int tokens, int batch, int box_rows,
                                  int step = 1) {
    if ((reinterpret_cast<uintptr_t>(base) & 15) || cols % 32) return false;
    if (step < 1 || step > 8 || box_rows * step > 256) return false;
    const cuuint64_t dims[3] = {(cuuint64_t)cols, (cuuint64_t)tokens, (cuuint64_t)batch};
    const cuuint64_t strides[2] = {(cuuint64_t)cols * 4, (cuuint64_t)tokens * cols * 4};
    const cuuint32_t box[3] = {32, (cuuint32_t)(box_rows * step), 1}, steps[3] = {1, (cuuint32_t)step, 1};
    const CUresult r = tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, const_cast<float*>(base), dims, strides, box,
                                            steps, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS;
}

}  // namespace flash
