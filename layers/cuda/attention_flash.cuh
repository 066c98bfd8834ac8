// Flash attention, CUDA: the launchers mirroring the CPU reference (layers/attention.h),
//   attention_forward_cuda   ~ attention_forward
//   attention_backward_cuda  ~ attention_backward
// on bf16 storage with fp32 accumulation, head dims 64 and 128, for sm_90a. Kernels:
//   attention_flash_sm90.cuh      forward on wgmma (the default)
//   attention_flash_bwd_sm90.cuh  dK/dV + atomic dQ on wgmma (the default backward)
//   attention_flash_fwd.cuh       forward on mma.sync m16n8k16 + ldmatrix (FlashAttention-2 style)
//   attention_flash_bwd.cuh       backward on mma.sync: atomic dQ, or deterministic with a
//                                 separate dQ pass; the preprocess and dQ convert kernels
//   attention_flash_common.cuh    descriptors (row maps, positions, schedules), the online-softmax
//                                 update, PTX wrappers
//   attention_dilated.cuh         dilated (LongNet) patterns: the same kernels launched branch by
//                                 branch on per-block virtual sequences (DilatedSchedule), outputs
//                                 merged across branches (included at the end of this file)
// All stream K/V (or Q/dO) tiles through a 2-stage cp.async pipeline; the variant tables below
// list every tile configuration (variant 0 is what the plain launchers run).
//
// Determinism: the forward is deterministic. The default backward adds dQ with fp32 atomics, so
// dQ can differ in the last bits from run to run (dK, dV do not); for bit-identical results use
// attention_backward_cuda_variant(flash::kDeterministicBackwardVariant, ...), an mma.sync kernel
// pair: backward 18% (D=64) to 40% (D=128) slower at N=64K on an H200 (notes/attention.md).
//
// Layout (as the CPU reference): Q, K, V (B, N, H, D) read in place with token stride s.stride
// (3*H*D for slices of a QKV buffer (B, N, 3, H, D)); O (B, N, H, D) contiguous; L (B, H, N) fp32,
// natural log; a row with no key gets O = 0 and L = -inf. Causal and document masks use the
// global positions pos (N).
//
// Unlike the CPU reference, whose backward ADDS into its gradient buffers, attention_backward_cuda
// OVERWRITES dq, dk, dv (slices of a dQKV buffer, same strides as q, k, v): every element of the
// three slices is written, none is read before this call wrote it (a dilated pattern adds its
// later branches into what its first branch, or a zero-fill, wrote; likewise O and L forward).
//
// Patterns: dense and dilated (LongNet; for dilated, positions must be pos[i] = i, see
// attention_dilated.cuh). Workspace: attention_backward_workspace_bytes(s) is enough for every
// pattern; attention_backward_workspace_bytes(s, pattern) is the smaller exact size.
#pragma once
#include "layers/attention.h"
#include "layers/cuda/attention_flash_bwd.cuh"
#include "layers/cuda/attention_flash_bwd_sm90.cuh"
#include "layers/cuda/attention_flash_fwd.cuh"
#include "layers/cuda/attention_flash_sm90.cuh"

namespace flash {

// Always raise the limit: dynamic bytes plus the kernels' few static bytes may pass 48 KB even
// when the dynamic part alone does not.
template <typename K>
inline void set_smem_limit(K kernel, int bytes) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

// Each launcher runs the DenseSchedule instance of its kernel, or the DilatedSchedule one for a
// dilated branch (p.seg_len > 0).
// Grid of a tile kernel: x = one block row per (b, h) (per (b, h, segment) for a dilated branch),
// y = tiles of `rows` (the longest map of the launch) in blocks of `tile`.
inline dim3 tile_grid(const Params& p, int B, int rows, int tile) {
    const long long x = (long long)B * p.H * p.nseg, y = ceil_div(rows, tile);
    if (x > 2147483647LL || y > 65535) fatal("attention: grid (%lld, %lld) exceeds CUDA's limits", x, y);
    return dim3((unsigned)x, (unsigned)y);
}

template <int D, int MT, int NW, int BN>
void launch_forward(const Params& p, int B, cudaStream_t stream) {
    constexpr int BM = 16 * MT * NW, smem = forward_smem_bytes<D, MT, NW, BN>();
    auto dense = attention_forward_kernel<D, MT, NW, BN, DenseSchedule>;
    auto dilated = attention_forward_kernel<D, MT, NW, BN, DilatedSchedule>;
    static bool once = (set_smem_limit(dense, smem), set_smem_limit(dilated, smem), true);
    (void)once;
    (p.seg_len > 0 ? dilated : dense)<<<tile_grid(p, B, max_rows(p, p.qrows), BM), NW * 32, smem, stream>>>(p);
    CUDA_CHECK_LAST();
}

template <int D, int NWG, int BN>
void launch_forward_wgmma(const Params& p, int B, cudaStream_t stream) {
    constexpr int BM = 64 * NWG, smem = forward_wgmma_smem_bytes<D, NWG, BN>();
    auto dense = attention_forward_wgmma_kernel<D, NWG, BN, DenseSchedule>;
    auto dilated = attention_forward_wgmma_kernel<D, NWG, BN, DilatedSchedule>;
    static bool once = (set_smem_limit(dense, smem), set_smem_limit(dilated, smem), true);
    (void)once;
    (p.seg_len > 0 ? dilated : dense)<<<tile_grid(p, B, max_rows(p, p.qrows), BM), NWG * 128, smem, stream>>>(p);
    CUDA_CHECK_LAST();
}

template <int D, int MT, int NW, int BM, bool ATOMIC>
void launch_backward_dkdv(const Params& p, int B, cudaStream_t stream) {
    constexpr int BN = 16 * MT * NW, smem = backward_dkdv_smem_bytes<D, MT, NW, BM, ATOMIC>();
    auto dense = attention_backward_dkdv_kernel<D, MT, NW, BM, ATOMIC, DenseSchedule>;
    auto dilated = attention_backward_dkdv_kernel<D, MT, NW, BM, ATOMIC, DilatedSchedule>;
    static bool once = (set_smem_limit(dense, smem), set_smem_limit(dilated, smem), true);
    (void)once;
    (p.seg_len > 0 ? dilated : dense)<<<tile_grid(p, B, max_rows(p, p.krows), BN), NW * 32, smem, stream>>>(p);
    CUDA_CHECK_LAST();
}

template <int D>
void launch_backward_dkdv_wgmma(const Params& p, int B, cudaStream_t stream) {
    constexpr int smem = backward_dkdv_wgmma_smem_bytes<D>();
    auto dense = attention_backward_dkdv_wgmma_kernel<D, DenseSchedule>;
    auto dilated = attention_backward_dkdv_wgmma_kernel<D, DilatedSchedule>;
    static bool once = (set_smem_limit(dense, smem), set_smem_limit(dilated, smem), true);
    (void)once;
    (p.seg_len > 0 ? dilated : dense)<<<tile_grid(p, B, max_rows(p, p.krows), 128), 256, smem, stream>>>(p);
    CUDA_CHECK_LAST();
}

template <int D, int MT, int NW, int BN>
void launch_backward_dq(const Params& p, int B, cudaStream_t stream) {
    constexpr int BM = 16 * MT * NW, smem = backward_dq_smem_bytes<D, MT, NW, BN>();
    auto dense = attention_backward_dq_kernel<D, MT, NW, BN, DenseSchedule>;
    auto dilated = attention_backward_dq_kernel<D, MT, NW, BN, DilatedSchedule>;
    static bool once = (set_smem_limit(dense, smem), set_smem_limit(dilated, smem), true);
    (void)once;
    (p.seg_len > 0 ? dilated : dense)<<<tile_grid(p, B, max_rows(p, p.qrows), BM), NW * 32, smem, stream>>>(p);
    CUDA_CHECK_LAST();
}

template <int D>
void launch_rowwise(void (*kernel)(const Params, int, bool), const Params& p, int B, bool flag, cudaStream_t stream) {
    const long long threads = (long long)B * p.q_tokens * p.H * (D / 8);
    kernel<<<ceil_div(threads, 256), 256, 0, stream>>>(p, B, flag);
    CUDA_CHECK_LAST();
}

template <int D>
void launch_dq_convert(const Params& p, int B, cudaStream_t stream) {
    const long long threads = (long long)B * p.accum_tokens * p.H * (D / 8);
    attention_backward_dq_convert_kernel<D><<<ceil_div(threads, 256), 256, 0, stream>>>(p, B);
    CUDA_CHECK_LAST();
}

// Tile configurations, so the benchmark can compare them; variant 0 is what the public
// launchers use (chosen by the measurements in notes/attention.md).
struct Variant {
    const char* name;
    void (*run)(const Params&, int B, cudaStream_t);
    // Backward only, the pieces a dilated branch launches (layers/cuda/attention_dilated.cuh):
    // the dK/dV kernel (adding dQ into dq_accum when dq is null) and the separate dQ kernel.
    void (*dkdv)(const Params&, int B, cudaStream_t) = nullptr;
    void (*dq)(const Params&, int B, cudaStream_t) = nullptr;
};

template <int D, int MT, int NW, int BN>
void fwd(const Params& p, int B, cudaStream_t st) { launch_forward<D, MT, NW, BN>(p, B, st); }
template <int D, int NWG, int BN>
void fwd_wgmma(const Params& p, int B, cudaStream_t st) { launch_forward_wgmma<D, NWG, BN>(p, B, st); }

// Backward, atomic dQ: preprocess (zeroing dQ), dK/dV + dQ atomics, convert.
template <int D, int MT, int NW, int BM>
void bwd_atomic(const Params& p, int B, cudaStream_t st) {
    launch_rowwise<D>(attention_backward_preprocess_kernel<D>, p, B, true, st);
    launch_backward_dkdv<D, MT, NW, BM, true>(p, B, st);
    launch_dq_convert<D>(p, B, st);
}
// Backward on wgmma: preprocess (zeroing dQ), dK/dV + dQ atomics, convert.
template <int D>
void bwd_atomic_wgmma(const Params& p, int B, cudaStream_t st) {
    launch_rowwise<D>(attention_backward_preprocess_kernel<D>, p, B, true, st);
    launch_backward_dkdv_wgmma<D>(p, B, st);
    launch_dq_convert<D>(p, B, st);
}
// Backward, deterministic: preprocess, dK/dV, then a separate dQ pass.
template <int D, int MT, int NW, int BM, int QMT, int QNW, int QBN>
void bwd_det(const Params& p, int B, cudaStream_t st) {
    launch_rowwise<D>(attention_backward_preprocess_kernel<D>, p, B, false, st);
    launch_backward_dkdv<D, MT, NW, BM, false>(p, B, st);
    launch_backward_dq<D, QMT, QNW, QBN>(p, B, st);
}

inline const Variant* forward_variants(int D, int* count) {
    static const Variant v64[] = {
        {"fwd wgmma wg2 bn64", fwd_wgmma<64, 2, 64>},
        {"fwd wgmma wg2 bn128", fwd_wgmma<64, 2, 128>},
        {"fwd wgmma wg1 bn64", fwd_wgmma<64, 1, 64>},
        {"fwd wgmma wg1 bn128", fwd_wgmma<64, 1, 128>},
        {"fwd mma.sync mt2 w4 bn128", fwd<64, 2, 4, 128>},
    };
    static const Variant v128[] = {
        {"fwd wgmma wg2 bn128", fwd_wgmma<128, 2, 128>},
        {"fwd wgmma wg2 bn64", fwd_wgmma<128, 2, 64>},
        {"fwd wgmma wg1 bn64", fwd_wgmma<128, 1, 64>},
        {"fwd mma.sync mt2 w4 bn64", fwd<128, 2, 4, 64>},
        {"fwd mma.sync mt2 w4 bn32", fwd<128, 2, 4, 32>},
    };
    *count = 5;
    return D == 64 ? v64 : v128;
}

// Variant 1 of the backward is the deterministic one (no atomics: a separate dQ pass).
constexpr int kDeterministicBackwardVariant = 1;

inline const Variant* backward_variants(int D, int* count) {
    static const Variant v64[] = {
        {"bwd wgmma atomic wg2 bn128 bm64", bwd_atomic_wgmma<64>, launch_backward_dkdv_wgmma<64>},
        {"bwd determ mt2 w4 bm32 | dq mt2 w4 bn64", bwd_det<64, 2, 4, 32, 2, 4, 64>,
         launch_backward_dkdv<64, 2, 4, 32, false>, launch_backward_dq<64, 2, 4, 64>},
        {"bwd mma.sync atomic mt2 w4 bm32", bwd_atomic<64, 2, 4, 32>, launch_backward_dkdv<64, 2, 4, 32, true>},
    };
    static const Variant v128[] = {
        {"bwd wgmma atomic wg2 bn128 bm64", bwd_atomic_wgmma<128>, launch_backward_dkdv_wgmma<128>},
        {"bwd determ mt1 w8 bm64 | dq mt1 w8 bn64", bwd_det<128, 1, 8, 64, 1, 8, 64>,
         launch_backward_dkdv<128, 1, 8, 64, false>, launch_backward_dq<128, 1, 8, 64>},
        {"bwd mma.sync atomic mt1 w8 bm64", bwd_atomic<128, 1, 8, 64>, launch_backward_dkdv<128, 1, 8, 64, true>},
    };
    *count = 3;
    return D == 64 ? v64 : v128;
}

// Checks the arguments and fills the kernel parameters of dense attention over one sequence (a
// dilated pattern starts from these too: layers/cuda/attention_dilated.cuh sets its branches).
inline Params make_params(const bf16* q, const bf16* k, const bf16* v, const int* pos, const int* doc_start,
                          const AttnPattern& pattern, const AttnShape& s, float scale) {
    if (pattern.kind != AttnKind::Dense && pattern.kind != AttnKind::Dilated)
        fatal("attention_*_cuda: pattern '%s' has no CUDA kernel", attn_kind_name(pattern.kind));
    const std::string perr = pattern_error(pattern);
    if (!perr.empty()) fatal("attention_*_cuda: bad %s pattern: %s", attn_kind_name(pattern.kind), perr.c_str());
    if (s.D != 64 && s.D != 128) fatal("attention_*_cuda: head dim %d is not supported (64 or 128)", s.D);
    if (s.stride % 8 != 0 || s.stride < s.H * s.D)
        fatal("attention_*_cuda: token stride %d must be a multiple of 8 and at least H*D = %d", s.stride, s.H * s.D);
    auto aligned = [](const void* x) { return ((uintptr_t)x & 15) == 0; };
    if (!aligned(q) || !aligned(k) || !aligned(v))
        fatal("attention_*_cuda: q, k, v must be 16-byte aligned (cp.async 16-byte loads)");
    Params p{};
    p.q = q;
    p.k = k;
    p.v = v;
    p.qpos = p.kpos = pos;
    p.doc_start = doc_start;
    p.H = s.H;
    p.q_tokens = p.kv_tokens = s.N;
    p.q_stride = p.kv_stride = s.stride;
    p.qrows = p.krows = RowMap{0, 1, s.N};
    p.causal = pattern.causal;
    p.scale = scale;
    p.scale_log2 = scale * kLog2e;
    p.seg_len = 0;
    p.dilation = 1;
    p.seg0 = 0;
    p.nseg = 1;
    p.group = 0;
    p.accumulate = false;
    p.accum_tok0 = 0;
    p.accum_tokens = s.N;
    return p;
}

// Dilated attention, defined in layers/cuda/attention_dilated.cuh (included at the end of this
// file): the public launchers below hand a Dilated pattern to these.
inline void dilated_forward(int variant, const Params& base, const AttnPattern& pattern, const AttnShape& s,
                            cudaStream_t stream);
inline void dilated_backward(int variant, const Params& base, const AttnPattern& pattern, const AttnShape& s,
                             float* workspace, cudaStream_t stream);
inline size_t dilated_workspace_bytes(const AttnShape& s, const AttnPattern& pattern);

// Workspace carve-up: lse_log2 and delta (B, H, N) fp32, then the fp32 dQ accumulator
// (B, N, H, D), 256-byte aligned.
inline size_t workspace_rowstats_bytes(const AttnShape& s) {
    const size_t n = (size_t)s.B * s.H * s.N * 4;
    return (2 * n + 255) / 256 * 256;
}

}  // namespace flash

// Workspace of attention_backward_cuda for dense attention (the most any pattern needs).
inline size_t attention_backward_workspace_bytes(AttnShape s) {
    return flash::workspace_rowstats_bytes(s) + (size_t)s.B * s.N * s.H * s.D * 4;
}

// The same for a given pattern: a dilated one walks the sequence in chunks and needs an fp32 dQ
// accumulator for one chunk only (layers/cuda/attention_dilated.cuh), never more than the above.
inline size_t attention_backward_workspace_bytes(AttnShape s, const AttnPattern& pattern) {
    if (pattern.kind == AttnKind::Dilated) return flash::dilated_workspace_bytes(s, pattern);
    return attention_backward_workspace_bytes(s);
}

// Forward with an explicit tile configuration (flash::forward_variants); variant 0 is the default.
inline void attention_forward_cuda_variant(int variant, bf16* out, float* lse, const bf16* q, const bf16* k,
                                           const bf16* v, const int* pos, const int* doc_start,
                                           const AttnPattern& pattern, AttnShape s, float scale, cudaStream_t stream) {
    if (s.B == 0 || s.N == 0) return;
    flash::Params p = flash::make_params(q, k, v, pos, doc_start, pattern, s, scale);
    p.o = out;
    p.lse = lse;
    int count = 0;
    const flash::Variant* vs = flash::forward_variants(s.D, &count);
    if (variant < 0 || variant >= count) fatal("attention_forward_cuda_variant: no variant %d", variant);
    if (pattern.kind == AttnKind::Dilated) flash::dilated_forward(variant, p, pattern, s, stream);
    else vs[variant].run(p, s.B, stream);
}

inline void attention_forward_cuda(bf16* out,          // (B, N, H, D)
                                   float* lse,         // (B, H, N)
                                   const bf16* q, const bf16* k, const bf16* v,  // (B, N, H, D), stride s.stride
                                   const int* pos,        // (N) global positions, increasing
                                   const int* doc_start,  // (B, N) or nullptr
                                   const AttnPattern& pattern, AttnShape s, float scale, cudaStream_t stream) {
    attention_forward_cuda_variant(0, out, lse, q, k, v, pos, doc_start, pattern, s, scale, stream);
}

inline void attention_backward_cuda_variant(int variant, bf16* dq, bf16* dk, bf16* dv, const bf16* dout,
                                            const bf16* out, const float* lse, const bf16* q, const bf16* k,
                                            const bf16* v, const int* pos, const int* doc_start,
                                            const AttnPattern& pattern, AttnShape s, float scale, float* workspace,
                                            cudaStream_t stream) {
    if (s.B == 0 || s.N == 0) return;
    flash::Params p = flash::make_params(q, k, v, pos, doc_start, pattern, s, scale);
    if (((uintptr_t)dq & 15) || ((uintptr_t)dk & 15) || ((uintptr_t)dv & 15) || ((uintptr_t)dout & 15) ||
        ((uintptr_t)out & 15) || ((uintptr_t)workspace & 15))
        fatal("attention_backward_cuda: dq, dk, dv, dout, out and workspace must be 16-byte aligned");
    p.o = const_cast<bf16*>(out);
    p.lse = const_cast<float*>(lse);
    p.dout = dout;
    p.dq = dq;
    p.dk = dk;
    p.dv = dv;
    const size_t n = (size_t)s.B * s.H * s.N;
    p.lse_log2 = workspace;
    p.delta = workspace + n;
    p.dq_accum = reinterpret_cast<float*>(reinterpret_cast<char*>(workspace) + flash::workspace_rowstats_bytes(s));
    int count = 0;
    const flash::Variant* vs = flash::backward_variants(s.D, &count);
    if (variant < 0 || variant >= count) fatal("attention_backward_cuda_variant: no variant %d", variant);
    if (pattern.kind == AttnKind::Dilated) flash::dilated_backward(variant, p, pattern, s, workspace, stream);
    else vs[variant].run(p, s.B, stream);
}

inline void attention_backward_cuda(bf16* dq, bf16* dk, bf16* dv,  // (B, N, H, D), stride s.stride: OVERWRITTEN
                                    const bf16* dout,   // (B, N, H, D)
                                    const bf16* out,    // (B, N, H, D)
                                    const float* lse,   // (B, H, N)
                                    const bf16* q, const bf16* k, const bf16* v,  // (B, N, H, D), stride s.stride
                                    const int* pos, const int* doc_start, const AttnPattern& pattern, AttnShape s,
                                    float scale,
                                    float* workspace,  // attention_backward_workspace_bytes(s, pattern)
                                    cudaStream_t stream) {
    attention_backward_cuda_variant(0, dq, dk, dv, dout, out, lse, q, k, v, pos, doc_start, pattern, s, scale,
                                    workspace, stream);
}

#include "layers/cuda/attention_dilated.cuh"  // the dilated launchers declared above
