// Flash attention on tensor cores (bf16 storage, fp32 accumulation), sm_90: the pieces shared by
// the forward and backward kernels (layers/cuda/attention_flash_fwd.cuh, _bwd.cuh).
//
// How a kernel sees the problem, so that later patterns plug in without new kernels:
//  - RowMap: row i of a "virtual sequence" (the rows a tile walks) is buffer token base + i*step.
//    Dense attention is {0, 1, N}; a dilated LongNet branch is {offset, r, ceil((N-offset)/r)};
//    ring attention gives the query side and the key side separate maps (and buffers, positions).
//  - Positions: qpos / kpos give the GLOBAL position of each buffer token (causal and document
//    masks compare positions, never indices), monotonically increasing along the rows of a map.
//  - Schedule: which key tiles a query tile visits (forward, dQ) and which query tiles a key tile
//    visits (dK, dV), per pattern, in the pattern modules (layers/patterns/dense.cuh,
//    dilated.cuh, block_sparse.cuh, included at the end). DenseSchedule walks a range with the
//    tiles above the causal diagonal (and before the first document of the tile) skipped;
//    BlockSparseSchedule returns a CSR list through the same count()/tile(it)/cut(it) interface,
//    cut(it) saying that the pattern itself masks part of the pair.
//  - The tile scheduler (resolve_block): which block runs which (b, h, tile), in an order good
//    for the L2, kept apart from the patterns.
#pragma once
#include <cstdint>
#include <climits>
#include "layers/cuda/common.cuh"
#include "layers/patterns/block_sparse.h"

namespace flash {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// A block-sparse launch's tile lists on the device (layers/patterns/block_sparse.cuh reads them):
// CSR lists for query tiles of BM rows and key tiles of BN rows, entries tile * 2 + cut, and the
// launch order of each side's tiles.
struct BlockSparseTileView {
    const int* q_ptr;    // (query tiles + 1)
    const int* k_of_q;   // key tiles of each query tile
    const int* k_ptr;    // (key tiles + 1)
    const int* q_of_k;   // query tiles of each key tile
    const int* q_order;  // (query tiles): rank -> query tile, the longest list first
    const int* k_order;  // (key tiles)
    int BM, BN;
};

struct RowMap {
    int base, step, len;  // row i -> token base + i*step, for i in [0, len)
    __host__ __device__ int token(int i) const { return base + i * step; }
};

// Everything a kernel reads. Element (b, token t, head h, d) of Q is
// q[((size_t)b * q_tokens + t) * q_stride + h * D + d]; K and V likewise with kv_tokens and
// kv_stride; O, dO are contiguous (B, q_tokens, H, D); L and the backward's per-row fp32 arrays
// are (B, H, q_tokens).
struct Params {
    const bf16* q;  // (B, q_tokens, H, D), row stride q_stride
    const bf16* k;  // (B, kv_tokens, H, D), row stride kv_stride
    const bf16* v;  // (B, kv_tokens, H, D), row stride kv_stride
    bf16* o;        // (B, q_tokens, H, D)
    float* lse;     // (B, H, q_tokens): natural-log sum-exp of the scaled scores
    const int* qpos;       // (q_tokens) global positions of the query tokens
    const int* kpos;       // (kv_tokens) global positions of the key tokens
    const int* doc_start;  // (B, q_tokens) or nullptr: keys with kpos < doc_start are masked
    int H, q_tokens, kv_tokens, q_stride, kv_stride;
    RowMap qrows, krows;
    bool causal;
    float scale, scale_log2;  // scale * log2(e): scores live in the log2 domain so exp is ex2
    // Backward only.
    const bf16* dout;        // (B, q_tokens, H, D)
    float* lse_log2;         // (B, H, q_tokens): L * log2(e), +inf where L = -inf (so P = 0)
    float* delta;            // (B, H, q_tokens): rowsum(dO * O)
    float* dq_accum;         // (B, q_tokens, H, D) fp32, only for the atomic dQ variant
    bf16* dq;                // (B, q_tokens, H, D), row stride q_stride
    bf16* dk;                // (B, kv_tokens, H, D), row stride kv_stride
    bf16* dv;                // (B, kv_tokens, H, D), row stride kv_stride
    // Which virtual sequence each block runs (resolve_block). Dense: seg_len = 0, nseg = 1, one
    // block row per (b, h) over qrows/krows as set. A dilated branch (seg_len = w' > 0, dilation
    // r): block x = (b*H + h)*nseg + (s - seg0) runs segment s of [seg0, seg0 + nseg), class
    // c = h % r, i.e. the map {s*w' + c, r, ceil((len_s - c)/r)} on the query and the key side.
    int seg_len, dilation, seg0, nseg;
    // Dilated only: launch-order groups of this many virtual sequences (0: plain grid order), see
    // resolve_block.
    int group;
    // false: the kernels write their outputs; true: they merge into what is there (forward: O, L
    // by log-sum-exp; backward: dq, dk, dv +=), so branches launched one after another add up,
    // and so do the key blocks of a two-sided call (a ring step).
    bool accumulate;
    // Forward: when set, O is this fp32 (B, q_tokens, H, D) buffer instead of o (bf16), so that a
    // run of merges (ring steps, key blocks) rounds O once, at the end, not once per merge.
    float* o_f32;
    // Global positions of buffer row 0 of each side (their positions are pos0 + row) and the
    // global sequence length: dilated segments are cut from these, never from buffer indices.
    int q_pos0, k_pos0, seq_len;
    // Set by the two-sided launchers: the kernel instances of the *TwoSided schedules run, which
    // merge (fp32 O included) and, for dilated, derive a query map and a key map per block. The
    // one-sided instances stay as lean as they were (no fp32 path; dense never merges; one map
    // serves both sides), which keeps the D = 64 kernels' registers and speed.
    bool two_sided;
    // dq_accum holds the tokens [accum_tok0, accum_tok0 + accum_tokens): (B, accum_tokens, H, D),
    // so that a dilated backward can walk the sequence in chunks with a small accumulator.
    int accum_tok0, accum_tokens;
    // Block-sparse only: the pattern (host; the launchers bind `tiles` for their tile shape from
    // it, layers/cuda/block_sparse_lists.cuh; nullptr for the other patterns), its rules for the
    // element mask (by value, explicit layouts on the device), and the bound tile lists.
    const AttnPattern* sparse;
    BlockSparseRules bs;
    BlockSparseTileView tiles;
};

// The tile scheduler: which (b, h, tile rank) a block runs (rank 0 = the heaviest tile: the
// kernels turn it into their query or key tile), in an order chosen for the L2, apart from what
// any pattern computes. Dense grids are x = (b, h), y = rank, and p stays untouched, so their
// maps remain kernel-parameter constants (no registers held for them). Schedules whose blocks
// each run their own virtual sequence (Schedule::kPerBlockMaps: a dilated branch) have
// x = sequence, y = rank; Schedule::block_maps then sets b, h and p.qrows, p.krows.
// Those grids are renumbered in launch order (x fastest) when p.group > 0: all ranks of `group`
// sequences, heaviest first across the group, then the next group; the last group is 2-3x
// larger (a tail of light blocks, as in plain grid order). Why: in plain grid order the blocks
// resident together are one rank of ~264 different sequences, each reading its own K/V (512 KiB
// per 2048-row sequence at D = 64), so the L2 holds none of them and every tile re-reads K/V
// from HBM; a group of 16 keeps the live K/V at ~16 MiB (notes/attention-dilated.md, run 3).
template <class Schedule>
__device__ __forceinline__ void resolve_block(Params& p, int& b, int& h, int& rank) {
    if constexpr (!Schedule::kPerBlockMaps) {
        b = blockIdx.x / p.H;
        h = blockIdx.x % p.H;
        rank = blockIdx.y;
    } else {
        int seq = blockIdx.x;
        rank = blockIdx.y;
        if (p.group > 0) {
            // The last group takes the rest, 2 to 3 groups' worth (when there are that many): its
            // ~2 waves run heaviest first over all of it, so the launch's tail is light blocks.
            const long long id = blockIdx.x + (long long)blockIdx.y * gridDim.x;
            const long long per = (long long)p.group * gridDim.y;  // blocks of a full group
            const int ng = max(1, (int)gridDim.x / p.group - 1);
            const int g = (int)min((long long)ng - 1, id / per);
            const int first = g * p.group, gn = g == ng - 1 ? (int)gridDim.x - first : p.group;
            const int r = (int)(id - g * per);
            rank = r / gn;
            seq = first + r % gn;
        }
        Schedule::block_maps(p, seq, b, h);
    }
}

// The most rows a block's map can have: the launch grid's tile count comes from it.
inline int max_rows(const Params& p, const RowMap& dense) {
    return p.seg_len > 0 ? (p.seg_len - 1) / p.dilation + 1 : dense.len;
}

// ---------------------------------------------------------------------------------------------
// PTX wrappers: tensor-core MMA, ldmatrix, cp.async, fast exp2.

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

// D += A(16x16, row) * B(16x8, col), bf16 in, fp32 accumulate.
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// 16-byte global -> shared copy that bypasses registers; valid = false writes 16 zero bytes
// (rows past the end of a sequence read as zeros, never as garbage).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
    const int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, bool valid) {
    const int n = valid ? 4 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// 2^x on the special-function unit; ex2(-inf) = 0, which is how masked scores vanish.
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // lo in the low half: the lower column
    return *reinterpret_cast<uint32_t*>(&v);
}

// ---------------------------------------------------------------------------------------------
// Shared-memory tiles: row-major (ROWS, COLS) bf16, 16-byte chunks XOR-swizzled so that the 8
// consecutive rows one ldmatrix phase reads (same logical chunk) fall in 8 different 16-byte bank
// groups: rows of 128+ bytes XOR the chunk with row & 7; rows of 64 bytes (two rows per 128-byte
// bank line) with (row >> 1) & 3.
template <int COLS>
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
    static_assert(COLS % 64 == 0 || COLS == 32, "tile rows of 32 or a multiple of 64 elements");
    const int x = COLS >= 64 ? (row & 7) : ((row >> 1) & 3);
    return (uint32_t)(row * COLS * 2 + ((chunk ^ x) << 4));
}

// Load `nvalid` rows (row r of the tile is map row row0 + r) of D bf16 from `base` (the (b, h)
// slice, token stride `stride` elements); rows past nvalid become zeros.
template <int ROWS, int D, int NT>
__device__ __forceinline__ void load_tile_async(uint32_t dst, const bf16* base, int stride, RowMap map,
                                                int row0, int nvalid) {
    constexpr int CH = D / 8;
    for (int c = threadIdx.x; c < ROWS * CH; c += NT) {
        const int r = c / CH, ch = c % CH;
        const bool ok = r < nvalid;
        const bf16* src = ok ? base + (size_t)map.token(row0 + r) * stride + ch * 8 : base;
        cp_async_16(dst + swz<D>(r, ch), src, ok);
    }
}

// Fragments (PTX ISA "Matrix fragments for mma.m16n8k16"): lane = 4*g + t holds A rows g, g+8 and
// C rows g, g+8 at columns 2t, 2t+1; B column g at rows 2t, 2t+1 (+8).

// A (16x16) from a [m][k] tile: rows m0.., columns k0...
template <int COLS>
__device__ __forceinline__ void ld_a(uint32_t (&a)[4], uint32_t tile, int m0, int k0) {
    const int lane = threadIdx.x & 31;
    ldmatrix_x4(a, tile + swz<COLS>(m0 + (lane & 15), (k0 >> 3) + (lane >> 4)));
}
// A (16x16) from a [k][m] tile (the transpose is stored): rows m0.. of A are columns of the tile.
template <int COLS>
__device__ __forceinline__ void ld_a_t(uint32_t (&a)[4], uint32_t tile, int m0, int k0) {
    const int lane = threadIdx.x & 31;
    const int mi = lane >> 3;
    ldmatrix_x4_trans(a, tile + swz<COLS>(k0 + (lane & 7) + ((mi >> 1) << 3), (m0 >> 3) + (mi & 1)));
}
// B for two 8-column blocks n0.., n0+8.. over k0..k0+15 from a [n][k] tile (K in Q K^T):
// b[0], b[1] for block n0; b[2], b[3] for block n0+8.
template <int COLS>
__device__ __forceinline__ void ld_b_nk(uint32_t (&b)[4], uint32_t tile, int n0, int k0) {
    const int lane = threadIdx.x & 31;
    ldmatrix_x4(b, tile + swz<COLS>(n0 + (lane & 7) + ((lane >> 4) << 3), (k0 >> 3) + ((lane >> 3) & 1)));
}
// The same from a [k][n] tile (V in P V).
template <int COLS>
__device__ __forceinline__ void ld_b_kn(uint32_t (&b)[4], uint32_t tile, int k0, int n0) {
    const int lane = threadIdx.x & 31;
    ldmatrix_x4_trans(b, tile + swz<COLS>(k0 + (lane & 7) + (((lane >> 3) & 1) << 3), (n0 >> 3) + (lane >> 4)));
}

// acc[MT][NB][4] += A[MT] (16x16 each) * B, B the k-chunk k0 of a tile, for all NB column blocks.
// One B load feeds MT*2 MMAs: more rows per warp means fewer shared-memory bytes per FLOP.
template <int MT, int NB, int COLS, bool B_IS_NK>
__device__ __forceinline__ void mma_rows_times_tile(float (&acc)[MT][NB][4], const uint32_t (&a)[MT][4],
                                                    uint32_t tile, int k0) {
#pragma unroll
    for (int np = 0; np < NB / 2; np++) {
        uint32_t b[4];
        if (B_IS_NK) ld_b_nk<COLS>(b, tile, np * 16, k0);
        else ld_b_kn<COLS>(b, tile, k0, np * 16);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            mma_16816(acc[mt][2 * np], a[mt], b[0], b[1]);
            mma_16816(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
        }
    }
}

// The C fragments of columns 16*kk.. of a score tile, rounded to bf16, as an A fragment.
template <int NB>
__device__ __forceinline__ void scores_to_a(uint32_t (&a)[4], const float (&s)[NB][4], int kk) {
    a[0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
    a[1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
    a[2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    a[3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

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
// The online-softmax update, the one place the flash recurrence lives. s holds this tile's raw
// scores for the thread's rows g (elements 0,1) and g+8 (elements 2,3), masked ones = -inf. On
// return s holds P = 2^(s*scale_log2 - m) with m the running row max (log2 domain), l the
// thread's partial row sums and acc (the P V accumulator) rescaled to the new max.
template <int NB, int DB>
__device__ __forceinline__ void online_softmax_update(float (&s)[NB][4], float (&m)[2], float (&l)[2],
                                                      float (&acc)[DB][4], float scale_log2) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float mx = m[r];
#pragma unroll
        for (int j = 0; j < NB; j++) mx = fmaxf(mx, fmaxf(s[j][2 * r], s[j][2 * r + 1]) * scale_log2);
        mx = quad_max(mx);
        // A row with every key masked so far keeps m = -inf; subtract 0 then, not -inf (NaN).
        const float m_use = mx == -INFINITY ? 0.f : mx;
        const float alpha = ex2(m[r] - m_use);  // m[r] = -inf: 0, and acc, l are 0 anyway
        m[r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < NB; j++) {
            s[j][2 * r] = ex2(fmaf(s[j][2 * r], scale_log2, -m_use));
            s[j][2 * r + 1] = ex2(fmaf(s[j][2 * r + 1], scale_log2, -m_use));
            sum += s[j][2 * r] + s[j][2 * r + 1];
        }
        l[r] = l[r] * alpha + sum;
#pragma unroll
        for (int d = 0; d < DB; d++) {
            acc[d][2 * r] *= alpha;
            acc[d][2 * r + 1] *= alpha;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Masks and schedules.

// Is key position kp allowed for a query at position qp whose document starts at doc?
__device__ __forceinline__ bool key_allowed(bool causal, bool has_doc, int qp, int doc, int kp) {
    return (!causal || kp <= qp) && (!has_doc || kp >= doc);
}

// Number of rows i in [0, map.len) with pos[token(i)] <= x (pos increasing along the map).
__device__ __forceinline__ int rows_with_pos_le(const int* pos, RowMap map, int x) {
    int lo = 0, hi = map.len;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (__ldg(pos + map.token(mid)) <= x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// What a schedule needs to know of a query tile (rows r0 .. r0+n-1 of the query map).
struct QueryTile {
    int r0, n;
    int first_pos, last_pos;  // positions of the first and last row
    int doc_min, doc_max;     // over the rows' doc_start (INT_MIN, INT_MIN when there is no mask)
};
// Of a key tile.
struct KeyTile {
    int r0, n;
    int first_pos, last_pos;
};

struct TileRange {
    int begin, end;
    __device__ int count() const { return end > begin ? end - begin : 0; }
    __device__ int tile(int it) const { return begin + it; }
    __device__ constexpr bool cut(int) const { return false; }  // a range's pattern keeps whole tiles
};

// Reads a query tile's positions and document bounds. Every thread of the block must call it
// (block-wide reduction through shared memory).
template <int NT>
__device__ QueryTile query_tile_info(const Params& p, int b, int r0, int n) {
    __shared__ int s_doc[2];
    QueryTile t;
    t.r0 = r0;
    t.n = n;
    t.first_pos = __ldg(p.qpos + p.qrows.token(r0));
    t.last_pos = __ldg(p.qpos + p.qrows.token(r0 + n - 1));
    t.doc_min = t.doc_max = INT_MIN;
    if (p.doc_start) {
        if (threadIdx.x == 0) {
            s_doc[0] = INT_MAX;
            s_doc[1] = INT_MIN;
        }
        __syncthreads();
        int lo = INT_MAX, hi = INT_MIN;
        for (int i = threadIdx.x; i < n; i += NT) {
            const int d = __ldg(p.doc_start + (size_t)b * p.q_tokens + p.qrows.token(r0 + i));
            lo = min(lo, d);
            hi = max(hi, d);
        }
        atomicMin(&s_doc[0], lo);
        atomicMax(&s_doc[1], hi);
        __syncthreads();
        t.doc_min = s_doc[0];
        t.doc_max = s_doc[1];
    }
    return t;
}

__device__ __forceinline__ KeyTile key_tile_info(const Params& p, int r0, int n) {
    KeyTile t;
    t.r0 = r0;
    t.n = n;
    t.first_pos = __ldg(p.kpos + p.krows.token(r0));
    t.last_pos = __ldg(p.kpos + p.krows.token(r0 + n - 1));
    return t;
}

// Must the (query tile, key tile) pair be masked element by element? Only pairs on the causal
// diagonal, at the end of the key sequence or straddling a document start are; the rest run
// the plain path.
__device__ __forceinline__ bool pair_needs_mask(const Params& p, const QueryTile& qt, const KeyTile& kt, int BN) {
    return kt.n < BN || (p.causal && kt.last_pos > qt.first_pos) || (p.doc_start && kt.first_pos < qt.doc_max);
}

// The pattern schedules (what a query tile visits, what a key tile visits, per-block maps) live
// with their pattern modules: layers/patterns/*.cuh, included below.

}  // namespace flash

#include "layers/patterns/dense.cuh"
#include "layers/patterns/dilated.cuh"
#include "layers/patterns/block_sparse.cuh"
