// The attention backends the GPU harness (test_attention.cu) runs every case on, each behind the
// same two calls (forward: bf16 O and fp32 L; backward: dQ, dK, dV written into slices of a bf16
// dQKV buffer) and a refusal that says, in words, which cases it does not take:
//   flash <variant>   our kernels, one-sided launchers, every tile variant (attention_flash.h)
//   flash two-sided   the same kernels through the two-sided interface (attention_flash_two_sided.h):
//                     one Write call, the backward as begin / one block / end; "deterministic"
//                     (backward only): the block's dQ by the separate pass, reruns bit-identical
//   cudnn             cuDNN's SDPA engine (attention_cudnn.h): dense, no documents
//   naive             the plain CUDA kernel (attention_naive.cuh), one warp per query row; its
//                     fp32 gradients are rounded to bf16 into the same slices
// A new backend is one entry in attention_backends(); a new pattern needs nothing here.
#pragma once
#define ATTN_CUDNN_CHECK_POS  // cuDNN launchers verify pos is contiguous (tests only: it synchronises)
#include <functional>
#include <string>
#include <vector>
#include "layers/cuda/attention_cudnn.h"
#include "layers/cuda/attention_flash.h"
#include "layers/cuda/attention_flash_two_sided.h"
#include "layers/cuda/attention_flash_variants.h"  // every tile variant
#include "layers/cuda/attention_naive.cuh"

// One case's inputs on the device, where the kernels read them.
struct AttnDevCase {
    const bf16 *q, *k, *v;  // (B, N, H, D), row stride s.stride
    const int* pos;         // (N) global positions
    AttnShape s;
    int pos0;               // pos[i] = pos0 + i; -1 when the positions have gaps
    const bf16* dout;       // (B, N, H, D): the backward's dO
    const bf16* out;        // (B, N, H, D): the backward's O (the reference's, rounded to bf16)
    // The two-sided view: the whole sequence as one query side and one key side.
    AttnDims dims() const { return AttnDims{s.B, s.H, s.D, pos0 + s.N}; }
    AttnQueries<bf16> queries(const int* doc) const { return AttnQueries<bf16>{q, s.stride, s.N, pos, doc, pos0}; }
    AttnKeys<bf16> keys() const { return AttnKeys<bf16>{k, v, s.stride, s.N, pos, pos0}; }
};

struct AttnBackend {
    std::string name;
    // "" when it runs this case, else why not (printed as a SKIP line, not counted).
    std::function<std::string(const AttnPattern&, const AttnDevCase&, bool docs)> refuses;
    // Either may be empty (a forward-only or backward-only tile variant).
    std::function<void(bf16* out, float* lse, const AttnDevCase&, const AttnPattern&, const int* doc, float scale)> forward;
    std::function<void(bf16* dq, bf16* dk, bf16* dv, const float* lse, const AttnDevCase&, const AttnPattern&,
                       const int* doc, float scale)>
        backward;
    bool deterministic_backward = true;  // reruns must be bit-identical (else reported only)
};

// Scratch that lives for one call, poisoned (0xff: NaN) so that nothing relies on its contents.
struct Scratch {
    void* p = nullptr;
    explicit Scratch(size_t bytes, unsigned char fill = 0xff) {
        CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 256)));
        CUDA_CHECK(cudaMemset(p, fill, std::max<size_t>(bytes, 256)));
    }
    ~Scratch() { cudaFree(p); }
    float* f() const { return (float*)p; }
};

// (rows, HD) fp32 contiguous -> bf16 rows of stride `stride`.
__global__ void f32_rows_to_bf16(bf16* dst, int stride, const float* src, size_t rows, int HD) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < rows * HD; i += (size_t)gridDim.x * blockDim.x)
        dst[i / HD * stride + i % HD] = __float2bfloat16(src[i]);
}

// The kinds our flash kernels run (the others: the naive kernel and the CPU).
inline std::string refuse_gapped_positions(const AttnDevCase& c) {
    return c.pos0 < 0 ? "needs contiguous positions (pos[i] = pos0 + i)" : "";
}

inline std::vector<AttnBackend> attention_backends(int D) {
    std::vector<AttnBackend> out;
    // Our one-sided launchers: a dilated pattern cuts segments by buffer index (pos[i] = i).
    auto flash_refuses = [](const AttnPattern& p, const AttnDevCase& c, bool) -> std::string {
        return p.kind != AttnKind::Dense && c.pos0 != 0 ? "one-sided launchers need pos[i] = i for this pattern" : "";
    };
    int nf = 0, nb = 0;
    const flash::Variant* fv = flash::forward_variants(D, &nf);
    const flash::Variant* bv = flash::backward_variants(D, &nb);
    for (int i = 0; i < nf; i++) {
        AttnBackend b;
        b.name = std::string("flash ") + fv[i].name;
        b.refuses = flash_refuses;
        b.forward = [i](bf16* o, float* l, const AttnDevCase& c, const AttnPattern& p, const int* doc, float scale) {
            attention_forward_cuda_variant(i, o, l, c.q, c.k, c.v, c.pos, doc, p, c.s, scale, 0);
        };
        out.push_back(b);
    }
    {
        // Variant 0 again with the warp-specialized forward's other grid: a block per query tile
        // (the test's rows are short, so the plain run walks them persistently).
        AttnBackend b;
        b.name = std::string("flash ") + fv[0].name + " (a block per tile)";
        b.refuses = flash_refuses;
        b.forward = [](bf16* o, float* l, const AttnDevCase& c, const AttnPattern& p, const int* doc, float scale) {
            const int keep = flash::ws_persistent_max_query_tiles;
            flash::ws_persistent_max_query_tiles = 0;
            attention_forward_cuda_variant(0, o, l, c.q, c.k, c.v, c.pos, doc, p, c.s, scale, 0);
            flash::ws_persistent_max_query_tiles = keep;
        };
        out.push_back(b);
    }
    {
        // Variant 0's persistent forward on 3 blocks: the test's rows give most blocks of a full
        // grid one or two tiles; on 3, each block walks many (Q, the K/V stages and their phases
        // reused across tiles, on dense rows, dilated segments and block-sparse lists).
        AttnBackend b;
        b.name = std::string("flash ") + fv[0].name + " (persistent on 3 blocks)";
        b.refuses = flash_refuses;
        b.forward = [](bf16* o, float* l, const AttnDevCase& c, const AttnPattern& p, const int* doc, float scale) {
            const int keep = flash::persistent_grid_max;
            flash::persistent_grid_max = 3;
            attention_forward_cuda_variant(0, o, l, c.q, c.k, c.v, c.pos, doc, p, c.s, scale, 0);
            flash::persistent_grid_max = keep;
        };
        out.push_back(b);
    }
    // Variant 0 with dense rows in launch-order groups of one (b, h) row (flash::dense_l2_budget of
    // a byte; the test's rows are too short for the default budget to group them), on both
    // grids, forward and backward: the remaps of tile_scheduler.cuh (resolve_block,
    // persistent_query_tile), the last group two rows.
    for (int grid : {0, 1}) {
        AttnBackend b;
        b.name = std::string("flash ") + fv[0].name + (grid ? " (a block per tile, L2 groups of 1)" : " (L2 groups of 1)");
        b.refuses = flash_refuses;
        b.forward = [grid](bf16* o, float* l, const AttnDevCase& c, const AttnPattern& p, const int* doc, float scale) {
            const int keep = flash::ws_persistent_max_query_tiles;
            const long long budget = flash::dense_l2_budget;
            if (grid) flash::ws_persistent_max_query_tiles = 0;
            flash::dense_l2_budget = 1;
            attention_forward_cuda_variant(0, o, l, c.q, c.k, c.v, c.pos, doc, p, c.s, scale, 0);
            flash::ws_persistent_max_query_tiles = keep;
            flash::dense_l2_budget = budget;
        };
        out.push_back(b);
    }
    {
        AttnBackend b;
        b.name = std::string("flash ") + bv[0].name + " (L2 groups of 1)";
        b.refuses = flash_refuses;
        b.backward = [](bf16* dq, bf16* dk, bf16* dv, const float* l, const AttnDevCase& c, const AttnPattern& p,
                        const int* doc, float scale) {
            const long long budget = flash::dense_l2_budget;
            flash::dense_l2_budget = 1;
            Scratch ws(attention_backward_workspace_bytes(c.s, p));
            attention_backward_cuda_variant(0, dq, dk, dv, c.dout, c.out, l, c.q, c.k, c.v, c.pos, doc, p, c.s, scale,
                                            ws.f(), 0);
            CUDA_CHECK(cudaDeviceSynchronize());
            flash::dense_l2_budget = budget;
        };
        out.push_back(b);
    }
    for (int i = 0; i < nb; i++) {
        AttnBackend b;
        b.name = std::string("flash ") + bv[i].name;
        b.refuses = flash_refuses;
        b.backward = [i](bf16* dq, bf16* dk, bf16* dv, const float* l, const AttnDevCase& c, const AttnPattern& p,
                         const int* doc, float scale) {
            Scratch ws(attention_backward_workspace_bytes(c.s, p));
            attention_backward_cuda_variant(i, dq, dk, dv, c.dout, c.out, l, c.q, c.k, c.v, c.pos, doc, p, c.s, scale,
                                            ws.f(), 0);
            CUDA_CHECK(cudaDeviceSynchronize());
        };
        b.deterministic_backward = i == flash::kDeterministicBackwardVariant;  // variant 0 adds dQ atomically
        out.push_back(b);
    }
    for (bool det : {false, true}) {  // the pieces' backward with dQ by atomics, then by its own pass
        AttnBackend b;
        b.name = det ? "flash two-sided deterministic" : "flash two-sided";
        b.refuses = [](const AttnPattern& p, const AttnDevCase& c, bool) {
            return refuse_gapped_positions(c);
        };
        if (!det)  // the same forward either way
            b.forward = [](bf16* o, float* l, const AttnDevCase& c, const AttnPattern& p, const int* doc, float scale) {
                attention_forward_cuda(o, l, c.queries(doc), c.keys(), p, c.dims(), scale, 0);
            };
        b.backward = [det](bf16* dq, bf16* dk, bf16* dv, const float* l, const AttnDevCase& c, const AttnPattern& p,
                           const int* doc, float scale) {
            const AttnQueries<bf16> qs = c.queries(doc);
            Scratch ws(attention_backward_pieces_workspace_bytes(c.dims(), c.s.N));
            attention_backward_begin_cuda(ws.f(), c.dout, c.out, l, qs, c.dims(), 0);
            attention_backward_block_cuda(dk, dv, /*accumulate=*/false, c.dout, l, qs, c.keys(), p, c.dims(), scale,
                                          ws.f(), 0, det);
            attention_backward_end_cuda(dq, /*accumulate=*/false, qs, c.dims(), ws.f(), 0);
            CUDA_CHECK(cudaDeviceSynchronize());
        };
        b.deterministic_backward = det;  // without: dQ accumulates with atomics, as flash variant 0
        out.push_back(b);
    }
    {
        AttnBackend b;
        b.name = "cudnn";
        b.refuses = [](const AttnPattern& p, const AttnDevCase& c, bool docs) {
            std::string why = refuse_gapped_positions(c);
            if (why.empty()) attention_cudnn_supports(p, c.s, docs, &why);
            return why;
        };
        b.forward = [](bf16* o, float* l, const AttnDevCase& c, const AttnPattern& p, const int* doc, float scale) {
            attention_forward_cudnn(o, l, c.q, c.k, c.v, c.pos, doc, p, c.s, scale, 0);
        };
        b.backward = [](bf16* dq, bf16* dk, bf16* dv, const float* l, const AttnDevCase& c, const AttnPattern& p,
                        const int* doc, float scale) {
            Scratch ws(attention_cudnn_workspace_bytes(c.s));
            attention_backward_cudnn(dq, dk, dv, c.dout, c.out, l, c.q, c.k, c.v, c.pos, doc, p, c.s, scale, ws.f(), 0);
            CUDA_CHECK(cudaDeviceSynchronize());
        };
        out.push_back(b);
    }
    {
        AttnBackend b;
        b.name = "naive";
        b.refuses = [](const AttnPattern&, const AttnDevCase&, bool) { return std::string(); };
        b.forward = [](bf16* o, float* l, const AttnDevCase& c, const AttnPattern& p, const int* doc, float scale) {
            const AttnDims dm{c.s.B, c.s.H, c.s.D, c.s.N};
            attention_forward_naive_cuda(o, l, AttnQueries<bf16>{c.q, c.s.stride, c.s.N, c.pos, doc},
                                         AttnKeys<bf16>{c.k, c.v, c.s.stride, c.s.N, c.pos}, p, dm, scale,
                                         AttnOutput::Write, 0);
        };
        b.backward = [](bf16* dq, bf16* dk, bf16* dv, const float* l, const AttnDevCase& c, const AttnPattern& p,
                        const int* doc, float scale) {
            const AttnDims dm{c.s.B, c.s.H, c.s.D, c.s.N};
            const size_t rows = (size_t)c.s.B * c.s.N, HD = (size_t)c.s.H * c.s.D;
            Scratch g(3 * rows * HD * sizeof(float), 0), delta(rows * c.s.H * sizeof(float));
            float *gq = g.f(), *gk = gq + rows * HD, *gv = gk + rows * HD;
            const AttnQueries<bf16> qs{c.q, c.s.stride, c.s.N, c.pos, doc};
            attention_backward_preprocess_naive_cuda(delta.f(), c.dout, c.out, dm, c.s.N, 0);
            attention_backward_block_naive_cuda(gq, gk, gv, c.dout, l, delta.f(), qs,
                                                AttnKeys<bf16>{c.k, c.v, c.s.stride, c.s.N, c.pos}, p, dm, scale, 0);
            const unsigned blocks = (unsigned)std::min<size_t>((rows * HD + 255) / 256, 4096);
            f32_rows_to_bf16<<<blocks, 256>>>(dq, c.s.stride, gq, rows, (int)HD);
            f32_rows_to_bf16<<<blocks, 256>>>(dk, c.s.stride, gk, rows, (int)HD);
            f32_rows_to_bf16<<<blocks, 256>>>(dv, c.s.stride, gv, rows, (int)HD);
            CUDA_CHECK_LAST();
            CUDA_CHECK(cudaDeviceSynchronize());
        };
        b.deterministic_backward = false;  // dK, dV add with atomics
        out.push_back(b);
    }
    return out;
}
