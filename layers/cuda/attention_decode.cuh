// Decoding one token against a KV cache on the GPU: the kernels of layers/attention_decode.h
// (read that first; the CPU reference, name for name), then their launchers.
//
//   cache_append_cuda     the K and V of n new tokens into each branch's packed rows
//   attention_decode_cuda one query row per sequence against the branches: each branch cut into
//                         pieces (DecodePieces), one thread block per (piece, head, sequence),
//                         each writing an fp32 partial O and its log-sum-exp; a second kernel
//                         merges the pieces (and so the branches) by log-sum-exp. A branch of
//                         segments (a few thousand rows) is cut into pieces of 256 rows, a dense
//                         one into at most 128 pieces: enough blocks to keep every SM reading,
//                         few enough to start early beside the product before
//   attention_decode_step_cuda
//                         the whole of one token's attention in one launch (decoding's default):
//                         each block rotates the token's q (rope, log-n) itself, the block whose
//                         piece holds the token's own row rotates its k and appends K and V, and
//                         the last block of each (head, sequence) to finish merges the pieces.
//                         The same bits as rope_forward_cuda + logn_scale_queries_cuda +
//                         cache_append_cuda + attention_decode_cuda (test_kv_cache checks it);
//                         three launches of a few microseconds each fewer per layer
//   cache_unpack_cuda     a chunk's earlier rows, unpacked into ordinary rows for the flash kernels
//
// The position of the token comes from device memory, never from a kernel argument, so the
// same launches decode every step: a decode step is captured once as a CUDA graph and replayed
// (model/kv_cache_cuda.cuh). A block whose piece lies past the query's row exits at once, so
// the grid can cover a dense branch's whole allocation.
//
// Bytes: a decode step reads, per head and branch, the kept rows (K and V, 2 D bf16 each) once;
// the partials are (pieces, H, D + 1) fp32, small beside them.
#pragma once
#include <vector>
#include "layers/attention_decode.h"
#include "layers/cuda/common.cuh"
#include "layers/cuda/pack.cuh"
#include "layers/cuda/pdl.cuh"
#include "layers/cuda/rope.cuh"

namespace decode {

constexpr int kMaxBranches = 8;
constexpr int kThreads = 128;  // threads of attention_decode_kernel: one key row each per tile; the merge's too

}  // namespace decode

// How the decode kernels cut a layer's cached rows into pieces, a block each (a block walks its
// piece a tile of 128 rows at a time; the last block of a head merges the pieces' partials).
// Fewer, longer pieces mean fewer blocks, tickets and partials but longer walks, one tile after
// another. A branch of segments, whose rows fill from 0 to w / r as a segment goes by, favours long
// pieces right after a segment starts and short ones at its end; 256 rows is the best compromise
// over a whole segment. A dense layer (its rows grow with the context) does best in at most 128
// pieces. See notes/kv-cache.md, the attention step's latencies.
struct DecodePieces {
    int dense_rows = 128;    // a dense layer: pieces of at least this many rows,
    int dense_max = 128;     // and at most this many pieces
    int segment_rows = 256;  // a branch of segments: pieces of this many rows
};

namespace decode {

// Packed rows per piece of a branch of `rows` rows (w: its segment length).
inline long long piece_rows(long long rows, long long w, const DecodePieces& cut) {
    if (w != kWholeSequence) return cut.segment_rows;
    return std::max<long long>(cut.dense_rows, (rows + cut.dense_max - 1) / cut.dense_max);
}

// The branches of one layer as a kernel argument.
struct Branches {
    int n, H;
    long long w[kMaxBranches];
    int r[kMaxBranches];
    bf16* kv[kMaxBranches];        // (B, rows, 2, H, D)
    long long rows[kMaxBranches];  // rows allocated per sequence
    int piece_rows[kMaxBranches];
    int first_piece[kMaxBranches + 1];
};

inline Branches make_branches(const std::vector<CacheBranch<bf16>>& br, int H, const DecodePieces& cut = {}) {
    if (br.empty() || br.size() > (size_t)kMaxBranches)
        fatal("attention_decode_cuda: %zu branches, the kernel takes 1 to %d", br.size(), kMaxBranches);
    Branches b{};
    b.n = (int)br.size(), b.H = H;
    for (int i = 0; i < b.n; i++) {
        b.w[i] = br[i].w, b.r[i] = br[i].r, b.kv[i] = br[i].kv, b.rows[i] = br[i].rows;
        b.piece_rows[i] = (int)piece_rows(br[i].rows, br[i].w, cut);
        b.first_piece[i + 1] = b.first_piece[i] + ceil_div(br[i].rows, b.piece_rows[i]);
    }
    return b;
}

// One thread per (sequence, token, head, 8 values of D): that head's K and V of the token into
// the packed row of every branch whose class keeps it (earlier segments than the last skipped).
__global__ void cache_append_kernel(Branches br, const bf16* qkv, const int* p0_dev, int n, int B, int D) {
    const int H = br.H, pieces = D / 8;
    const size_t C = (size_t)H * D, total = (size_t)B * n * H * pieces;
    const long long p0 = *p0_dev;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total; idx += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(idx % pieces), h = (int)(idx / pieces % H), i = (int)(idx / pieces / H % n);
        const int b = (int)(idx / pieces / H / n);
        const long long p = p0 + i;
        const bf16* src = qkv + ((size_t)b * n + i) * 3 * C + (size_t)h * D + c * 8;  // its q; K at +C, V at +2C
        const uint4 k = *(const uint4*)(src + C), v = *(const uint4*)(src + 2 * C);
        for (int j = 0; j < br.n; j++) {
            long long t = p;  // a dense branch: row p
            if (br.w[j] != kWholeSequence) {  // 32-bit arithmetic (positions fit): 3.0 us a call, 4.6 in 64 bits
                const int w = (int)br.w[j], r = br.r[j], pi = (int)p;
                if (pi / w != (int)(p0 + n - 1) / w) continue;
                const int off = pi % w;
                if (off % r != branch_class(h, r)) continue;
                t = off / r;
            }
            bf16* dst = br.kv[j] + ((size_t)b * br.rows[j] + t) * 2 * C + (size_t)h * D + c * 8;
            *(uint4*)dst = k, *(uint4*)(dst + C) = v;
        }
    }
}

// What the one-launch step (attention_decode_step_kernel) takes beyond the plain kernel.
struct StepArgs {
    float theta;     // rope base of the layer (0: NoPE, nothing rotates)
    int logn_base;   // log-n base of its queries (0: none)
    int* tickets;    // (B, H), zeros: pieces finished; the last one merges and sets it back to 0
    bf16* out;       // (B, H, D) and (B, H): the merged O and log-sum-exp
    float* lse;
    const bf16* sink;  // (H) the layer's sink logits (layers/attn_sink.h), or nullptr: none
    const bf16* logn_slope;  // (H) its heads' learned log-n slopes (layers/rope.h), or nullptr: the fixed factor
    int prefetch_rows;  // how many of its piece's rows a dense layer's block fetches into L2 before the wait
};

// The merge of a (head h, sequence b)'s S partials by log-sum-exp into out (B, H, D) bf16 and
// lse (B, H), by kThreads threads: a thread takes 8 dims of every G-th piece. The partials are
// read through L2 (__ldcg): in the one-launch step other blocks of the same launch wrote them.
// A sink (sink != nullptr) is one more partial, of log-sum-exp sink[h] and output zero.
template <int D>
__device__ void merge_pieces(bf16* out, float* lse, const float* po, const float* pl, int S, int h, int b, int H,
                             const bf16* sink) {
    constexpr int NW = kThreads / 32, DC = D / 8, G = kThreads / DC;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, c = tid % DC, g = tid / DC;
    const float* L = pl + (size_t)b * S * H + h;  // piece s's at L[s H]
    __shared__ float red[NW], wsum_s[G], acc_s[G][D];
    float mx = -INFINITY;
#pragma unroll 4
    for (int s = tid; s < S; s += kThreads) mx = fmaxf(mx, __ldcg(L + (size_t)s * H));
    mx = warp_max(mx);
    if (lane == 0) red[warp] = mx;
    __syncthreads();
    mx = red[0];
    for (int w = 1; w < NW; w++) mx = fmaxf(mx, red[w]);
    const float sk = sink ? __bfloat162float(sink[h]) : -INFINITY;
    mx = fmaxf(mx, sk);
    bf16* oh = out + ((size_t)b * H + h) * D;
    if (mx == -INFINITY) {  // no branch keeps the query for this head, and no sink
        for (int d = tid; d < D; d += kThreads) oh[d] = __float2bfloat16(0.0f);
        if (tid == 0) lse[(size_t)b * H + h] = -INFINITY;
        return;
    }
    float wsum = 0, acc[8];
    for (int j = 0; j < 8; j++) acc[j] = 0;
#pragma unroll 4
    for (int s = g; s < S; s += G) {
        const float ls = __ldcg(L + (size_t)s * H);
        const float4* o = (const float4*)(po + (((size_t)b * S + s) * H + h) * D + c * 8);
        const float4 x = __ldcg(o), y = __ldcg(o + 1);
        const float w = ls == -INFINITY ? 0.0f : __expf(ls - mx);  // an empty piece's O is 0
        wsum += w;
        acc[0] += w * x.x, acc[1] += w * x.y, acc[2] += w * x.z, acc[3] += w * x.w;
        acc[4] += w * y.x, acc[5] += w * y.y, acc[6] += w * y.z, acc[7] += w * y.w;
    }
    for (int j = 0; j < 8; j++) acc_s[g][c * 8 + j] = acc[j];
    if (c == 0) wsum_s[g] = wsum;
    __syncthreads();
    float total = sink ? __expf(sk - mx) : 0.0f;
    for (int r = 0; r < G; r++) total += wsum_s[r];
    for (int d = tid; d < D; d += kThreads) {
        float a = 0;
        for (int r = 0; r < G; r++) a += acc_s[r][d];
        oh[d] = __float2bfloat16(a / total);
    }
    if (tid == 0) lse[(size_t)b * H + h] = mx + logf(total);
}

// Block (piece, head h, sequence b), kThreads threads. Tiles of kThreads packed rows: each thread
// scores one row (scores in log2 units; its 8 16-byte loads in flight at once), the tile's
// softmax weights go through shared memory, then each thread adds 8 dims of V for every RG-th row
// of the tile, its loads again all issued before the sums: a decode step is a chain of memory
// latencies, not of bandwidth, unless the loads of a thread overlap.
//
// STEP (attention_decode_step_kernel): q is the token's row of q, k, v before rope (q_stride
// 3 H D): the first D/2 threads rotate q's pairs of head h (rope_pair, then log-n), as
// rope_forward_cuda and logn_scale_queries_cuda would; the block whose piece ends at the token's
// own row k rotates the token's k too, stores K and V there (cache_append_cuda's one row) and
// scores that row from shared memory (a row written in this launch is not read through the
// read-only cache). Every block then takes a ticket; the (head, sequence)'s last merges.
template <int D, bool STEP>
__device__ __forceinline__ void decode_piece(float* po, float* pl, const bf16* __restrict__ q, int q_stride, const Branches& br,
                                             const int* pos, float scale_log2, const StepArgs& st) {
    // Prologue: the piece's branch and rows, and (STEP) its rows fetched into L2 and the query rotated.
    // (One body rather than helpers: split into steps this kernel ran the decode step slower;
    // notes/code-explains-itself.md.)
    constexpr int NW = kThreads / 32, DC = D / 8, RG = kThreads / DC, RPT = kThreads / RG, HALF = D / 2;
    const int piece = blockIdx.x, h = blockIdx.y, b = blockIdx.z, H = br.H, S = br.first_piece[br.n];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, c = tid % DC, g = tid / DC;
    int i = 0;
    while (i + 1 < br.n && piece >= br.first_piece[i + 1]) i++;
    if constexpr (STEP) pdl_trigger();
    const int p = *pos;  // set before the step's first launch
    const long long k = cache_row(p, br.w[i], br.r[i], h);
    const long long row0 = (long long)(piece - br.first_piece[i]) * br.piece_rows[i];
    const long long end = min(row0 + br.piece_rows[i], k + 1);  // k < 0: no row
    float* o = po + (((size_t)b * S + piece) * H + h) * D;
    float* l = pl + ((size_t)b * S + piece) * H + h;
    __shared__ float qs[D], ps[kThreads], red[NW], acc_s[RG][D];
    __shared__ __align__(16) bf16 newest[2][D];  // STEP: the token's K (rotated) and V
    const size_t C = (size_t)H * D;
    float cs = 1, sn = 0, logn = 1;  // STEP: the rotation of pair tid (tid < D/2) and the log-n factor at p
    if constexpr (STEP) {
        // Launched with launch_pdl: the piece's rows (earlier steps wrote them) into L2, and the
        // token's rotation angle and log-n factor (double precision: dependent math) worked out,
        // while the qkv product before still runs; its q, k, v only after pdl_wait. A branch of
        // segments holds at most a segment's rows (a layer's kept rows ~13 MB at 1M, 1/4 of L2),
        // so all of them; a dense layer's pieces only their first st.prefetch_rows, since its
        // cache (3 GB at 1M) would flood L2.
        const long long fetch = br.w[i] == kWholeSequence ? st.prefetch_rows : br.piece_rows[i];
        for (long long t = row0 + tid; t < min(end, row0 + fetch); t += kThreads) {
            const bf16* r = br.kv[i] + ((size_t)b * br.rows[i] + t) * 2 * C + (size_t)h * D;
            for (int x = 0; x < D * 2; x += 128) prefetch_l2((const char*)r + x), prefetch_l2((const char*)(r + C) + x);
        }
        if (tid < HALF && end > row0) {
            if (st.theta != 0.0f) rope_angle(p, tid, D, st.theta, cs, sn);
            logn = logn_factor(p, st.logn_base, st.logn_slope, h);  // the slopes are weights: no kernel before writes them
        }
        pdl_wait();
    }
    if (end <= row0) {  // this head does not keep p in this branch, or the piece lies past p's row
        for (int d = tid; d < D; d += kThreads) o[d] = 0;
        if (tid == 0) *l = -INFINITY;
    } else {
        bf16* base = br.kv[i] + (size_t)b * br.rows[i] * 2 * C + (size_t)h * D;  // row t's K at base + t 2C
        const bf16* qh = q + (size_t)b * q_stride + (size_t)h * D;
        const bool holds_token = STEP && end == k + 1;  // this piece ends at the token's own row
        if constexpr (STEP) {
            if (tid < HALF) {
                for (int slot = 0; slot < (holds_token ? 2 : 1); slot++) {
                    const bf16* x = qh + slot * C;
                    bf16 o1 = x[tid], o2 = x[tid + HALF];
                    if (st.theta != 0.0f) rope_pair(__bfloat162float(o1), __bfloat162float(o2), cs, sn, o1, o2);
                    if (slot == 0) {
                        if (logn != 1.0f)
                            o1 = __float2bfloat16(__bfloat162float(o1) * logn), o2 = __float2bfloat16(__bfloat162float(o2) * logn);
                        qs[tid] = __bfloat162float(o1) * scale_log2, qs[tid + HALF] = __bfloat162float(o2) * scale_log2;
                    } else {
                        newest[0][tid] = o1, newest[0][tid + HALF] = o2;
                    }
                }
            } else if (holds_token && tid < HALF + DC) {
                ((uint4*)newest[1])[tid - HALF] = *(const uint4*)(qh + 2 * C + (tid - HALF) * 8);
            }
            __syncthreads();
            if (holds_token && tid < 2 * DC)  // K and V into the token's row
                *(uint4*)(base + (size_t)k * 2 * C + (tid / DC) * C + (tid % DC) * 8) = ((const uint4*)newest[tid / DC])[tid % DC];
        } else {
            for (int d = tid; d < D; d += kThreads) qs[d] = __bfloat162float(qh[d]) * scale_log2;
            __syncthreads();
        }
        // The main loop: a tile of kThreads rows a pass, scores, online softmax, P V.
        float m = -INFINITY, lsum = 0, acc[8];
        for (int j = 0; j < 8; j++) acc[j] = 0;
        for (long long t0 = row0; t0 < end; t0 += kThreads) {
            const int nt = (int)min((long long)kThreads, end - t0);
            float s = -INFINITY;
            if (tid < nt) {
                uint4 u[DC];
                if (holds_token && t0 + tid == k) {
#pragma unroll
                    for (int cc = 0; cc < DC; cc++) u[cc] = ((const uint4*)newest[0])[cc];
                } else {
                    const uint4* kr = (const uint4*)(base + (size_t)(t0 + tid) * 2 * C);
#pragma unroll
                    for (int cc = 0; cc < DC; cc++) u[cc] = __ldg(kr + cc);
                }
                float dot = 0;
#pragma unroll
                for (int cc = 0; cc < DC; cc++) {
                    const __nv_bfloat162* e = (const __nv_bfloat162*)&u[cc];
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        const float2 f = __bfloat1622float2(e[j]);
                        dot += qs[cc * 8 + 2 * j] * f.x + qs[cc * 8 + 2 * j + 1] * f.y;
                    }
                }
                s = dot;
            }
            float mx = warp_max(s);
            if (lane == 0) red[warp] = mx;
            __syncthreads();
            mx = red[0];
            for (int w = 1; w < NW; w++) mx = fmaxf(mx, red[w]);
            __syncthreads();
            const float m_new = fmaxf(m, mx), corr = exp2f(m - m_new);  // m = -inf at first: corr 0
            const float e = tid < nt ? exp2f(s - m_new) : 0.0f;
            ps[tid] = e;
            const float ws = warp_sum(e);
            if (lane == 0) red[warp] = ws;
            __syncthreads();
            float sum = 0;
            for (int w = 0; w < NW; w++) sum += red[w];
            lsum = lsum * corr + sum, m = m_new;
            for (int j = 0; j < 8; j++) acc[j] *= corr;
            uint4 v[RPT];
#pragma unroll
            for (int u = 0; u < RPT; u++) {
                const int t = g + u * RG;
                if (t >= nt) continue;
                if (holds_token && t0 + t == k) v[u] = ((const uint4*)newest[1])[c];
                else v[u] = __ldg((const uint4*)(base + (size_t)(t0 + t) * 2 * C + C) + c);
            }
#pragma unroll
            for (int u = 0; u < RPT; u++) {
                const int t = g + u * RG;
                if (t >= nt) continue;
                const float pt = ps[t];
                const __nv_bfloat162* e = (const __nv_bfloat162*)&v[u];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float2 f = __bfloat1622float2(e[j]);
                    acc[2 * j] += pt * f.x, acc[2 * j + 1] += pt * f.y;
                }
            }
            __syncthreads();  // ps and red are rewritten by the next tile
        }
        // Epilogue: the row groups' partial outputs summed, the piece's (o, l) written; with STEP
        // the last piece of a (head, sequence) merges them all.
        for (int j = 0; j < 8; j++) acc_s[g][c * 8 + j] = acc[j];
        __syncthreads();
        for (int d = tid; d < D; d += kThreads) {
            float a = 0;
            for (int r = 0; r < RG; r++) a += acc_s[r][d];
            o[d] = a / lsum;
        }
        if (tid == 0) *l = (m + log2f(lsum)) * 0.69314718055994531f;  // log2 units back to natural
    }
    if constexpr (STEP) {
        // Last block done (CUDA's threadFenceReduction sample): each thread's partial writes are
        // made visible device-wide before the block's ticket is taken.
        __shared__ bool last;
        __threadfence();
        __syncthreads();
        if (tid == 0) {
            int* ticket = st.tickets + (size_t)b * H + h;
            last = atomicAdd(ticket, 1) == S - 1;
            if (last) *ticket = 0;  // every piece of this launch has counted: ready for the next step
        }
        __syncthreads();
        if (!last) return;
        __threadfence();
        merge_pieces<D>(st.out, st.lse, po, pl, S, h, b, H, st.sink);
    }
}

template <int D>
__global__ void __launch_bounds__(kThreads) attention_decode_kernel(float* po, float* pl, const bf16* __restrict__ q,
                                                                     int q_stride, Branches br, const int* pos,
                                                                     float scale_log2) {
    decode_piece<D, false>(po, pl, q, q_stride, br, pos, scale_log2, StepArgs{});
}

// At D = 64, 4 blocks an SM (<= 128 registers: 123, no spills; 150 unbounded): a decode step's
// ~1,100 blocks, mostly short, stay resident beside the launch before (pdl.cuh). At D = 128 the
// bound spilled, so none.
template <int D>
__global__ void __launch_bounds__(kThreads, D == 64 ? 4 : 1) attention_decode_step_kernel(float* po, float* pl, const bf16* __restrict__ qkv_pre,
                                                                          Branches br, const int* pos, float scale_log2,
                                                                          StepArgs st) {
    decode_piece<D, true>(po, pl, qkv_pre, 3 * br.H * D, br, pos, scale_log2, st);
}

// Block (head h, sequence b): the S partials merged (merge_pieces).
template <int D>
__global__ void __launch_bounds__(kThreads) attention_decode_merge_kernel(bf16* out, float* lse, const float* po, const float* pl,
                                                                           int S, const bf16* sink) {
    merge_pieces<D>(out, lse, po, pl, S, blockIdx.x, blockIdx.y, gridDim.x, sink);
}

// One thread per (sequence, position in [lo, p0), head, 8 values of D): the first branch whose
// class keeps that position for that head gives its K and V (every branch that keeps it holds
// the same values).
__global__ void cache_unpack_kernel(bf16* rows, long long rows_per_seq, Branches br, long long lo, long long p0, int B,
                                    int D) {
    const int H = br.H, pieces = D / 8;
    const size_t C = (size_t)H * D, n = (size_t)(p0 - lo), total = (size_t)B * n * H * pieces;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total; idx += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(idx % pieces), h = (int)(idx / pieces % H);
        const long long i = (long long)(idx / pieces / H % n), p = lo + i;
        const int b = (int)(idx / pieces / H / n);
        for (int j = 0; j < br.n; j++) {
            if (p < p0 / br.w[j] * br.w[j]) continue;  // before this branch's current segment
            const long long t = cache_row(p, br.w[j], br.r[j], h);
            if (t < 0) continue;
            const bf16* src = br.kv[j] + ((size_t)b * br.rows[j] + t) * 2 * C + (size_t)h * D + c * 8;
            bf16* dst = rows + ((size_t)b * rows_per_seq + i) * 2 * C + (size_t)h * D + c * 8;
            *(uint4*)dst = *(const uint4*)src, *(uint4*)(dst + C) = *(const uint4*)(src + C);
            break;
        }
    }
}

inline void check_head_dim(int D, const char* who) {
    if (D != 64 && D != 128) fatal("%s: head dim %d is not supported (64 or 128)", who, D);
}

}  // namespace decode

// The pieces attention_decode_cuda cuts a layer's branches into: its partials are
// (B, pieces, H, D) and (B, pieces, H) fp32.
inline int attention_decode_pieces(const std::vector<CacheBranch<bf16>>& branches, const DecodePieces& cut) {
    return decode::make_branches(branches, 1, cut).first_piece[branches.size()];
}

// The K and V of n tokens (qkv (B, n, 3, H, D)) at positions *p0_dev .. + n - 1 into the branches.
inline void cache_append_cuda(const std::vector<CacheBranch<bf16>>& branches, const bf16* qkv, const int* p0_dev, int n,
                              int B, int H, int D, cudaStream_t stream) {
    decode::check_head_dim(D, "cache_append_cuda");
    const decode::Branches br = decode::make_branches(branches, H);
    const size_t total = (size_t)B * n * H * (D / 8);
    decode::cache_append_kernel<<<(int)std::min<size_t>((total + 255) / 256, 8192), 256, 0, stream>>>(br, qkv, p0_dev, n, B, D);
    CUDA_CHECK_LAST();
}

// out (B, H, D) bf16, lse (B, H): each sequence's query row (q + b q_stride) at position *pos_dev
// against the branches, after cache_append_cuda stored that position. po, pl: the partials.
// sink: the layer's sink logits (H), or nullptr: none.
inline void attention_decode_cuda(bf16* out, float* lse, const bf16* q, int q_stride,
                                  const std::vector<CacheBranch<bf16>>& branches, const int* pos_dev, int B, int H, int D,
                                  float scale, const DecodePieces& cut, float* po, float* pl, cudaStream_t stream,
                                  const bf16* sink = nullptr) {
    decode::check_head_dim(D, "attention_decode_cuda");
    const decode::Branches br = decode::make_branches(branches, H, cut);
    const int S = br.first_piece[br.n];
    const dim3 grid(S, H, B);
    const float scale_log2 = scale * 1.4426950408889634f;
    if (D == 64) {
        decode::attention_decode_kernel<64><<<grid, decode::kThreads, 0, stream>>>(po, pl, q, q_stride, br, pos_dev, scale_log2);
        CUDA_CHECK_LAST();
        decode::attention_decode_merge_kernel<64><<<dim3(H, B), decode::kThreads, 0, stream>>>(out, lse, po, pl, S, sink);
    } else {
        decode::attention_decode_kernel<128><<<grid, decode::kThreads, 0, stream>>>(po, pl, q, q_stride, br, pos_dev, scale_log2);
        CUDA_CHECK_LAST();
        decode::attention_decode_merge_kernel<128><<<dim3(H, B), decode::kThreads, 0, stream>>>(out, lse, po, pl, S, sink);
    }
    CUDA_CHECK_LAST();
}

inline int g_decode_prefetch_rows = decode::kThreads;  // StepArgs::prefetch_rows (bench_kv_cache --prefetch-rows)

// One token per sequence through a layer's attention in one launch, from qkv_pre (B, 3, H, D),
// the qkv product's rows before rope: the same bits, in out, lse and the branches, as
// rope_forward_cuda + logn_scale_queries_cuda (theta, logn_base, logn_slope: the layer's) +
// cache_append_cuda + attention_decode_cuda. tickets: (B, H) ints, zero before the first call;
// each call leaves them zero (one launch at a time may use them).
inline void attention_decode_step_cuda(bf16* out, float* lse, const bf16* qkv_pre, const std::vector<CacheBranch<bf16>>& branches,
                                       const int* pos_dev, int B, int H, int D, float scale, float theta, int logn_base,
                                       const DecodePieces& cut, float* po, float* pl, int* tickets, cudaStream_t stream,
                                       const bf16* sink = nullptr, const bf16* logn_slope = nullptr) {
    decode::check_head_dim(D, "attention_decode_step_cuda");
    const decode::Branches br = decode::make_branches(branches, H, cut);
    const dim3 grid(br.first_piece[br.n], H, B);
    const float scale_log2 = scale * 1.4426950408889634f;
    const decode::StepArgs st{theta, logn_base, tickets, out, lse, sink, logn_slope, g_decode_prefetch_rows};
    if (D == 64) launch_pdl(decode::attention_decode_step_kernel<64>, grid, decode::kThreads, 0, stream, po, pl, qkv_pre, br, pos_dev, scale_log2, st);
    else launch_pdl(decode::attention_decode_step_kernel<128>, grid, decode::kThreads, 0, stream, po, pl, qkv_pre, br, pos_dev, scale_log2, st);
}

// The rows at positions lo .. p0 - 1 of each sequence, unpacked into rows (B, rows_per_seq, 2, H, D).
inline void cache_unpack_cuda(bf16* rows, long long rows_per_seq, const std::vector<CacheBranch<bf16>>& branches,
                              long long lo, long long p0, int B, int H, int D, cudaStream_t stream) {
    if (p0 <= lo) return;
    decode::check_head_dim(D, "cache_unpack_cuda");
    const decode::Branches br = decode::make_branches(branches, H);
    const size_t total = (size_t)B * (p0 - lo) * H * (D / 8);
    decode::cache_unpack_kernel<<<(int)std::min<size_t>((total + 255) / 256, 8192), 256, 0, stream>>>(rows, rows_per_seq, br, lo,
                                                                                                    p0, B, D);
    CUDA_CHECK_LAST();
}
