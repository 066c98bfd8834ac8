// Flash attention forward on tensor cores (FlashAttention-2 structure): one block per
// (query tile, b, h) walks the key tiles its schedule gives, keeping O, the row max and the row
// sum in registers; K/V tiles stream through a 2-stage cp.async pipeline. See
// params.cuh for the descriptors, launch_template.cuh for the launcher.
#pragma once
#include "layers/cuda/attention/masks.cuh"
#include "layers/cuda/attention/params.cuh"
#include "layers/cuda/attention/ptx.cuh"
#include "layers/cuda/attention/schedules.cuh"
#include "layers/cuda/attention/smem_tiles.cuh"
#include "layers/cuda/attention/softmax.cuh"
#include "layers/cuda/attention/tile_scheduler.cuh"

namespace flash {

// Shared memory of the forward kernel: Q (BM, D) and two stages of K and V (BN, D), bf16.
template <int D, int MT, int NW, int BN>
constexpr int forward_smem_bytes() {
    return (16 * MT * NW * D + 4 * BN * D) * 2;
}

// The pattern's per-row element rule (Schedule::row_rule, dense.cuh) where the schedule masks
// elements itself; a rule that keeps every key for the others.
template <class Schedule, bool = Schedule::kBlockSparse>
struct RowRuleOf {
    struct type {
        __device__ bool keeps(int) const { return true; }
    };
    __device__ static type make(const Params&, int) { return {}; }
};
template <class Schedule>
struct RowRuleOf<Schedule, true> {
    using type = typename Schedule::RowRule;
    __device__ static type make(const Params& p, int qp) { return Schedule::row_rule(p, qp); }
};

// Sets s[mt][j][*] = -inf where the key is not allowed for the row (or lies past the keys), and,
// when the schedule's list says the pattern cuts this tile pair, where head h's pattern drops it.
// Row positions are re-read here rather than kept in registers: few tiles need a mask.
template <int MT, int NB, class Schedule = DenseSchedule>
__device__ __forceinline__ void mask_scores(float (&s)[MT][NB][4], const Params& p, int b, int row0, int k0,
                                            int kn, int h = 0, bool cut = false) {
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    // Dense and dilated rows: a column bound per row (masks.cuh: causal_key_end_of_row one-sided;
    // two-sided, from the contiguous positions, with no documents).
    if constexpr (!Schedule::kBlockSparse) {
        if (Schedule::kTwoSided ? !p.doc_start : rows_mask_ok(p)) {
            int lim[MT][2];  // keep columns 2t + c with c < lim
            bool by_rows = true;
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    int end = kn;
                    if (p.causal) {
                        const int row = min(row0 + mt * 16 + g + 8 * r, p.qrows.len - 1);
                        const int e = Schedule::kTwoSided ? contiguous_rows_le(p.k_pos0, p.krows, p.q_pos0 + p.qrows.token(row))
                                                          : causal_key_end_of_row(p, row);
                        by_rows = by_rows && e >= 0;
                        end = min(end, e - k0);
                    }
                    lim[mt][r] = end - 2 * t;
                }
            if (by_rows) {
#pragma unroll
                for (int j = 0; j < NB; j++)
#pragma unroll
                    for (int e = 0; e < 2; e++)
#pragma unroll
                        for (int mt = 0; mt < MT; mt++)
#pragma unroll
                            for (int r = 0; r < 2; r++)
                                if (8 * j + e >= lim[mt][r]) s[mt][j][2 * r + e] = -INFINITY;
                return;
            }
        }
    }
    int qp[MT][2], qd[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = min(row0 + mt * 16 + g + 8 * r, p.qrows.len - 1);  // rows past the end: any
            const int tok = p.qrows.token(row);
            // Two-sided and block-sparse sides hold contiguous positions (pos0 + token, masks.cuh):
            // no loads (a block-sparse list's many cut tiles, a two-sided launch's diagonals).
            qp[mt][r] = Schedule::kTwoSided ? p.q_pos0 + tok : __ldg(p.qpos + tok);
            qd[mt][r] = p.doc_start ? __ldg(p.doc_start + (size_t)b * p.q_tokens + tok) : INT_MIN;
        }
    // The pattern's rules for each row (cut pairs): its per-row rule, and the rules of head h
    // not tested per element (Schedule::kept_bits) as a bit per key column (column c at position
    // k_pos0 + k0 + 2t + 8 (c / 2) + c % 2).
    uint32_t block_bits[MT][2] = {};
    typename RowRuleOf<Schedule>::type rule[MT][2];
    if constexpr (Schedule::kBlockSparse) {
        if (cut) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    rule[mt][r] = RowRuleOf<Schedule>::make(p, qp[mt][r]);
                    block_bits[mt][r] = Schedule::template kept_bits<2 * NB, true>(p, h, qp[mt][r], p.k_pos0 + k0 + 2 * t);
                }
        }
    }
#pragma unroll
    for (int j = 0; j < NB; j++) {
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int col = 8 * j + 2 * t + e;
            const bool valid = col < kn;
            const int kp = Schedule::kTwoSided ? p.k_pos0 + p.krows.token(k0 + col) : valid ? __ldg(p.kpos + p.krows.token(k0 + col)) : 0;
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    bool drop = !valid || !key_allowed(p.causal, p.doc_start != nullptr, qp[mt][r], qd[mt][r], kp);
                    if constexpr (Schedule::kBlockSparse)
                        drop = drop || (cut && !(rule[mt][r].keeps(kp) || ((block_bits[mt][r] >> (2 * j + e)) & 1u)));
                    if (drop) s[mt][j][2 * r + e] = -INFINITY;
                }
        }
    }
}

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

// Block: NW warps, each owning MT m-tiles of 16 query rows (BM = 16*MT*NW rows); key tiles of BN.
template <int D, int MT, int NW, int BN, class Schedule>
__global__ void __launch_bounds__(NW * 32, 1) attention_forward_kernel(Params p) {
    constexpr int NT = NW * 32, BM = 16 * MT * NW;
    constexpr int NB = BN / 8;  // 8-column blocks of a score tile
    constexpr int DB = D / 8;   // 8-column blocks of O
    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t sQ = smem_u32(smem);                 // (BM, D)
    const uint32_t sK = sQ + BM * D * 2;                // 2 x (BN, D)
    const uint32_t sV = sK + 2 * BN * D * 2;            // 2 x (BN, D)

    int b, h, rank;
    resolve_block<Schedule>(p, b, h, rank);
    const int qtile = Schedule::query_tile_of_rank(p, rank, gridDim.y);  // the longest rows start first
    const int warp = threadIdx.x >> 5;
    const int q0 = qtile * BM, qn = min(BM, p.qrows.len - q0);
    if (qn <= 0) return;  // a dilated map shorter than the grid's longest

    const QueryTile qt = query_tile_info<NT>(p, b, q0, qn);
    const auto keys = Schedule::key_tiles(p, qt, BN);
    const int n = keys.count();

    const bf16* qbase = p.q + (size_t)b * p.q_tokens * p.q_stride + h * D;
    const bf16* kbase = p.k + (size_t)b * p.kv_tokens * p.kv_stride + h * D;
    const bf16* vbase = p.v + (size_t)b * p.kv_tokens * p.kv_stride + h * D;

    float acc[MT][DB][4] = {};
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;

    if (n > 0) {
        load_tile_async<BM, D, NT>(sQ, qbase, p.q_stride, p.qrows, q0, qn);
        {
            const int k0 = keys.tile(0) * BN;
            load_tile_async<BN, D, NT>(sK, kbase, p.kv_stride, p.krows, k0, min(BN, p.krows.len - k0));
            load_tile_async<BN, D, NT>(sV, vbase, p.kv_stride, p.krows, k0, min(BN, p.krows.len - k0));
        }
        cp_async_commit();
    }
    for (int it = 0; it < n; it++) {
        cp_async_wait_all();
        __syncthreads();  // tile `it` landed, and every warp is done with the stage we refill next
        if (it + 1 < n) {
            const int k0 = keys.tile(it + 1) * BN, st = (it + 1) & 1;
            load_tile_async<BN, D, NT>(sK + st * BN * D * 2, kbase, p.kv_stride, p.krows, k0, min(BN, p.krows.len - k0));
            load_tile_async<BN, D, NT>(sV + st * BN * D * 2, vbase, p.kv_stride, p.krows, k0, min(BN, p.krows.len - k0));
            cp_async_commit();
        }
        const uint32_t Ks = sK + (it & 1) * BN * D * 2, Vs = sV + (it & 1) * BN * D * 2;
        const int k0 = keys.tile(it) * BN;
        const KeyTile kt = key_tile_info(p, k0, min(BN, p.krows.len - k0));

        // S = Q K^T for the warp's 16*MT rows, (16*MT, BN).
        float s[MT][NB][4] = {};
#pragma unroll
        for (int kc = 0; kc < D / 16; kc++) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) ld_a<D>(a[mt], sQ, warp * 16 * MT + mt * 16, kc * 16);
            mma_rows_times_tile<MT, NB, D, true>(s, a, Ks, kc * 16);
        }
        const bool cut = keys.cut(it);
        if (cut || pair_needs_mask(p, qt, kt, BN)) mask_scores<MT, NB, Schedule>(s, p, b, q0 + warp * 16 * MT, k0, kt.n, h, cut);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) online_softmax_update<NB, DB>(s[mt], m[mt], l[mt], acc[mt], p.scale_log2);

        // O += P V, P rounded to bf16 (its row sums l stay fp32).
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) scores_to_a<NB>(a[mt], s[mt], kk);
            mma_rows_times_tile<MT, DB, D, false>(acc, a, Vs, kk * 16);
        }
    }

    // O = acc / l (or merged into an earlier branch's); a row with no key gets O = 0, L = -inf.
#pragma unroll
    for (int mt = 0; mt < MT; mt++) store_output<D, Schedule::kMayMerge, Schedule::kTwoSided>(p, b, h, q0 + warp * 16 * MT + mt * 16, acc[mt], m[mt], l[mt]);
}

}  // namespace flash
