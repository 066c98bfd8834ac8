// Flash attention on tensor cores (bf16 storage, fp32 accumulation), sm_90: what every kernel reads
// (Params) and how it sees the problem.
//
// How a kernel sees the problem, so that later patterns plug in without new kernels (Params
// names no pattern: each module's arguments are its member of PatternLaunchArgs):
//  - RowMap: row i of a "virtual sequence" (the rows a tile walks) is buffer token base + i*step.
//    Dense attention is {0, 1, N}; a dilated LongNet branch is {offset, r, ceil((N-offset)/r)};
//    ring attention gives the query side and the key side separate maps (and buffers, positions).
//  - Positions: qpos / kpos give the GLOBAL position of each buffer token (causal and document
//    masks compare positions, never indices), monotonically increasing along the rows of a map.
//  - Schedule: which key tiles a query tile visits (forward, dQ) and which query tiles a key tile
//    visits (dK, dV), per pattern, in the pattern modules (layers/patterns/dense.cuh,
//    dilated.cuh, block_sparse.cuh, fixed.cuh; schedules.cuh gathers them). DenseSchedule walks a range with the
//    tiles above the causal diagonal (and before the first document of the tile) skipped;
//    BlockSparseSchedule returns a CSR list through the same count()/tile(it)/cut(it) interface,
//    cut(it) saying that the pattern itself masks part of the pair.
//  - The tile scheduler (resolve_block, tile_scheduler.cuh): which block runs which (b, h, tile),
//    in an order good for the L2, kept apart from the patterns.
#pragma once
#include <climits>
#include <cstdint>
#include "layers/cuda/common.cuh"
#include "layers/patterns/pattern_params.h"

namespace flash {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

struct RowMap {
    int base, step, len;  // row i -> token base + i*step, for i in [0, len)
    __host__ __device__ int token(int i) const { return base + i * step; }
};

// Which virtual sequence each block runs (resolve_block). len = 0 (every launch but a schedule
// of per-block maps): count = 1, one block row per (b, h) over qrows/krows as set. Else
// (kPerBlockMaps, a dilated branch: layers/patterns/dilated.cuh sets and reads it) the launch
// runs `count` segments per (b, h), from segment `first`, of `len` global positions each, a
// block's rows every `step`-th position of its segment: block x = (b*H + h)*count + (s - first)
// runs segment s. The grid (tile_grid), the longest map (max_rows) and the TMA's row step
// (ws_serves) are read from it whatever the pattern.
struct SequenceGrid {
    int len, step, first, count;
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
    float* dq_accum;         // (B, q_tokens, H, D) fp32: the atomic dQ variants', and the two-sided pieces'
    bf16* dq;                // (B, q_tokens, H, D), row stride q_stride (null: the dQ pass adds into dq_accum)
    bf16* dk;                // (B, kv_tokens, H, D), row stride kv_stride
    bf16* dv;                // (B, kv_tokens, H, D), row stride kv_stride
    // Which virtual sequence each block runs (SequenceGrid above).
    SequenceGrid seqs;
    // Launch-order groups of this many sequences (0: plain grid order): dilated branches and
    // dense rows (tile_scheduler.cuh: resolve_block, persistent_query_tile).
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
    // What the launch's pattern module's schedule reads (its member, set by the module's bind
    // and bind_tiles, layers/patterns/<stem>.cuh), and the pattern itself (host memory: each
    // schedule's `serves` asks for its own kind, and a launcher binds what its tile shape needs
    // from it, bind_tiles; it must outlive the launch calls, not the kernels).
    PatternLaunchArgs args;
    const AttnPattern* pattern;
};
// A struct of every module's member, not a union: the kernels' arguments then lie where they
// did when they were named fields here, and compile to the same machine code (a union's members
// compiled differently); 384 bytes keeps the offsets of the arguments after it (the persistent
// kernels' tile counts, the row-wise kernels' B).
static_assert(sizeof(Params) <= 384, "the kernels' argument layout (see args above)");

// The most rows a block's map can have: the launch grid's tile count comes from it.
inline int max_rows(const Params& p, const RowMap& dense) {
    return p.seqs.len > 0 ? (p.seqs.len - 1) / p.seqs.step + 1 : dense.len;
}

}  // namespace flash
