// The backward's kernels before and after the main ones (every rung uses them):
//  - attention_backward_preprocess_kernel: delta = rowsum(dO * O), L in the log2 domain, and (when
//    dQ is accumulated in fp32) the accumulator zeroed;
//  - attention_backward_dq_convert_kernel: the fp32 dQ accumulator into bf16 dq (written or added).
#pragma once
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/softmax.cuh"

namespace flash {

// One group of D/8 threads per (b, token, h) row, 8 elements (16 bytes) each. Threads past the
// last row stay (clamped, storing nothing) so the group shuffles see every lane.
template <int D>
__global__ void attention_backward_preprocess_kernel(const Params p, int B, bool zero_dq) {
    constexpr int TPR = D / 8;
    const long long rows = (long long)B * p.q_tokens * p.H;
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool valid = idx / TPR < rows;
    const long long row = valid ? idx / TPR : rows - 1;  // ((b * q_tokens) + token) * H + h
    const int part = (int)(idx % TPR);
    const int h = (int)(row % p.H);
    const long long bt = row / p.H;
    const int tok = (int)(bt % p.q_tokens), b = (int)(bt / p.q_tokens);
    const uint4 vo = *reinterpret_cast<const uint4*>(p.o + row * D + part * 8);
    const uint4 vd = *reinterpret_cast<const uint4*>(p.dout + row * D + part * 8);
    const __nv_bfloat162* o2 = reinterpret_cast<const __nv_bfloat162*>(&vo);
    const __nv_bfloat162* d2 = reinterpret_cast<const __nv_bfloat162*>(&vd);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 a = __bfloat1622float2(o2[i]), c = __bfloat1622float2(d2[i]);
        sum = fmaf(a.x, c.x, fmaf(a.y, c.y, sum));
    }
#pragma unroll
    for (int off = TPR / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (!valid) return;
    if (part == 0) {
        const size_t li = ((size_t)b * p.H + h) * p.q_tokens + tok;
        p.delta[li] = sum;
        const float L = p.lse[li];
        p.lse_log2[li] = L == -INFINITY ? INFINITY : L * kLog2e;
    }
    if (zero_dq) {
        float4* dst = reinterpret_cast<float4*>(p.dq_accum + row * D + part * 8);
        dst[0] = make_float4(0.f, 0.f, 0.f, 0.f);
        dst[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
}

// dq (strided) = bf16(dq_accum) (p.accumulate: dq += dq_accum) over the accumulator's tokens,
// 8 elements per thread.
template <int D>
__global__ void attention_backward_dq_convert_kernel(const Params p, int B) {
    constexpr int TPR = D / 8;
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long row = idx / TPR;  // ((b * accum_tokens) + token - accum_tok0) * H + h
    const int part = (int)(idx % TPR);
    if (row >= (long long)B * p.accum_tokens * p.H) return;
    const int h = (int)(row % p.H);
    const long long bt = row / p.H;
    const long long b = bt / p.accum_tokens, tok = p.accum_tok0 + bt % p.accum_tokens;
    const float4* src = reinterpret_cast<const float4*>(p.dq_accum + row * D + part * 8);
    float4 x = src[0], y = src[1];
    uint4* dst = reinterpret_cast<uint4*>(p.dq + (b * p.q_tokens + tok) * p.q_stride + h * D + part * 8);
    if (p.accumulate) {
        const uint4 old = *dst;
        const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&old.x)),
                     c = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&old.y)),
                     d = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&old.z)),
                     e = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&old.w));
        x = make_float4(x.x + a.x, x.y + a.y, x.z + c.x, x.w + c.y);
        y = make_float4(y.x + d.x, y.y + d.y, y.z + e.x, y.w + e.y);
    }
    uint4 out;
    out.x = pack_bf16(x.x, x.y);
    out.y = pack_bf16(x.z, x.w);
    out.z = pack_bf16(y.x, y.y);
    out.w = pack_bf16(y.z, y.w);
    *dst = out;
}

}  // namespace flash
