// Attention on the GPU, written as plainly as a kernel can be: the third rung of the ladder
// (README "How to read the code"), between the CPU tiled kernel (layers/attention_tiled.h) and
// the tensor-core kernels (attention/forward_mma_sync.cuh, attention/forward_wgmma.cuh and the rest of the ladder).
//
// One warp per (batch row, head, query row). The lanes split the head dimension (lane l owns
// d = l, l + 32, ...); for each key the warp computes the score with a shuffle reduction, asks
// the pattern module whether and how often the key counts (key_multiplicity: the same function
// the CPU reference calls, compiled for the device), and runs the online softmax update that
// the flash kernels run per tile, here per key. No shared memory, no tensor cores: it does
// O(nq * nk * D) work with O(nk) dependent steps per row, so it is for checking and for
// reading, not for speed.
//
// The interface is layers/attention.h's: two sides (AttnQueries, AttnKeys with device pointers
// and global positions), AttnDims::seq_len the global length, Write or Merge. Storage T is
// float or bf16; arithmetic is fp32. O is TO (float or bf16) in Write mode; Merge mode folds the
// keys into a running fp32 O and L (start from O = 0, L = -inf: attention_partial_init_naive).
// The backward block step adds into fp32 dQ (one warp owns a query row: plain adds) and fp32
// dK, dV (many rows share a key: atomics).
#pragma once
#include <algorithm>
#include <climits>
#include <cmath>
#include <type_traits>
#include "layers/attention.h"
#include "layers/cuda/common.cuh"
#include "layers/cuda/pattern_args.cuh"

namespace naive {

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void store(float* p, float x) { *p = x; }
__device__ __forceinline__ void store(bf16* p, float x) { *p = __float2bfloat16(x); }

__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

constexpr int kMaxDPerLane = 8;  // D <= 256

// The warp's (b, h, query row i), or false when the warp has no row (grid tail).
__device__ __forceinline__ bool warp_row(const AttnDims& dm, int nq, int& b, int& h, int& i) {
    const long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
    if (w >= (long long)dm.B * dm.H * nq) return false;
    i = (int)(w % nq);
    h = (int)(w / nq % dm.H);
    b = (int)(w / nq / dm.H);
    return true;
}

template <typename T, typename TO>
__global__ void forward_kernel(TO* out, float* lse, AttnQueries<T> qs, AttnKeys<T> ks, AttnPatternArgs pattern,
                               AttnDims dm, float scale, bool merge) {
    int b, h, i;
    if (!warp_row(dm, qs.n, b, h, i)) return;
    const int lane = threadIdx.x & 31, D = dm.D;
    float q[kMaxDPerLane], acc[kMaxDPerLane];
    const T* qrow = qs.q + ((size_t)b * qs.n + i) * qs.stride + (size_t)h * D;
    for (int c = 0, d = lane; d < D; c++, d += 32) {
        q[c] = to_f32(qrow[d]);
        acc[c] = 0.f;
    }
    const int qpos = qs.pos[i], doc = qs.doc_start ? qs.doc_start[(size_t)b * qs.n + i] : INT_MIN;
    float m = -INFINITY, l = 0.f;  // running max and sum of m(p,k) e^(s - m)
    for (int j = 0; j < ks.n; j++) {
        const int kpos = ks.pos[j];
        const int mult = kpos < doc ? 0 : key_multiplicity(pattern, h, qpos, kpos, dm.seq_len);
        if (!mult) continue;  // the same for every lane: the warp stays together
        const T* krow = ks.k + ((size_t)b * ks.n + j) * ks.stride + (size_t)h * D;
        const T* vrow = ks.v + ((size_t)b * ks.n + j) * ks.stride + (size_t)h * D;
        float dot = 0.f;
        for (int c = 0, d = lane; d < D; c++, d += 32) dot += q[c] * to_f32(krow[d]);
        const float s = scale * warp_sum(dot);
        const float m_new = fmaxf(m, s);
        const float alpha = __expf(m - m_new), p = mult * __expf(s - m_new);  // m = -inf: alpha = 0
        l = l * alpha + p;
        for (int c = 0, d = lane; d < D; c++, d += 32) acc[c] = acc[c] * alpha + p * to_f32(vrow[d]);
        m = m_new;
    }
    float lrow = l > 0.f ? m + logf(l) : -INFINITY;
    TO* orow = out + ((size_t)b * qs.n + i) * dm.H * D + (size_t)h * D;
    float* lp = lse + ((size_t)b * dm.H + h) * qs.n + i;
    float w_new = l > 0.f ? 1.f / l : 0.f, w_old = 0.f;
    if (merge) {  // L' = log(e^L + e^l), O' = e^(L - L') O + e^(l - L') o
        const float L = *lp, mx = fmaxf(L, lrow);
        if (mx == -INFINITY) return;  // no key on either side: O = 0, L = -inf stay
        const float a = __expf(L - mx), c = __expf(lrow - mx);
        w_old = a / (a + c);
        w_new *= c / (a + c);
        lrow = mx + logf(a + c);
    }
    for (int c = 0, d = lane; d < D; c++, d += 32)
        store(orow + d, acc[c] * w_new + (w_old != 0.f ? w_old * to_f32(orow[d]) : 0.f));
    __syncwarp();  // every lane has read L (merge) before lane 0 writes it
    if (lane == 0) *lp = lrow;
}

// delta (B, H, nq) = rowsum(dO * O).
template <typename T, typename TO>
__global__ void backward_preprocess_kernel(float* delta, const T* dout, const TO* out, AttnDims dm, int nq) {
    int b, h, i;
    if (!warp_row(dm, nq, b, h, i)) return;
    const int lane = threadIdx.x & 31;
    const size_t row = ((size_t)b * nq + i) * dm.H * dm.D + (size_t)h * dm.D;
    float s = 0.f;
    for (int d = lane; d < dm.D; d += 32) s += to_f32(dout[row + d]) * to_f32(out[row + d]);
    s = warp_sum(s);
    if (lane == 0) delta[((size_t)b * dm.H + h) * nq + i] = s;
}

// One key block: P = m e^(s q.k - L), dS = P (dO.v - delta); dQ += s dS k, dK += s dS q,
// dV += P dO. dq (B, nq, H, D) and dk, dv (B, nk, H, D) are fp32 and contiguous.
template <typename T>
__global__ void backward_block_kernel(float* dq, float* dk, float* dv, const T* dout, const float* lse,
                                      const float* delta, AttnQueries<T> qs, AttnKeys<T> ks, AttnPatternArgs pattern,
                                      AttnDims dm, float scale) {
    int b, h, i;
    if (!warp_row(dm, qs.n, b, h, i)) return;
    const int lane = threadIdx.x & 31, D = dm.D, H = dm.H;
    const float L = lse[((size_t)b * H + h) * qs.n + i], di = delta[((size_t)b * H + h) * qs.n + i];
    if (L == -INFINITY) return;
    float q[kMaxDPerLane], g[kMaxDPerLane], dqa[kMaxDPerLane];
    const T* qrow = qs.q + ((size_t)b * qs.n + i) * qs.stride + (size_t)h * D;
    const T* grow = dout + ((size_t)b * qs.n + i) * H * D + (size_t)h * D;
    for (int c = 0, d = lane; d < D; c++, d += 32) {
        q[c] = to_f32(qrow[d]);
        g[c] = to_f32(grow[d]);
        dqa[c] = 0.f;
    }
    const int qpos = qs.pos[i], doc = qs.doc_start ? qs.doc_start[(size_t)b * qs.n + i] : INT_MIN;
    for (int j = 0; j < ks.n; j++) {
        const int kpos = ks.pos[j];
        const int mult = kpos < doc ? 0 : key_multiplicity(pattern, h, qpos, kpos, dm.seq_len);
        if (!mult) continue;
        const T* krow = ks.k + ((size_t)b * ks.n + j) * ks.stride + (size_t)h * D;
        const T* vrow = ks.v + ((size_t)b * ks.n + j) * ks.stride + (size_t)h * D;
        float dot = 0.f, dp = 0.f;
        for (int c = 0, d = lane; d < D; c++, d += 32) {
            dot += q[c] * to_f32(krow[d]);
            dp += g[c] * to_f32(vrow[d]);
        }
        const float p = mult * __expf(scale * warp_sum(dot) - L), ds = p * (warp_sum(dp) - di);
        float* dkrow = dk + (((size_t)b * ks.n + j) * H + h) * D;
        float* dvrow = dv + (((size_t)b * ks.n + j) * H + h) * D;
        for (int c = 0, d = lane; d < D; c++, d += 32) {
            dqa[c] += scale * ds * to_f32(krow[d]);
            atomicAdd(dkrow + d, scale * ds * q[c]);
            atomicAdd(dvrow + d, p * g[c]);
        }
    }
    float* dqrow = dq + (((size_t)b * qs.n + i) * H + h) * D;
    for (int c = 0, d = lane; d < D; c++, d += 32) dqrow[d] += dqa[c];
}

template <typename T>
__global__ void fill_kernel(T* x, size_t n, T value) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) x[i] = value;
}

inline unsigned warp_blocks(const AttnDims& dm, int nq) {
    const long long warps = (long long)dm.B * dm.H * nq;
    return (unsigned)((warps * 32 + 127) / 128);
}

inline void check_dims(const AttnDims& dm) {
    if (dm.D < 1 || dm.D > 32 * kMaxDPerLane) fatal("attention (naive CUDA): head dim %d must be in [1, %d]", dm.D, 32 * kMaxDPerLane);
}

}  // namespace naive

// O = 0, L = -inf: where a run of Merge calls starts.
inline void attention_partial_init_naive(float* out, float* lse, AttnDims dm, int nq, cudaStream_t stream) {
    CUDA_CHECK(cudaMemsetAsync(out, 0, (size_t)dm.B * nq * dm.H * dm.D * sizeof(float), stream));
    const size_t nl = (size_t)dm.B * dm.H * nq;
    naive::fill_kernel<float><<<(unsigned)std::min<size_t>((nl + 255) / 256, 4096), 256, 0, stream>>>(lse, nl, -INFINITY);
    CUDA_CHECK_LAST();
}

// Write: out (TO) and lse over these keys. Merge: out must be float, folded in by log-sum-exp.
template <typename T, typename TO>
void attention_forward_naive_cuda(TO* out,     // (B, nq, H, D)
                                  float* lse,  // (B, H, nq)
                                  const AttnQueries<T>& qs, const AttnKeys<T>& ks, const AttnPattern& pattern,
                                  AttnDims dm, float scale, AttnOutput mode, cudaStream_t stream) {
    naive::check_dims(dm);
    if (mode == AttnOutput::Merge && !std::is_same<TO, float>::value)
        fatal("attention (naive CUDA): Merge mode accumulates in fp32: pass a float output");
    if ((long long)dm.B * dm.H * qs.n == 0) return;
    naive::forward_kernel<T, TO><<<naive::warp_blocks(dm, qs.n), 128, 0, stream>>>(
        out, lse, qs, ks, pattern_args_cuda(pattern), dm, scale, mode == AttnOutput::Merge);
    CUDA_CHECK_LAST();
}

template <typename T, typename TO>
void attention_backward_preprocess_naive_cuda(float* delta, const T* dout, const TO* out, AttnDims dm, int nq,
                                              cudaStream_t stream) {
    naive::check_dims(dm);
    if ((long long)dm.B * dm.H * nq == 0) return;
    naive::backward_preprocess_kernel<T, TO><<<naive::warp_blocks(dm, nq), 128, 0, stream>>>(delta, dout, out, dm, nq);
    CUDA_CHECK_LAST();
}

// Adds into dq (B, nq, H, D) and dk, dv (B, nk, H, D), all fp32 contiguous.
template <typename T>
void attention_backward_block_naive_cuda(float* dq, float* dk, float* dv, const T* dout, const float* lse,
                                         const float* delta, const AttnQueries<T>& qs, const AttnKeys<T>& ks,
                                         const AttnPattern& pattern, AttnDims dm, float scale, cudaStream_t stream) {
    naive::check_dims(dm);
    if ((long long)dm.B * dm.H * qs.n == 0) return;
    naive::backward_block_kernel<T><<<naive::warp_blocks(dm, qs.n), 128, 0, stream>>>(
        dq, dk, dv, dout, lse, delta, qs, ks, pattern_args_cuda(pattern), dm, scale);
    CUDA_CHECK_LAST();
}
