// Flash attention, CUDA: the public launchers (declared in attention_flash.h) and the kernel
// instances the model runs, compiled once into build/obj/attention_flash.o and linked into every
// program that runs attention: the launch logic (launch_template.cuh, and the patterns' own,
// layers/patterns/all_launch.cuh), forward variant 0, backward variants 0 and
// kDeterministicBackwardVariant, the row-wise kernels every backward shares.
//
// Why the variant tables are split across two objects: the tile configurations that only the
// tests and the benchmark compare are half of the kernel instances (about twenty of forty) and
// half of the compile time; train and infer never launch them. So this object holds the tables
// with the variants the model runs, and attention_flash_variants.cu, linked only into the tests
// and benchmarks that compare variants, appends the others to the same tables before main
// (add_variants). The indices do not depend on what is linked: the variants here come first
// (forward 0; backward 0 and 1 = kDeterministicBackwardVariant) and add_variants checks that
// the others land where the benchmark tables (notes/attention.md) number them. A program that
// must see every variant includes attention_flash_variants.h, which makes its link fail without
// that object rather than silently run fewer variants.
#include "layers/cuda/attention/launch_template.cuh"   // and attention_flash.h
#include "layers/patterns/all_launch.cuh"               // the patterns' own launches (PatternLaunches)
#include "layers/cuda/attention/launch_two_sided.cuh"   // the two-sided launchers, on these kernels

namespace flash {

long long dense_l2_budget = 8ll << 20;
int ws_persistent_max_query_tiles = kWsPersistentMaxQueryTiles;
int persistent_grid_max = 0;

template <int D>
void launch_preprocess(const Params& p, int B, bool zero_dq, cudaStream_t stream) {
    launch_rowwise<D>(attention_backward_preprocess_kernel<D>, p, B, zero_dq, stream);
}

template <int D>
void launch_dq_convert(const Params& p, int B, cudaStream_t stream) {
    const long long threads = (long long)B * p.accum_tokens * p.H * (D / 8);
    attention_backward_dq_convert_kernel<D><<<ceil_div(threads, 256), 256, 0, stream>>>(p, B);
    CUDA_CHECK_LAST();
}

template void launch_preprocess<64>(const Params&, int, bool, cudaStream_t);
template void launch_preprocess<128>(const Params&, int, bool, cudaStream_t);
template void launch_dq_convert<64>(const Params&, int, cudaStream_t);
template void launch_dq_convert<128>(const Params&, int, cudaStream_t);

void launch_fill(float* x, size_t n, float value, cudaStream_t stream) {
    fill_kernel<float><<<(unsigned)std::min<size_t>(ceil_div(n, (size_t)256), 4096), 256, 0, stream>>>(x, n, value);
    CUDA_CHECK_LAST();
}

namespace {

// The variants the model runs (variant 0 chosen by the measurements in notes/attention.md and
// notes/fa3-speed.md). Forward and backward are the warp-specialized kernels, for every pattern,
// one-sided and two-sided (forward_ws.cuh, backward_ws.cuh: ws_serves); a launch TMA cannot read
// (rows not 16-byte aligned, a dilation above 8) runs the wgmma kernel named after the bar, which
// was variant 0 before them.
const Variant kForward64[] = {
    {"fwd ws tma pingpong bn128 s4 | wgmma wg2 bn64", fwd_ws<64, 128, 4>},
};
const Variant kForward128[] = {
    {"fwd ws tma pingpong bn128 s2 | wgmma wg2 bn128", fwd_ws<128, 128, 2>},
};
const Variant kBackward64[] = {
    {"bwd ws tma wg2 bn128 bm128 s2 | wgmma atomic wg2 bn128 bm64", bwd_ws<64, 2, 128>, launch_backward_dkdv_ws<64, 2, 128>},
    {"bwd determ mt2 w4 bm32 | dq mt2 w4 bn64", bwd_det<64, 2, 4, 32, 2, 4, 64>,
     launch_backward_dkdv<64, 2, 4, 32, false>, launch_backward_dq<64, 2, 4, 64>},
};
const Variant kBackward128[] = {
    {"bwd ws tma wg2 bn128 bm64 s2 | wgmma atomic wg2 bn128 bm64", bwd_ws<128, 2, 64>, launch_backward_dkdv_ws<128, 2, 64>},
    {"bwd determ mt1 w8 bm64 | dq mt1 w8 bn64", bwd_det<128, 1, 8, 64, 1, 8, 64>,
     launch_backward_dkdv<128, 1, 8, 64, false>, launch_backward_dq<128, 1, 8, 64>},
};
static_assert(sizeof(kBackward64) / sizeof(Variant) == kDeterministicBackwardVariant + 1 &&
                  sizeof(kBackward128) / sizeof(Variant) == kDeterministicBackwardVariant + 1,
              "the deterministic backward is the last variant compiled here");

struct VariantTable {
    static constexpr int kMax = 8;
    Variant v[kMax];
    int count = 0;
    template <int N>
    explicit VariantTable(const Variant (&init)[N]) {
        for (const Variant& x : init) v[count++] = x;
    }
};

// [backward][D == 64 ? 0 : 1], filled on first use (so before add_variants appends, whatever the
// order of static initialisation across objects).
VariantTable& table(bool backward, int D) {
    static VariantTable t[2][2] = {{VariantTable(kForward64), VariantTable(kForward128)},
                                   {VariantTable(kBackward64), VariantTable(kBackward128)}};
    return t[backward ? 1 : 0][D == 64 ? 0 : 1];
}

}  // namespace

void add_variants(bool backward, int D, int first, const Variant* v, int count) {
    VariantTable& t = table(backward, D);
    if (t.count != first || t.count + count > VariantTable::kMax)
        fatal("flash::add_variants: %s D=%d: %d variants to append at index %d, the table has %d (of %d)",
              backward ? "backward" : "forward", D, count, first, t.count, VariantTable::kMax);
    for (int i = 0; i < count; i++) t.v[t.count++] = v[i];
}

const Variant* forward_variants(int D, int* count) {
    const VariantTable& t = table(false, D);
    *count = t.count;
    return t.v;
}

const Variant* backward_variants(int D, int* count) {
    const VariantTable& t = table(true, D);
    *count = t.count;
    return t.v;
}

}  // namespace flash

// Workspace of attention_backward_cuda for dense attention (the most any pattern needs).
size_t attention_backward_workspace_bytes(AttnShape s) {
    return flash::workspace_rowstats_bytes(s) + (size_t)s.B * s.N * s.H * s.D * 4;
}

// The same for a given pattern, as its module's launches need (PatternLaunches::
// backward_workspace_bytes), never more than the above.
size_t attention_backward_workspace_bytes(AttnShape s, const AttnPattern& pattern) {
    return with_pattern_module(pattern.kind, [&](auto m) { return flash::PatternLaunches<decltype(m)>::backward_workspace_bytes(s, pattern); });
}

// Forward with an explicit tile configuration (flash::forward_variants); variant 0 is the default.
void attention_forward_cuda_variant(int variant, bf16* out, float* lse, const bf16* q, const bf16* k,
                                    const bf16* v, const int* pos, const int* doc_start,
                                    const AttnPattern& pattern, AttnShape s, float scale, cudaStream_t stream) {
    if (s.B == 0 || s.N == 0) return;
    flash::Params p = flash::make_params(q, k, v, pos, doc_start, pattern, s, scale);
    p.o = out;
    p.lse = lse;
    int count = 0;
    flash::forward_variants(s.D, &count);
    if (variant < 0 || variant >= count) fatal("attention_forward_cuda_variant: no variant %d", variant);
    with_pattern_module(pattern.kind, [&](auto m) { flash::PatternLaunches<decltype(m)>::forward(variant, p, pattern, s, stream); });
}

void attention_forward_cuda(bf16* out,          // (B, N, H, D)
                            float* lse,         // (B, H, N)
                            const bf16* q, const bf16* k, const bf16* v,  // (B, N, H, D), stride s.stride
                            const int* pos,        // (N) global positions, increasing
                            const int* doc_start,  // (B, N) or nullptr
                            const AttnPattern& pattern, AttnShape s, float scale, cudaStream_t stream) {
    attention_forward_cuda_variant(0, out, lse, q, k, v, pos, doc_start, pattern, s, scale, stream);
}

void attention_backward_cuda_variant(int variant, bf16* dq, bf16* dk, bf16* dv, const bf16* dout,
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
    flash::backward_variants(s.D, &count);
    if (variant < 0 || variant >= count) fatal("attention_backward_cuda_variant: no variant %d", variant);
    with_pattern_module(pattern.kind,
                        [&](auto m) { flash::PatternLaunches<decltype(m)>::backward(variant, p, pattern, s, workspace, stream); });
}

void attention_backward_cuda(bf16* dq, bf16* dk, bf16* dv,  // (B, N, H, D), stride s.stride: OVERWRITTEN
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

