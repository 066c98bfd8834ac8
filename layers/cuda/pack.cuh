// 16-byte vector loads and stores shared by the memory-bound kernels: one 128-bit access per
// thread is what keeps a warp's requests fully coalesced on Hopper (8 bf16 or 4 fp32 at once).
#pragma once
#include "layers/cuda/common.cuh"

template <class E>
struct alignas(16) Packed128 {
    static constexpr int size = 16 / (int)sizeof(E);
    E v[size];
    __device__ E& operator[](int i) { return v[i]; }
    __device__ const E& operator[](int i) const { return v[i]; }
};
typedef Packed128<bf16> x128;   // 8 bf16
typedef Packed128<float> f128;  // 4 fp32

// ptr must be 16-byte aligned (the launchers check the base pointers and the row strides).
template <class E>
__device__ __forceinline__ Packed128<E> load128(const E* ptr) {
    Packed128<E> r;
    *reinterpret_cast<int4*>(&r) = *reinterpret_cast<const int4*>(ptr);
    return r;
}
// Streaming load (evict-first): data read exactly once should not push reusable data out of L2.
template <class E>
__device__ __forceinline__ Packed128<E> load128cs(const E* ptr) {
    Packed128<E> r;
    *reinterpret_cast<int4*>(&r) = __ldcs(reinterpret_cast<const int4*>(ptr));
    return r;
}
template <class E>
__device__ __forceinline__ void store128(E* ptr, const Packed128<E>& x) {
    *reinterpret_cast<int4*>(ptr) = *reinterpret_cast<const int4*>(&x);
}

inline bool is_aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

// Full-warp reductions (all 32 lanes must take part).
__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}
__device__ __forceinline__ float warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}
__device__ __forceinline__ double warp_sum(double x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}
