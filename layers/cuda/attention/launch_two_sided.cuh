// Flash attention on the GPU with the two-sided interface of layers/attention.h: a query side
// and a key/value side that may be different pieces of one longer sequence (a ring step's
// remote block, a KV cache), Write or Merge output, and the backward in public pieces. The same
// kernels as the one-sided launchers (launch_template.cuh); only the parameters differ.
//
// Positions: each side's positions must be contiguous, pos[i] = side.pos0 + i, with pos0 given
// on the host (a ring chunk and a cache block are): dilated segments are cut from those global
// positions and AttnDims::seq_len, the global length, never from buffer indices.
//
// Forward:
//   attention_forward_cuda(bf16 O, L, queries, keys, ...)        Write (bf16 O, fp32 L)
//   attention_partial_init_cuda + attention_forward_merge_cuda   Merge into fp32 O and L, so R
//                                                                 blocks round O once, at the end
// Backward (P recomputed from the FINAL L, so blocks can come in any order):
//   attention_backward_begin_cuda    delta = rowsum(dO * O) once, L in log2, dQ accumulator = 0
//   attention_backward_block_cuda    one key/value block: its dK, dV (written or added, bf16,
//                                    the key side's layout); dS K added into the fp32 dQ
//                                    accumulator, with atomics or (deterministic) by a dQ pass
//   attention_backward_end_cuda      dQ (bf16, the query side's layout) from the accumulator
// Workspace of the three: attention_backward_pieces_workspace_bytes.
//
// This file holds the definitions, compiled once as part of attention_flash.cu (which includes
// it at its end, sharing that object's kernel instances); programs include the declarations,
// layers/cuda/attention_flash_two_sided.h.
#pragma once
#include "layers/cuda/attention/launch_template.cuh"
#include "layers/patterns/all_launch.cuh"  // the patterns' own launches (PatternLaunches)
#include "layers/cuda/attention_flash_two_sided.h"

namespace flash {

inline Params make_two_sided_params(const AttnQueries<bf16>& qs, const AttnKeys<bf16>& ks, const AttnPattern& pattern,
                                    const AttnDims& dm, float scale) {
    const std::string perr = pattern_error(pattern);
    if (!perr.empty()) fatal("attention (two-sided CUDA): bad %s pattern: %s", attn_kind_name(pattern.kind), perr.c_str());
    if (dm.D != 64 && dm.D != 128) fatal("attention (two-sided CUDA): head dim %d is not supported (64 or 128)", dm.D);
    for (int stride : {qs.stride, ks.stride})
        if (stride % 8 != 0 || stride < dm.H * dm.D)
            fatal("attention (two-sided CUDA): row stride %d must be a multiple of 8 and at least H*D = %d", stride, dm.H * dm.D);
    if (qs.pos0 < 0 || ks.pos0 < 0)
        fatal("attention (two-sided CUDA): set AttnQueries::pos0 and AttnKeys::pos0, the first global position of "
              "each side (positions must be contiguous: pos[i] = pos0 + i)");
    if ((long long)qs.pos0 + qs.n > dm.seq_len || (long long)ks.pos0 + ks.n > dm.seq_len)
        fatal("attention (two-sided CUDA): sides at positions [%d, +%d) and [%d, +%d) must lie in the sequence of %d",
              qs.pos0, qs.n, ks.pos0, ks.n, dm.seq_len);
    auto aligned = [](const void* x) { return ((uintptr_t)x & 15) == 0; };
    if (!aligned(qs.q) || !aligned(ks.k) || !aligned(ks.v))
        fatal("attention (two-sided CUDA): q, k, v must be 16-byte aligned (cp.async 16-byte loads)");
    Params p{};
    p.q = qs.q;
    p.k = ks.k;
    p.v = ks.v;
    p.qpos = qs.pos;
    p.kpos = ks.pos;
    p.doc_start = qs.doc_start;
    p.H = dm.H;
    p.q_tokens = qs.n;
    p.kv_tokens = ks.n;
    p.q_stride = qs.stride;
    p.kv_stride = ks.stride;
    p.qrows = RowMap{0, 1, qs.n};
    p.krows = RowMap{0, 1, ks.n};
    p.causal = pattern.causal;
    p.scale = scale;
    p.scale_log2 = scale * kLog2e;
    p.seqs = SequenceGrid{0, 1, 0, 1};  // one sequence per (b, h) row
    p.q_pos0 = qs.pos0;
    p.k_pos0 = ks.pos0;
    p.seq_len = dm.seq_len;
    p.two_sided = true;
    p.accum_tokens = qs.n;
    bind_pattern(p, pattern);
    return p;
}

// Every launch of the pattern over p (its module's PatternLaunches: one launch, merging into
// what is there when `merge`, else writing; a pattern launched per branch always merges, from
// O = 0, L = -inf filled by the caller). `run` takes each launch's Params.
template <typename Run>
void for_each_launch(const Params& p, const AttnPattern& pattern, const AttnDims& dm, bool merge, Pass pass, Run run) {
    with_pattern_module(pattern.kind, [&](auto m) { PatternLaunches<decltype(m)>::for_each_launch(p, pattern, dm, merge, pass, run); });
}

}  // namespace flash

// O = 0, L = -inf over nq query rows: where a run of merges starts.
void attention_partial_init_cuda(float* out, float* lse, AttnDims dm, int nq, cudaStream_t stream) {
    CUDA_CHECK(cudaMemsetAsync(out, 0, (size_t)dm.B * nq * dm.H * dm.D * sizeof(float), stream));
    const size_t nl = (size_t)dm.B * dm.H * nq;
    if (nl > 0) flash::launch_fill(lse, nl, -INFINITY, stream);
}

// Write: O (bf16) and L of these queries against these keys.
void attention_forward_cuda(bf16* out,   // (B, nq, H, D)
                            float* lse,  // (B, H, nq)
                            const AttnQueries<bf16>& qs, const AttnKeys<bf16>& ks, const AttnPattern& pattern,
                            AttnDims dm, float scale, cudaStream_t stream) {
    if ((long long)dm.B * qs.n == 0) return;
    flash::Params p = flash::make_two_sided_params(qs, ks, pattern, dm, scale);
    p.o = out;
    p.lse = lse;
    if (pattern_launches_per_branch(pattern) || ks.n == 0) {  // branches merge: start from no keys
        CUDA_CHECK(cudaMemsetAsync(out, 0, (size_t)dm.B * qs.n * dm.H * dm.D * sizeof(bf16), stream));
        flash::launch_fill(lse, (size_t)dm.B * dm.H * qs.n, -INFINITY, stream);
        if (ks.n == 0) return;
    }
    int count = 0;
    const flash::Variant& v = flash::forward_variants(dm.D, &count)[0];
    flash::for_each_launch(p, pattern, dm, false, flash::Pass::Forward, [&](const flash::Params& q) { v.run(q, dm.B, stream); });
}

// Merge: these keys folded into the fp32 O and L already there (attention_partial_init_cuda).
void attention_forward_merge_cuda(float* out,  // (B, nq, H, D) fp32
                                  float* lse,  // (B, H, nq)
                                  const AttnQueries<bf16>& qs, const AttnKeys<bf16>& ks, const AttnPattern& pattern,
                                  AttnDims dm, float scale, cudaStream_t stream) {
    if ((long long)dm.B * qs.n == 0 || ks.n == 0) return;
    if ((uintptr_t)out & 15) fatal("attention_forward_merge_cuda: out must be 16-byte aligned");
    flash::Params p = flash::make_two_sided_params(qs, ks, pattern, dm, scale);
    p.o_f32 = out;
    p.lse = lse;
    int count = 0;
    const flash::Variant& v = flash::forward_variants(dm.D, &count)[0];
    flash::for_each_launch(p, pattern, dm, true, flash::Pass::Forward, [&](const flash::Params& q) { v.run(q, dm.B, stream); });
}

// lse_log2 and delta (B, H, nq) fp32, then the fp32 dQ accumulator (B, nq, H, D).
size_t attention_backward_pieces_workspace_bytes(AttnDims dm, int nq) {
    const size_t rows = ((size_t)dm.B * dm.H * nq * 4 * 2 + 255) / 256 * 256;
    return rows + (size_t)dm.B * nq * dm.H * dm.D * 4;
}

namespace flash {
inline void bind_pieces_workspace(Params& p, float* ws, const AttnDims& dm, int nq) {
    if ((uintptr_t)ws & 15) fatal("attention backward pieces: workspace must be 16-byte aligned");
    const size_t n = (size_t)dm.B * dm.H * nq;
    p.lse_log2 = ws;
    p.delta = ws + n;
    p.dq_accum = reinterpret_cast<float*>(reinterpret_cast<char*>(ws) + ((n * 4 * 2 + 255) / 256 * 256));
    p.accum_tok0 = 0;
    p.accum_tokens = nq;
}
}  // namespace flash

// delta = rowsum(dO * O) from the FINAL O (bf16), L in log2 from the FINAL L; dQ accumulator = 0.
void attention_backward_begin_cuda(float* workspace, const bf16* dout, const bf16* out, const float* lse,
                                   const AttnQueries<bf16>& qs, AttnDims dm, cudaStream_t stream) {
    if ((long long)dm.B * qs.n == 0) return;
    flash::Params p{};
    p.H = dm.H;
    p.q_tokens = qs.n;
    p.o = const_cast<bf16*>(out);
    p.dout = dout;
    p.lse = const_cast<float*>(lse);
    flash::bind_pieces_workspace(p, workspace, dm, qs.n);
    if (dm.D == 64) flash::launch_preprocess<64>(p, dm.B, true, stream);
    else flash::launch_preprocess<128>(p, dm.B, true, stream);
}

// One key/value block: dK, dV (the key side's layout, bf16) written, or added when accumulate;
// dS K added into the workspace's dQ accumulator: with fp32 atomics by the dK/dV kernel, or, when
// deterministic, by the deterministic variant's separate dQ pass (a plain add per row, in launch
// order: the same bits every run, at the mma.sync kernels' speed).
void attention_backward_block_cuda(bf16* dk, bf16* dv, bool accumulate, const bf16* dout, const float* lse,
                                   const AttnQueries<bf16>& qs, const AttnKeys<bf16>& ks,
                                   const AttnPattern& pattern, AttnDims dm, float scale, float* workspace,
                                   cudaStream_t stream, bool deterministic) {
    if ((long long)dm.B * ks.n == 0) return;
    flash::Params p = flash::make_two_sided_params(qs, ks, pattern, dm, scale);
    p.dout = dout;
    p.lse = const_cast<float*>(lse);
    p.dk = dk;
    p.dv = dv;
    flash::bind_pieces_workspace(p, workspace, dm, qs.n);
    if (!accumulate && (pattern_launches_per_branch(pattern) || qs.n == 0)) {  // rows no branch keeps stay 0
        const size_t width = (size_t)dm.H * dm.D * sizeof(bf16), pitch = (size_t)ks.stride * sizeof(bf16);
        CUDA_CHECK(cudaMemset2DAsync(dk, pitch, 0, width, (size_t)dm.B * ks.n, stream));
        CUDA_CHECK(cudaMemset2DAsync(dv, pitch, 0, width, (size_t)dm.B * ks.n, stream));
        accumulate = true;
        if (qs.n == 0) return;
    }
    int count = 0;
    const flash::Variant& v = flash::backward_variants(dm.D, &count)[deterministic ? flash::kDeterministicBackwardVariant : 0];
    flash::for_each_launch(p, pattern, dm, accumulate, flash::Pass::Backward, [&](const flash::Params& q) {
        v.dkdv(q, dm.B, stream);  // the deterministic variant's adds no dQ
        if (deterministic) v.dq(q, dm.B, stream);  // q.dq is null: into the accumulator
    });
}

// dQ (bf16, the query side's layout, row stride qs.stride) from the accumulator; added to what
// is there when accumulate.
void attention_backward_end_cuda(bf16* dq, bool accumulate, const AttnQueries<bf16>& qs, AttnDims dm,
                                 float* workspace, cudaStream_t stream) {
    if ((long long)dm.B * qs.n == 0) return;
    flash::Params p{};
    p.H = dm.H;
    p.q_tokens = qs.n;
    p.q_stride = qs.stride;
    p.dq = dq;
    p.accumulate = accumulate;
    flash::bind_pieces_workspace(p, workspace, dm, qs.n);
    if (dm.D == 64) flash::launch_dq_convert<64>(p, dm.B, stream);
    else flash::launch_dq_convert<128>(p, dm.B, stream);
}
