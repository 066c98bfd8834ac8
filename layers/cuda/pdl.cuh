// Programmatic dependent launch (Hopper): a kernel launched with launch_pdl may start while the
// kernel before it in the stream is still running, once every block of that one has called
// pdl_trigger (or exited). It runs what does not depend on the earlier kernels (reading weights
// into L2, working out its rows) and then waits in pdl_wait until the earlier kernel has finished
// and its writes are visible. Decoding one token is a chain of ~60 launches of 1-15 us each
// whose own first loads (weights, cached rows) otherwise wait for the launch before to drain:
// with this each one's start hides under the one before (see notes/kv-cache.md, launches that start early).
//
// Rules for a kernel launched so: nothing before pdl_wait reads what an earlier kernel of the
// step writes, and nothing before it writes at all. A kernel that calls these but is launched
// the ordinary way runs as before (the wait returns at once). Chains are safe from starvation:
// a kernel's blocks start only when every block of the one before has triggered, so all of
// those are already running.
#pragma once
#include <utility>
#include "layers/cuda/common.cuh"

// false: every launch the ordinary way (bench_kv_cache --no-pdl; the tests compare the bits).
inline bool g_pdl = true;

__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// Starts fetching bytes (a multiple of 16, from a 16-byte aligned address) into L2.
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, unsigned bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// kernel<<<grid, block, smem, stream>>>(args...), allowed to start early (g_pdl) as above.
template <typename... KArgs, typename... Args>
inline void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr, cfg.numAttrs = g_pdl ? 1 : 0;
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}
