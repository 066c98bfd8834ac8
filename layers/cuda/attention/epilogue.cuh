// What the kernels write: the forward's epilogue (O and L, written or merged into what a run of
// launches holds so far) and the backward's stores of dK, dV, dQ rows (written or added) and its
// fp32 dQ accumulator's layout.
#pragma once
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/softmax.cuh"

namespace flash {

// The epilogue of every forward kernel, for one warp's 16-row slice (rows row0 + g, row0 + g + 8)
// with its flash state: acc = unnormalised P V, m = row max (log2 domain), l = the thread's
// partial row sums. Writes O = acc / l and L, or with p.accumulate merges this result (o, lse)
// into the O, L already there (earlier branches, earlier key blocks):  L' = logsumexp(L, lse),
// O' = e^(L - L') O + e^(lse - L') o; a side with no key (-inf) weighs 0, and a row with no key
// anywhere keeps O = 0, L = -inf. O is bf16 p.o, or fp32 p.o_f32 when set. All 32 lanes must
// call it (quad sums, and a warp barrier between reading and writing L).
template <int D, bool MERGE, bool FP32_OUT>
__device__ __forceinline__ void store_output(const Params& p, int b, int h, int row0, const float (&acc)[D / 8][4],
                                             const float (&m)[2], const float (&l)[2]) {
    constexpr int DB = D / 8;
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    float lse2[2], w_old[2] = {0.f, 0.f}, w_new[2];
    bool ok[2];
    size_t li[2];
    int tok[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const float sum = quad_sum(l[r]);
        const int row = row0 + g + 8 * r;
        ok[r] = row < p.qrows.len;
        tok[r] = p.qrows.token(ok[r] ? row : 0);
        li[r] = ((size_t)b * p.H + h) * p.q_tokens + tok[r];
        lse2[r] = sum > 0.f ? m[r] + __log2f(sum) : -INFINITY;
        w_new[r] = sum > 0.f ? 1.f / sum : 0.f;
        if (MERGE && p.accumulate && ok[r]) {
            const float old2 = p.lse[li[r]] * kLog2e;  // -inf stays -inf
            const float mx = fmaxf(old2, lse2[r]);
            if (mx == -INFINITY) {
                ok[r] = false;  // no key on either side: O = 0, L = -inf are already there
            } else {
                const float a = ex2(old2 - mx), c = ex2(lse2[r] - mx), tot = a + c;
                w_old[r] = a / tot;
                w_new[r] *= c / tot;
                lse2[r] = mx + __log2f(tot);
            }
        }
    }
    if (MERGE) __syncwarp();  // every lane of the quad has read L before lane t = 0 overwrites it
#pragma unroll
    for (int r = 0; r < 2; r++) {
        if (!ok[r]) continue;
        const size_t at0 = (((size_t)b * p.q_tokens + tok[r]) * p.H + h) * D + 2 * t;
#pragma unroll
        for (int db = 0; db < DB; db++) {
            float x = acc[db][2 * r] * w_new[r], y = acc[db][2 * r + 1] * w_new[r];
            if (FP32_OUT && p.o_f32) {
                float2* at = reinterpret_cast<float2*>(p.o_f32 + at0 + db * 8);
                if (MERGE && w_old[r] != 0.f) {
                    const float2 o = *at;
                    x = fmaf(w_old[r], o.x, x);
                    y = fmaf(w_old[r], o.y, y);
                }
                *at = make_float2(x, y);
            } else {
                __nv_bfloat162* at = reinterpret_cast<__nv_bfloat162*>(p.o + at0 + db * 8);
                if (MERGE && w_old[r] != 0.f) {
                    const float2 o = __bfloat1622float2(*at);
                    x = fmaf(w_old[r], o.x, x);
                    y = fmaf(w_old[r], o.y, y);
                }
                *at = __floats2bfloat162_rn(x, y);
            }
        }
        if (t == 0) p.lse[li[r]] = lse2[r] == -INFINITY ? -INFINITY : lse2[r] * kLn2;
    }
}

// dst (2 bf16) = v, or += v with accumulate: how the backward kernels store dK, dV, dQ rows.
__device__ __forceinline__ void store_grad2(bf16* dst, float x, float y, bool accumulate) {
    __nv_bfloat162* at = reinterpret_cast<__nv_bfloat162*>(dst);
    if (accumulate) {
        const float2 o = __bfloat1622float2(*at);
        x += o.x;
        y += o.y;
    }
    *at = __floats2bfloat162_rn(x, y);
}

// Element (b, token, h, 0) of the fp32 dQ accumulator (which covers only its chunk of tokens).
// (backward_ws.cuh precomputes the same layout as an offset and a row stride: change both together.)
__device__ __forceinline__ float* dq_accum_row(const Params& p, int b, int tok, int h, int D) {
    return p.dq_accum + (((size_t)b * p.accum_tokens + (tok - p.accum_tok0)) * p.H + h) * D;
}

}  // namespace flash
