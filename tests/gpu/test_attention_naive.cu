// The plain CUDA attention kernel (layers/cuda/attention_naive.cuh) against the float64 CPU
// reference (layers/attention.h) on fresh random inputs, every case of attention_cases.cuh
// (patterns, causal or not, documents), D = 64 and 128, odd sizes, outputs poisoned with NaN:
//  - Write mode over the whole sequence, fp32 and bf16 outputs;
//  - Merge mode: a query block anywhere in the sequence against its keys split into R = 1..5
//    uneven blocks, merged in fp32, equals the reference rows;
//  - the backward in pieces (preprocess once, one step per key block) equals the reference's
//    dQ, dK, dV of that query block.
// The inputs are bf16 values, so the only error is the kernel's fp32 arithmetic (bf16 output:
// plus one rounding). Usage: test_attention_naive [SEED] [--small]. Prints PASS/FAIL and a summary.
#include <cstdlib>
#include "layers/cuda/attention_naive.cuh"
#include "tests/gpu/attention_cases.cuh"

static void run_case(const AttnCase& c, int D, SplitMix64& rng) {
    const AttnProblem P(rng, 2, 203, 3, D);
    const int B = P.B, N = P.N, HD = P.HD, S = P.S;
    const float scale = (float)P.scale;
    const AttnDims dm = P.dims();
    const std::string tag = c.name + " D" + std::to_string(D);
    DevArena dev;
    const std::vector<bf16> qkv_bf = to_bf16(P.qkv), dout_bf = to_bf16(P.dout);

    {  // 1. Write mode over the whole sequence.
        const AttnReference ref = attn_reference(P, c, 0, N, P.scale);
        const bf16* qkv = dev.upload(qkv_bf);
        const int* pos = dev.upload(P.pos);
        const AttnQueries<bf16> qs{qkv, S, N, pos, c.has_docs() ? dev.upload(P.doc) : nullptr, 0};
        const AttnKeys<bf16> ks{qkv + HD, qkv + 2 * HD, S, N, pos, 0};
        float* of = dev.alloc<float>(ref.O.size(), 0xff);
        bf16* ob = dev.alloc<bf16>(ref.O.size(), 0xff);
        float* lf = dev.alloc<float>(ref.L.size(), 0xff);
        attention_forward_naive_cuda(of, lf, qs, ks, c.pattern, dm, scale, AttnOutput::Write, 0);
        expect_close("naive write fp32 O: " + tag, as_double(download(of, ref.O.size())), ref.O, 2e-6);
        expect_close("naive write L: " + tag, as_double(download(lf, ref.L.size())), ref.L, 2e-6);
        attention_forward_naive_cuda(ob, lf, qs, ks, c.pattern, dm, scale, AttnOutput::Write, 0);
        expect_close("naive write bf16 O: " + tag, as_double(download(ob, ref.O.size())), ref.O, 5e-3);
    }

    // 2. Merge and the pieced backward: queries [qa, qb) against R key blocks.
    double worst_f = 0, worst_b = 0;
    for (int R = 1; R <= 5; R++) {
        const AttnSplit sp = attn_split(P, c, qkv_bf, R, rng, dev);
        const AttnReference& ref = sp.ref;
        const AttnQueries<bf16>& qs = sp.qs;
        const std::vector<AttnKeys<bf16>>& blocks = sp.blocks;
        const int qa = sp.qa, qb = sp.qb, nq = sp.nq;
        float* O = dev.alloc<float>(ref.O.size(), 0xff);
        float* L = dev.alloc<float>(ref.L.size(), 0xff);
        attention_partial_init_naive(O, L, dm, nq, 0);
        for (const AttnKeys<bf16>& ks : blocks) attention_forward_naive_cuda(O, L, qs, ks, c.pattern, dm, scale, AttnOutput::Merge, 0);
        const std::vector<double> Og = as_double(download(O, ref.O.size())), Lg = as_double(download(L, ref.L.size()));
        worst_f = std::max({worst_f, error_vs(Og.data(), ref.O.data(), Og.size()).norm, error_vs(Lg.data(), ref.L.data(), Lg.size()).norm});

        const bf16* g = dev.upload(P.rows(dout_bf, qa, qb, HD));
        float* delta = dev.alloc<float>(ref.L.size(), 0xff);
        float* dq = dev.alloc<float>(ref.O.size(), 0);
        attention_backward_preprocess_naive_cuda(delta, g, O, dm, nq, 0);
        std::vector<std::vector<double>> kb, vb;  // each block's dK, dV (B, n_r, H, D)
        for (int r = 0; r < R; r++) {
            const int nk = blocks[r].n;
            float* dk = dev.alloc<float>((size_t)B * nk * HD, 0);
            float* dv = dev.alloc<float>((size_t)B * nk * HD, 0);
            attention_backward_block_naive_cuda(dq, dk, dv, g, L, delta, qs, blocks[r], c.pattern, dm, scale, 0);
            kb.push_back(as_double(download(dk, (size_t)B * nk * HD)));
            vb.push_back(as_double(download(dv, (size_t)B * nk * HD)));
        }
        const std::vector<double> dk_all = attn_blocks_in_order(kb, sp.cut, B, HD), dv_all = attn_blocks_in_order(vb, sp.cut, B, HD);
        const std::vector<double> dqg = as_double(download(dq, ref.dq.size()));
        worst_b = std::max({worst_b, error_vs(dqg.data(), ref.dq.data(), dqg.size()).norm,
                            error_vs(dk_all.data(), ref.dk.data(), dk_all.size()).norm,
                            error_vs(dv_all.data(), ref.dv.data(), dv_all.size()).norm});
    }
    char buf[300];
    std::snprintf(buf, sizeof buf, "naive merge of R = 1..5 key blocks (fp32): %-44s rel %.2e (tol 2e-6)", tag.c_str(), worst_f);
    check(worst_f <= 2e-6, buf);
    std::snprintf(buf, sizeof buf, "naive pieced backward, R = 1..5: %-54s rel %.2e (tol 1e-5)", tag.c_str(), worst_b);
    check(worst_b <= 1e-5, buf);
}

int main(int argc, char** argv) { return attn_test_main(argc, argv, run_case); }
