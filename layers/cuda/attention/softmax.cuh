// The online softmax of the flash kernels: row reductions across a quad and the update of the
// running max, sum and output accumulator.
#pragma once
#include "layers/cuda/attention/ptx.cuh"

namespace flash {

template <typename F>
__device__ __forceinline__ F quad_max(F x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// ---------------------------------------------------------------------------------------------
// The online-softmax update, the one place the flash recurrence lives, in two halves so that a
// kernel can run the first while its accumulator is still being written by the tensor cores
// (forward_ws.cuh). s holds this tile's raw scores for the thread's rows g (elements 0,1) and
// g+8 (elements 2,3), masked ones = -inf. On return s holds P = 2^(s*scale_log2 - m) with m the
// running row max (log2 domain), l the thread's partial row sums, and alpha the factor by which
// the P V accumulator must be rescaled to the new max (rescale_acc).
template <int NB>
__device__ __forceinline__ void online_softmax_scores(float (&s)[NB][4], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                                      float scale_log2) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float mx = m[r];
#pragma unroll
        for (int j = 0; j < NB; j++) mx = fmaxf(mx, fmaxf(s[j][2 * r], s[j][2 * r + 1]) * scale_log2);
        mx = quad_max(mx);
        // A row with every key masked so far keeps m = -inf; subtract 0 then, not -inf (NaN).
        const float m_use = mx == -INFINITY ? 0.f : mx;
        alpha[r] = ex2(m[r] - m_use);  // m[r] = -inf: 0, and acc, l are 0 anyway
        m[r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < NB; j++) {
            s[j][2 * r] = ex2(fmaf(s[j][2 * r], scale_log2, -m_use));
            s[j][2 * r + 1] = ex2(fmaf(s[j][2 * r + 1], scale_log2, -m_use));
            sum += s[j][2 * r] + s[j][2 * r + 1];
        }
        l[r] = l[r] * alpha[r] + sum;
    }
}
template <int DB>
__device__ __forceinline__ void rescale_acc(float (&acc)[DB][4], const float (&alpha)[2]) {
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int d = 0; d < DB; d++) {
            acc[d][2 * r] *= alpha[r];
            acc[d][2 * r + 1] *= alpha[r];
        }
}
// Both halves at once, for kernels whose accumulator is at rest.
template <int NB, int DB>
__device__ __forceinline__ void online_softmax_update(float (&s)[NB][4], float (&m)[2], float (&l)[2],
                                                      float (&acc)[DB][4], float scale_log2) {
    float alpha[2];
    online_softmax_scores<NB>(s, m, l, alpha, scale_log2);
    rescale_acc<DB>(acc, alpha);
}

}  // namespace flash
