// Flash attention, CUDA: the launch templates behind the public launchers of attention_flash.h
// (the header programs include; it says what they do). The kernels' room, layers/cuda/attention/,
// is split as FlashAttention-3's hopper/ is, each header with its own includes. The shared rooms:
//   params.cuh             Params, RowMap: what every kernel reads and how it sees the problem
//   tile_scheduler.cuh     which (b, h, tile) a thread block runs, in an order good for the L2
//   masks.cuh              causal and document masks; what a schedule knows of a tile pair; the
//                          element masks of score and probability fragments
//   schedules.cuh          the patterns' schedules (layers/patterns/<name>.cuh), one per module
//   softmax.cuh            the online-softmax update
//   epilogue.cuh           what the kernels write: O and L (written or merged), dK, dV, dQ rows
//   ptx.cuh, wgmma.cuh     PTX wrappers: mma.sync, ldmatrix, cp.async; wgmma and its descriptors
//   smem_tiles.cuh         the swizzled shared-memory layouts, the one tile loader, mma.sync tiles
//   tma.cuh, tma_rows.cuh  TMA, mbarriers, named barriers; what the ws kernels read by TMA
//   backward_steps.cuh     the pieces of a backward step the kernels share (the wgmma step)
//   backward_pre_post.cuh  the backward's preprocess and dQ convert kernels
// The main loops, a ladder (each rung a leaf: no kernel file includes another):
//   forward_ws.cuh         forward warp-specialized (TMA producer, mbarrier pipeline, two
//                          consumer warpgroups in ping-pong), every pattern, one-sided and two-sided
//   backward_ws.cuh        dK/dV + dQ warp-specialized (TMA producer, mbarrier stages, no block
//                          barrier in the loop), every pattern, one-sided and two-sided
//   forward_wgmma.cuh      forward on wgmma (the rung below; what TMA cannot read)
//   backward_wgmma.cuh     dK/dV + atomic dQ on wgmma (the rung below; what TMA cannot read)
//   forward_mma_sync.cuh   forward on mma.sync m16n8k16 + ldmatrix (FlashAttention-2 style)
//   backward_mma_sync.cuh  backward on mma.sync, atomic dQ or deterministic with a separate dQ pass
// The launch templates:
//   launch_template.cuh    this file: parameters from shapes, the variant tables, launches
//   launch_two_sided.cuh   a query side and a key side apart (ring steps, KV-cache blocks)
// A pattern's own launch code is in its module (layers/patterns/): what it binds in Params
// (<stem>.cuh: bind, bind_tiles, e.g. block-sparse's tile lists, block_sparse_lists.cuh) and,
// for a pattern launched branch by branch, its launches (<stem>_launch.cuh, PatternLaunches
// below; dilated_launch.cuh), gathered by layers/patterns/all_launch.cuh.
// The ws kernels stream tiles by TMA, the others through a 2-stage cp.async pipeline; the variant
// tables list every tile configuration (variant 0 is what the plain launchers run).
//
// Compiled once: these headers hold templates and inline code only, instantiated by the
// translation units that build the kernels into objects (Makefile: build/obj/), each its own
// tile variants:
//   attention_flash.cu           the public launchers of attention_flash.h, every pattern, and
//                                the variants the model runs (forward 0, backward 0 and
//                                kDeterministicBackwardVariant): linked into every program
//                                that runs attention
//   attention_flash_variants.cu  the variants only the tests and the benchmark compare: linked
//                                into those (attention_flash_variants.h)
// Programs include attention_flash.h, which declares the launchers and compiles no kernel.
#pragma once
#include <mutex>
#include <unordered_set>
#include "layers/attention.h"
#include "layers/cuda/attention_flash.h"
#include "layers/cuda/attention/backward_mma_sync.cuh"
#include "layers/cuda/attention/backward_pre_post.cuh"
#include "layers/cuda/attention/backward_wgmma.cuh"
#include "layers/cuda/attention/backward_ws.cuh"
#include "layers/cuda/attention/forward_mma_sync.cuh"
#include "layers/cuda/attention/forward_wgmma.cuh"
#include "layers/cuda/attention/forward_ws.cuh"
#include "layers/cuda/attention/schedules.cuh"

namespace flash {

// Runs f(ScheduleTag<S>{}) for the one schedule S of AllSchedules that serves p (each pattern
// module says which of its schedules serves which launch), so that the ws launchers instantiate
// their kernels for every pattern and name none.
template <class F, class... Schedules>
void with_served_schedule(ScheduleList<Schedules...>, const Params& p, F&& f) {
    int served = 0;
    auto run_if_served = [&](auto tag) {
        if (!decltype(tag)::type::serves(p)) return;
        f(tag);
        served++;
    };
    (run_if_served(ScheduleTag<Schedules>{}), ...);
    if (served != 1) fatal("attention: %d kernel schedules serve this launch, not 1 (an internal error: please report it)", served);
}

// Raises a kernel's dynamic shared-memory limit on its first launch (always: dynamic bytes plus
// the kernels' few static bytes may pass 48 KB even when the dynamic part alone does not).
// Remembered by the kernel's address, not by a static flag in the template that launches it:
// nvcc gives each translation unit its own copy of a kernel template's instance (a local symbol),
// while a function-local static in an inline template is one variable for the whole program, so
// a flag set for one unit's copy skipped the other's, and its launch failed with "invalid
// argument" (test_attention, whose variants are compiled in two units, under compute-sanitizer).
template <typename K>
inline void set_smem_limit(K kernel, int bytes) {
    static std::mutex lock;
    static std::unordered_set<const void*> done;
    std::lock_guard<std::mutex> hold(lock);
    if (done.insert(reinterpret_cast<const void*>(kernel)).second)
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

// The current device's SMs: the persistent kernels' grid (one block per SM).
inline int sm_count() {
    int dev = 0, n = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
}
// The persistent kernel's grid for `tiles` tiles: a block per SM (persistent_grid_max blocks when
// it is set, so that the tests walk many tiles per block), never more blocks than tiles.
inline unsigned persistent_grid(long long tiles) {
    const int blocks = persistent_grid_max > 0 ? persistent_grid_max : sm_count();
    return (unsigned)std::min<long long>(tiles, blocks);
}

// Grid of a tile kernel: x = one block row per (b, h) (per (b, h, segment) for a dilated branch),
// y = tiles of `rows` (the longest map of the launch) in blocks of `tile`.
inline dim3 tile_grid(const Params& p, int B, int rows, int tile) {
    const long long x = (long long)B * p.H * p.seqs.count, y = ceil_div(rows, tile);
    if (x > 2147483647LL || y > 65535) fatal("attention: grid (%lld, %lld) exceeds CUDA's limits", x, y);
    return dim3((unsigned)x, (unsigned)y);
}

// Launches, for p, the instance of a kernel whose schedule serves p (exactly one of AllSchedules,
// the registry's list: dense or a dilated branch, one-sided or two-sided, block-sparse).
// kernel_of(ScheduleTag<S>{}) is the kernel's instance for schedule S; each instance gets its
// shared-memory limit on its first launch (set_smem_limit).
template <class KernelOf>
void launch_served(KernelOf kernel_of, const Params& p, dim3 grid, int threads, int smem, cudaStream_t stream) {
    with_served_schedule(AllSchedules{}, p, [&](auto tag) {
        const auto kernel = kernel_of(tag);
        set_smem_limit(kernel, smem);
        kernel<<<grid, threads, smem, stream>>>(p);
    });
    CUDA_CHECK_LAST();
}

// p with what a BM x BN kernel of its pattern needs bound (its module's bind_tiles: block-sparse
// binds its tile lists for that shape; the others nothing).
inline Params bind_tiles(const Params& p, int BM, int BN) {
    Params q = p;
    with_pattern_module(p.pattern->kind, [&](auto m) { PatternSchedules<decltype(m)>::bind_tiles(q, BM, BN); });
    return q;
}

// The ws launchers' tuning by the launch's pattern (PatternScheduleDefaults says what they mean).
inline bool l2_row_groups(const Params& p) {
    return with_pattern_module(p.pattern->kind, [](auto m) { return PatternSchedules<decltype(m)>::kL2RowGroups; });
}
inline bool always_persistent(const Params& p) {
    return with_pattern_module(p.pattern->kind, [](auto m) { return PatternSchedules<decltype(m)>::kAlwaysPersistent; });
}

template <int D, int MT, int NW, int BN>
void launch_forward(const Params& p, int B, cudaStream_t stream) {
    constexpr int BM = 16 * MT * NW, smem = forward_smem_bytes<D, MT, NW, BN>();
    const Params q = bind_tiles(p, BM, BN);
    auto kernel_of = [](auto tag) { return attention_forward_kernel<D, MT, NW, BN, typename decltype(tag)::type>; };
    launch_served(kernel_of, q, tile_grid(q, B, max_rows(q, p.qrows), BM), NW * 32, smem, stream);
}

template <int D, int NWG, int BN>
void launch_forward_wgmma(const Params& p, int B, cudaStream_t stream) {
    constexpr int BM = 64 * NWG, smem = forward_wgmma_smem_bytes<D, NWG, BN>();
    const Params q = bind_tiles(p, BM, BN);
    auto kernel_of = [](auto tag) { return attention_forward_wgmma_kernel<D, NWG, BN, typename decltype(tag)::type>; };
    launch_served(kernel_of, q, tile_grid(q, B, max_rows(q, p.qrows), BM), NWG * 128, smem, stream);
}

// Launch-order groups (Params::group) of dense rows: as many (b, h) rows as keep what a row's
// blocks re-read (`bytes` per row) within dense_l2_budget, at least one, as FlashAttention-3's
// tile scheduler groups heads. It budgets 32 MB for K and V; 8 MiB is the best budget on an H200,
// where at 16K a group is then one row whose ~128 query tiles fill the GPU and read the same key
// tiles together (see notes/fa3-speed.md, the L2 launch-order groups). 0 (plain grid order) when
// every row fits at once, or the budget is 0.
inline int dense_l2_group(long long bytes, long long nseq) {
    if (dense_l2_budget <= 0 || bytes <= 0) return 0;
    const long long g = std::max(1LL, dense_l2_budget / bytes);
    return g >= nseq ? 0 : (int)g;
}

// The warp-specialized forward (forward_ws.cuh) where TMA can read the launch's rows (every
// pattern, one-sided or two-sided); otherwise the wgmma kernel with the same 128 query rows per
// block (forward variant 1, the rung below on the ladder).
template <int D, int BN, int STAGES>
void launch_forward_ws(const Params& p, int B, cudaStream_t stream) {
    CUtensorMap tq, tk, tv;
    const int step = p.seqs.len > 0 ? p.seqs.step : 1;  // virtual sequences' rows (a dilated branch's): every step-th token
    const int fold = ws_fold_of(p), box = ws_box_rows(fold > 0 ? step / fold : step);  // past step 8: folded maps
    const bool ok = ws_serves(p) &&
                    make_row_tensor_map(&tq, p.q, p.H * D, p.q_tokens, p.q_stride, B, std::min(box, kWsBM), step, fold) &&
                    make_row_tensor_map(&tk, p.k, p.H * D, p.kv_tokens, p.kv_stride, B, std::min(box, BN), step, fold) &&
                    make_row_tensor_map(&tv, p.v, p.H * D, p.kv_tokens, p.kv_stride, B, std::min(box, BN), step, fold);
    if (!ok) return launch_forward_wgmma<D, 2, D == 64 ? 64 : 128>(p, B, stream);
    constexpr int smem = forward_ws_smem_bytes<D, BN, STAGES>();
    Params q = bind_tiles(p, kWsBM, BN);
    // ny tiles in each of nseq sequences: (b, h) rows, or a dilated branch's (b, h, segment)s.
    const int ny = ceil_div(max_rows(q, q.qrows), kWsBM);
    const long long nseq = (long long)B * q.H * q.seqs.count;
    // Dense rows (one-sided or two-sided): each query tile re-reads its row's K and V (2 D bf16
    // per key).
    if (l2_row_groups(q)) q.group = dense_l2_group((long long)q.krows.len * 2 * D * 2, nseq);
    // Persistent (a block per SM walking the tiles) where each tile's prologue and epilogue are a
    // large share of its work: short rows (any pattern's, or a dilated branch's virtual
    // sequences), and a pattern's short tile lists at any length (kAlwaysPersistent: block-sparse).
    // For long rows a block per tile: there the persistent walk is slower (see
    // notes/fa3-speed.md, the persistent forward).
    const bool persistent = always_persistent(q) ? ws_persistent_max_query_tiles > 0 : ny <= ws_persistent_max_query_tiles;
    with_served_schedule(AllSchedules{}, q, [&](auto tag) {
        using S = typename decltype(tag)::type;
        if (persistent) {
            const auto kernel = attention_forward_ws_persistent_kernel<D, BN, STAGES, S>;
            set_smem_limit(kernel, smem);
            const long long tiles = (long long)ny * nseq;
            if (tiles == 0) return;
            if (tiles > 2147483647LL) fatal("attention: %lld query tiles exceed the persistent kernel's count", tiles);
            kernel<<<persistent_grid(tiles), kWsThreads, smem, stream>>>(tq, tk, tv, q, ny, (int)nseq);
        } else {
            const auto kernel = attention_forward_ws_kernel<D, BN, STAGES, S>;
            set_smem_limit(kernel, smem);
            kernel<<<tile_grid(q, B, max_rows(q, q.qrows), kWsBM), kWsThreads, smem, stream>>>(tq, tk, tv, q);
        }
    });
    CUDA_CHECK_LAST();
}

template <int D, int MT, int NW, int BM, bool ATOMIC>
void launch_backward_dkdv(const Params& p, int B, cudaStream_t stream) {
    constexpr int BN = 16 * MT * NW, smem = backward_dkdv_smem_bytes<D, MT, NW, BM, ATOMIC>();
    const Params q = bind_tiles(p, BM, BN);
    auto kernel_of = [](auto tag) { return attention_backward_dkdv_kernel<D, MT, NW, BM, ATOMIC, typename decltype(tag)::type>; };
    launch_served(kernel_of, q, tile_grid(q, B, max_rows(q, p.krows), BN), NW * 32, smem, stream);
}

template <int D>
void launch_backward_dkdv_wgmma(const Params& p, int B, cudaStream_t stream) {
    constexpr int smem = backward_dkdv_wgmma_smem_bytes<D>();
    const Params q = bind_tiles(p, kBwdWgBM, 128);
    auto kernel_of = [](auto tag) { return attention_backward_dkdv_wgmma_kernel<D, typename decltype(tag)::type>; };
    launch_served(kernel_of, q, tile_grid(q, B, max_rows(q, p.krows), 128), 256, smem, stream);
}

// The warp-specialized backward (backward_ws.cuh) where TMA can read the launch's rows (every
// pattern, one-sided or two-sided) and dQ goes to the fp32 accumulator; otherwise the wgmma
// backward (backward variant 2, the default before it).
template <int D, int STAGES, int BM>
void launch_backward_dkdv_ws(const Params& p, int B, cudaStream_t stream) {
    CUtensorMap tq, tk, tv, tdo, tdq;
    const int step = p.seqs.len > 0 ? p.seqs.step : 1;  // virtual sequences' rows (a dilated branch's): every step-th token
    const int qbox = std::min(ws_box_rows(step), BM), kbox = std::min(ws_box_rows(step), kBwsBN);
    const bool dq_tma = bws_dq_by_tma<D, BM>();
    const bool ok = backward_ws_serves(p) && make_row_tensor_map(&tq, p.q, p.H * D, p.q_tokens, p.q_stride, B, qbox, step) &&
                    make_row_tensor_map(&tk, p.k, p.H * D, p.kv_tokens, p.kv_stride, B, kbox, step) &&
                    make_row_tensor_map(&tv, p.v, p.H * D, p.kv_tokens, p.kv_stride, B, kbox, step) &&
                    make_row_tensor_map(&tdo, p.dout, p.H * D, p.q_tokens, p.H * D, B, qbox, step) &&
                    (!dq_tma || make_accum_tensor_map(&tdq, p.dq_accum, p.H * D, p.accum_tokens, B, qbox, step));
    if (!dq_tma) tdq = tq;  // not read: dQ goes by atomics
    if (!ok) return launch_backward_dkdv_wgmma<D>(p, B, stream);
    constexpr int smem = backward_ws_smem_bytes<D, STAGES, BM>();
    Params q = bind_tiles(p, BM, kBwsBN);
    // Dense rows: each key tile re-reads its row's Q and dO (bf16), L and delta, and adds into
    // dQ's fp32 accumulator: 8 D + 8 bytes per query.
    if (l2_row_groups(q)) q.group = dense_l2_group((long long)q.qrows.len * (8 * D + 8), (long long)B * q.H);
    with_served_schedule(AllSchedules{}, q, [&](auto tag) {
        const auto kernel = attention_backward_dkdv_ws_kernel<D, STAGES, BM, typename decltype(tag)::type>;
        set_smem_limit(kernel, smem);
        kernel<<<tile_grid(q, B, max_rows(q, q.krows), kBwsBN), kBwsThreads, smem, stream>>>(tq, tk, tv, tdo, tdq, q);
    });
    CUDA_CHECK_LAST();
}

template <int D, int MT, int NW, int BN>
void launch_backward_dq(const Params& p, int B, cudaStream_t stream) {
    constexpr int BM = 16 * MT * NW, smem = backward_dq_smem_bytes<D, MT, NW, BN>();
    const Params q = bind_tiles(p, BM, BN);
    auto kernel_of = [](auto tag) { return attention_backward_dq_kernel<D, MT, NW, BN, typename decltype(tag)::type>; };
    launch_served(kernel_of, q, tile_grid(q, B, max_rows(q, p.qrows), BM), NW * 32, smem, stream);
}

template <int D>
void launch_rowwise(void (*kernel)(const Params, int, bool), const Params& p, int B, bool flag, cudaStream_t stream) {
    const long long threads = (long long)B * p.q_tokens * p.H * (D / 8);
    kernel<<<ceil_div(threads, 256), 256, 0, stream>>>(p, B, flag);
    CUDA_CHECK_LAST();
}

// The row-wise kernels that every backward variant shares, preprocess (delta = rowsum(dO * O), L
// in log2, dQ zeroed when zero_dq) and dQ convert (fp32 accumulator -> bf16 dq): declared here and
// defined once, for D = 64 and 128, in attention_flash.cu. nvcc compiles every kernel that an
// inline or template host function of a header launches into each file including the header,
// whether that function is used there or not: launched from here, these kernels would be
// compiled again into attention_flash_variants.o (and any other file including this one).
template <int D>
void launch_preprocess(const Params& p, int B, bool zero_dq, cudaStream_t stream);
template <int D>
void launch_dq_convert(const Params& p, int B, cudaStream_t stream);

// The variant launchers (flash::Variant, attention_flash.h): tile configurations, so the
// benchmark can compare them. Their tables are in attention_flash.cu (what the model runs) and
// attention_flash_variants.cu (the rest).

template <int D, int MT, int NW, int BN>
void fwd(const Params& p, int B, cudaStream_t st) { launch_forward<D, MT, NW, BN>(p, B, st); }
template <int D, int NWG, int BN>
void fwd_wgmma(const Params& p, int B, cudaStream_t st) { launch_forward_wgmma<D, NWG, BN>(p, B, st); }
template <int D, int BN, int STAGES>
void fwd_ws(const Params& p, int B, cudaStream_t st) { launch_forward_ws<D, BN, STAGES>(p, B, st); }

// Backward, atomic dQ: preprocess (zeroing dQ), dK/dV + dQ atomics, convert.
template <int D, int MT, int NW, int BM>
void bwd_atomic(const Params& p, int B, cudaStream_t st) {
    launch_preprocess<D>(p, B, true, st);
    launch_backward_dkdv<D, MT, NW, BM, true>(p, B, st);
    launch_dq_convert<D>(p, B, st);
}
// Backward on wgmma: preprocess (zeroing dQ), dK/dV + dQ atomics, convert.
template <int D>
void bwd_atomic_wgmma(const Params& p, int B, cudaStream_t st) {
    launch_preprocess<D>(p, B, true, st);
    launch_backward_dkdv_wgmma<D>(p, B, st);
    launch_dq_convert<D>(p, B, st);
}
// Backward, warp-specialized, BM queries a step: preprocess (zeroing dQ), dK/dV + dQ (TMA
// reduce-adds at D = 128, atomics at D = 64), convert.
template <int D, int STAGES, int BM>
void bwd_ws(const Params& p, int B, cudaStream_t st) {
    launch_preprocess<D>(p, B, true, st);
    launch_backward_dkdv_ws<D, STAGES, BM>(p, B, st);
    launch_dq_convert<D>(p, B, st);
}
// Backward, deterministic: preprocess, dK/dV, then a separate dQ pass.
template <int D, int MT, int NW, int BM, int QMT, int QNW, int QBN>
void bwd_det(const Params& p, int B, cudaStream_t st) {
    launch_preprocess<D>(p, B, false, st);
    launch_backward_dkdv<D, MT, NW, BM, false>(p, B, st);
    launch_backward_dq<D, QMT, QNW, QBN>(p, B, st);
}

// Appends variants to the table that forward_variants (backward = false) or backward_variants
// returns for head dim D; `first` is the index the first of them gets, checked against the table,
// so that the indices are the same in every program. attention_flash_variants.cu calls it during
// static initialisation (single-threaded, before main); defined in attention_flash.cu.
void add_variants(bool backward, int D, int first, const Variant* v, int count);

// What a launch of `pattern` needs beyond the shapes: the pattern (its kind, from which each
// launcher binds what its tile shape needs, bind_tiles), and whatever its module's GPU schedule
// binds (a block-sparse pattern's rules with an explicit layout's device copy; a fixed pattern's
// stride and summary). The pattern must outlive the launch calls (not the kernels).
inline void bind_pattern(Params& p, const AttnPattern& pattern) {
    p.pattern = &pattern;
    with_pattern_module(pattern.kind, [&](auto m) { PatternSchedules<decltype(m)>::bind(p, pattern); });
}

// Checks the arguments and fills the kernel parameters of attention over one sequence (a pattern
// launched branch by branch starts from these too: its PatternLaunches sets each branch).
inline Params make_params(const bf16* q, const bf16* k, const bf16* v, const int* pos, const int* doc_start,
                          const AttnPattern& pattern, const AttnShape& s, float scale) {
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
    p.seqs = SequenceGrid{0, 1, 0, 1};  // one sequence per (b, h) row
    p.group = 0;
    p.accumulate = false;
    p.o_f32 = nullptr;
    p.q_pos0 = p.k_pos0 = 0;  // one-sided: buffer row i is position i (the model's case)
    p.seq_len = s.N;
    p.two_sided = false;
    p.accum_tok0 = 0;
    p.accum_tokens = s.N;
    bind_pattern(p, pattern);
    return p;
}

// Workspace carve-up: lse_log2 and delta (B, H, N) fp32, then the fp32 dQ accumulator
// (B, N, H, D), 256-byte aligned.
inline size_t workspace_rowstats_bytes(const AttnShape& s) {
    const size_t n = (size_t)s.B * s.H * s.N * 4;
    return (2 * n + 255) / 256 * 256;
}

template <typename T>
__global__ void fill_kernel(T* x, size_t n, T value) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = value;
}
// Launches fill_kernel<float> (O = 0, L = -inf where a run of merges starts); defined once, in
// attention_flash.cu (see launch_preprocess for why kernels are not launched from inline code in
// these headers).
void launch_fill(float* x, size_t n, float value, cudaStream_t stream);

// Which kernels a run of launches is for: the forward's, or the backward's dK/dV (and dQ).
enum class Pass { Forward, Backward };

// How a pattern's attention runs on the flash kernels: one launch of the variant over its
// schedule (here). A pattern launched branch by branch (its module's kLaunchesPerBranch)
// specializes it in layers/patterns/<stem>_launch.cuh (gathered by all_launch.cuh), so that the
// public launchers (attention_flash.cu, launch_two_sided.cuh) name no pattern.
template <class Pattern>
struct PatternLaunches {
    // The one-sided launchers: variant `variant` (checked) of the forward or backward table,
    // p made by make_params; `workspace` is attention_backward_workspace_bytes(s, pattern) bytes.
    static void forward(int variant, const Params& p, const AttnPattern&, const AttnShape& s, cudaStream_t stream) {
        int count = 0;
        forward_variants(s.D, &count)[variant].run(p, s.B, stream);
    }
    static void backward(int variant, const Params& p, const AttnPattern&, const AttnShape& s, float* /*workspace*/,
                         cudaStream_t stream) {
        int count = 0;
        backward_variants(s.D, &count)[variant].run(p, s.B, stream);
    }
    static size_t backward_workspace_bytes(const AttnShape& s, const AttnPattern&) { return attention_backward_workspace_bytes(s); }
    // The two-sided launchers (launch_two_sided.cuh): every launch over p, its Params given to
    // run, each merging into what is there when `merge` (else it writes); `pass` says which
    // kernels run them, for a module that tunes its launches per pass.
    template <typename Run>
    static void for_each_launch(const Params& p, const AttnPattern&, const AttnDims&, bool merge, Pass /*pass*/, Run run) {
        Params q = p;
        q.accumulate = merge;
        run(q);
    }
};

}  // namespace flash
