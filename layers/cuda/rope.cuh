// Rotary position embedding on the GPU (CPU reference: layers/rope.h), GPT-NeoX pairing: dim i
// of a head rotates with dim i + D/2 by angle pos * theta^(-2i/D).
// The angle is formed and reduced in double: at pos ~1e6 the angle is ~1e6 rad, where an fp32
// angle is off by up to 0.03 rad (ulp 0.06) and its sine would be wrong in the second digit.
// One thread per (token, pair of adjacent i): it computes its two sincos once (double, with
// proper range reduction) and applies them to q and k of every head, and copies v.
#pragma once
#include "layers/cuda/common.cuh"

// ------------------------------------------------------------------------------------------------
// Kernels. SIGN = +1: forward rotation; -1: the inverse rotation (backward: rotation is orthogonal).

template <int SIGN>
__device__ __forceinline__ void rope_rotate(bf16* out,        // (B, T, 3, H, D)
                                            const bf16* inp,  // (B, T, 3, H, D); out == inp allowed
                                            const int* pos,   // (T)
                                            int B, int T, int H, int D, float theta) {
    const int half = D / 2, pairs = half / 2;  // each thread owns dims i, i+1 (and i+half, i+half+1)
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)B * T * pairs) return;
    const int i = (int)(idx % pairs) * 2;
    const long long bt = idx / pairs;
    const int t = (int)(bt % T);
    float c[2], s[2];
    for (int k = 0; k < 2; k++) {
        const double inv_freq = pow((double)theta, -2.0 * (i + k) / D);
        double sd, cd;
        sincos((double)pos[t] * inv_freq, &sd, &cd);
        c[k] = (float)cd;
        s[k] = (float)(SIGN * sd);
    }
    const size_t row = (size_t)bt * 3 * H * D;
    for (int slot = 0; slot < 2; slot++) {  // q, k
        for (int h = 0; h < H; h++) {
            const size_t at = row + ((size_t)slot * H + h) * D + i;
            const __nv_bfloat162 a = *reinterpret_cast<const __nv_bfloat162*>(inp + at);
            const __nv_bfloat162 b = *reinterpret_cast<const __nv_bfloat162*>(inp + at + half);
            const float x1[2] = {__low2float(a), __high2float(a)}, x2[2] = {__low2float(b), __high2float(b)};
            float o1[2], o2[2];
            for (int k = 0; k < 2; k++) {
                o1[k] = x1[k] * c[k] - x2[k] * s[k];
                o2[k] = x1[k] * s[k] + x2[k] * c[k];
            }
            *reinterpret_cast<__nv_bfloat162*>(out + at) = __floats2bfloat162_rn(o1[0], o1[1]);
            *reinterpret_cast<__nv_bfloat162*>(out + at + half) = __floats2bfloat162_rn(o2[0], o2[1]);
        }
    }
    if (out == inp) return;  // v is already in place
    for (int h = 0; h < H; h++) {
        const size_t at = row + ((size_t)2 * H + h) * D + i;
        *reinterpret_cast<__nv_bfloat162*>(out + at) = *reinterpret_cast<const __nv_bfloat162*>(inp + at);
        *reinterpret_cast<__nv_bfloat162*>(out + at + half) = *reinterpret_cast<const __nv_bfloat162*>(inp + at + half);
    }
}

__global__ void rope_forward_kernel(bf16* out, const bf16* inp, const int* pos, int B, int T, int H, int D, float theta) {
    rope_rotate<1>(out, inp, pos, B, T, H, D, theta);
}
__global__ void rope_backward_kernel(bf16* dinp, const bf16* dout, const int* pos, int B, int T, int H, int D, float theta) {
    rope_rotate<-1>(dinp, dout, pos, B, T, H, D, theta);
}

// ------------------------------------------------------------------------------------------------
// Launchers. D must be a multiple of 4 and the buffers 4-byte aligned.

inline void rope_launch_(int sign, bf16* out, const bf16* inp, const int* pos, int B, int T, int H, int D, float theta,
                         cudaStream_t stream) {
    if (D % 4 != 0) fatal("rope: head dim D = %d must be a multiple of 4", D);
    if (((uintptr_t)out | (uintptr_t)inp) & 3) fatal("rope: buffers must be 4-byte aligned");
    const long long threads = (long long)B * T * (D / 4);
    if (threads == 0) return;
    const int block = 256;
    if (sign > 0) rope_forward_kernel<<<ceil_div(threads, block), block, 0, stream>>>(out, inp, pos, B, T, H, D, theta);
    else rope_backward_kernel<<<ceil_div(threads, block), block, 0, stream>>>(out, inp, pos, B, T, H, D, theta);
    CUDA_CHECK_LAST();
}

// out: q and k rotated, v copied. out == inp allowed.
inline void rope_forward_cuda(bf16* out,          // (B, T, 3, H, D)
                              const bf16* inp,    // (B, T, 3, H, D)
                              const int* pos,     // (T) device: global position of each token
                              int B, int T, int H, int D, float theta, cudaStream_t stream) {
    rope_launch_(+1, out, inp, pos, B, T, H, D, theta, stream);
}

// dinp OVERWRITTEN with the inverse rotation of dout (v's gradient copied). dinp == dout allowed.
inline void rope_backward_cuda(bf16* dinp,         // (B, T, 3, H, D)
                               const bf16* dout,   // (B, T, 3, H, D)
                               const int* pos,     // (T) device
                               int B, int T, int H, int D, float theta, cudaStream_t stream) {
    rope_launch_(-1, dinp, dout, pos, B, T, H, D, theta, stream);
}
