// The two-sided, mergeable attention interface on the CPU (layers/attention.h) and the tiled
// kernel (layers/attention_tiled.h), in double precision on fresh random inputs:
//  1. the tiled kernel equals the plain reference (every pattern, causal or not, documents), and
//     on the sized cases of the GPU harness small enough for float64 (tests/attention_cases.h);
//  2. merging: the keys of a sequence split into R = 1..5 uneven blocks, each run in Merge mode
//     for a query block placed anywhere in the sequence, give the result of one call over all
//     keys, and the rows of the one-sided call over the whole sequence; the same for the pieced
//     backward (preprocess once, one block step per key block);
//  3. dilated attention cut by the GLOBAL length equals the spec written literally
//     (layers/patterns/dilated_reference.h), and cutting it by the local block length would not (so the
//     merge test can tell the two apart);
//  4. the pattern modules: pairs_kept equals the sum of multiplicities; JSON and flags round trip;
//  5. the spec branch by branch (tests/attention_branchwise.h in double, no rounding: each of
//     pattern_branches a softmax of its own, mixed by log-sum-exp) equals the one-softmax
//     reference, forward and backward; with bf16 rounding (the GPU tests' error budget) it
//     differs from it by a bf16-sized error, neither zero nor large.
// Usage: test_attention_cpu [SEED]. Prints PASS/FAIL lines and "N passed, M failed".
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "core/rng.h"
#include "layers/attention.h"
#include "layers/patterns/dilated_reference.h"
#include "layers/attention_tiled.h"
#include "layers/patterns/block_sparse_tiles.h"
#include "tests/attention_branchwise.h"
#include "tests/attention_cases.h"
#include "tests/attention_checks.h"

// One sequence of N tokens: QKV (B, N, 3, H, D), positions 0..N-1, documents.
struct Problem {
    int B = 2, N = 101, H = 3, D = 8;
    std::vector<double> qkv, dout;
    std::vector<int> pos, doc_start;
    double scale;
    Problem(SplitMix64& rng, bool docs) {
        auto uni = [&] { return (double)(rng.next() >> 11) * 0x1.0p-53 * 2 - 1; };
        qkv.resize((size_t)B * N * 3 * H * D);
        for (double& x : qkv) x = 1.5 * uni();
        dout.resize((size_t)B * N * H * D);
        for (double& x : dout) x = uni();
        pos.resize(N);
        for (int i = 0; i < N; i++) pos[i] = i;
        if (docs) {  // documents of random lengths, different in each batch row
            doc_start.resize((size_t)B * N);
            for (int b = 0; b < B; b++) {
                int start = 0;
                for (int i = 0; i < N; i++) {
                    if (i > 0 && rng.below(17) == 0) start = i;
                    doc_start[(size_t)b * N + i] = start;
                }
            }
        }
        scale = 1.0 / std::sqrt((double)D);
    }
    int stride() const { return 3 * H * D; }
    const double* q() const { return qkv.data(); }
    const double* k() const { return qkv.data() + H * D; }
    const double* v() const { return qkv.data() + 2 * H * D; }
    AttnDims dims() const { return AttnDims{B, H, D, N}; }
    // Rows [r0, r1) of the sequence as a side of its own: copies (B, n, 3, H, D), so the kernels
    // see a buffer that starts at the block (as a ring step's received block would).
    std::vector<double> rows(int r0, int r1) const {
        std::vector<double> out;
        for (int b = 0; b < B; b++)
            out.insert(out.end(), qkv.begin() + ((size_t)b * N + r0) * stride(), qkv.begin() + ((size_t)b * N + r1) * stride());
        return out;
    }
    template <typename V>
    std::vector<V> slice_bn(const std::vector<V>& x, int r0, int r1, int width) const {  // (B, N, width) rows
        std::vector<V> out;
        for (int b = 0; b < B; b++)
            out.insert(out.end(), x.begin() + ((size_t)b * N + r0) * width, x.begin() + ((size_t)b * N + r1) * width);
        return out;
    }
    std::vector<double> slice_bhn(const std::vector<double>& x, int r0, int r1) const {  // (B, H, N) rows
        std::vector<double> out;
        for (int bh = 0; bh < B * H; bh++) out.insert(out.end(), x.begin() + (size_t)bh * N + r0, x.begin() + (size_t)bh * N + r1);
        return out;
    }
};

static void test_tiled(SplitMix64& rng) {
    for (const AttnCase& c : attn_cases()) {
        Problem P(rng, c.has_docs());
        const AttnDims dm = P.dims();
        const AttnQueries<double> qs{P.q(), P.stride(), P.N, P.pos.data(), c.has_docs() ? P.doc_start.data() : nullptr};
        const AttnKeys<double> ks{P.k(), P.v(), P.stride(), P.N, P.pos.data()};
        std::vector<double> O((size_t)P.B * P.N * P.H * P.D, NAN), L((size_t)P.B * P.H * P.N, NAN);  // poisoned
        std::vector<double> Ot(O), Lt(L);
        attention_forward(O.data(), L.data(), qs, ks, c.pattern, dm, P.scale);
        attention_forward_tiled(Ot.data(), Lt.data(), qs, ks, c.pattern, dm, P.scale);
        const double e = std::max(max_diff(O, Ot), max_diff(L, Lt));
        check_err(e <= 1e-12, "tiled == plain: " + c.name, e, 1e-12);
    }
}

// The sized cases small enough for float64 (attn_cpu_cases: the GPU harness's list, filtered by
// size): the tiled kernel equals the plain reference at each case's shape, scale, positions
// (offset, gaps, repeats) and documents (with rows that attend nothing).
static void test_tiled_sized(SplitMix64& rng) {
    for (const AttnCase& c : attn_cpu_cases()) {
        const int B = c.B, N = c.N, H = c.H, D = c.D, HD = H * D, S = 3 * HD;
        auto uni = [&] { return (double)(rng.next() >> 11) * 0x1.0p-53 * 2 - 1; };
        std::vector<double> qkv((size_t)B * N * S);
        for (double& x : qkv) x = 1.5 * uni();
        std::vector<int> pos(N), doc;
        for (int i = 0; i < N; i++)
            pos[i] = i == 0 ? c.pos0 : pos[i - 1] + (c.gaps ? 1 + (int)rng.below(3) : c.repeats ? (int)rng.below(3) : 1);
        if (c.has_docs()) {
            doc.resize((size_t)B * N);
            for (int b = 0; b < B; b++) {
                for (int i = 0, start = pos[0]; i < N; i++) {
                    if (i > 0 && rng.below(N) < 4) start = pos[i];  // about 4 documents per row
                    doc[(size_t)b * N + i] = start;
                }
                if (c.docs == Docs::SeveralAndEmptyRows)
                    for (int k = 0; k < 3; k++) {  // rows that attend no key: a document starting after them
                        const int i = (int)rng.below(N);
                        doc[(size_t)b * N + i] = c.pattern.causal ? pos[i] + 1 : pos[N - 1] + 1;
                    }
            }
        }
        const AttnDims dm{B, H, D, N};
        const double scale = c.scale_mul / std::sqrt((double)D);
        const AttnQueries<double> qs{qkv.data(), S, N, pos.data(), doc.empty() ? nullptr : doc.data()};
        const AttnKeys<double> ks{qkv.data() + HD, qkv.data() + 2 * HD, S, N, pos.data()};
        std::vector<double> O((size_t)B * N * HD, NAN), L((size_t)B * H * N, NAN);  // poisoned
        std::vector<double> Ot(O), Lt(L);
        attention_forward(O.data(), L.data(), qs, ks, c.pattern, dm, scale);
        attention_forward_tiled(Ot.data(), Lt.data(), qs, ks, c.pattern, dm, scale);
        const double e = std::max(max_diff(O, Ot), max_diff(L, Lt));
        check_err(e <= 1e-12, "tiled == plain: " + attn_case_name(c), e, 1e-12);
    }
}

// Queries [qa, qb) of the sequence against its keys split into R blocks, forward in Merge mode
// (plain and tiled) and the pieced backward, against one call over the whole sequence.
static void test_merge(SplitMix64& rng) {
    for (const AttnCase& c : attn_cases()) {
        Problem P(rng, c.has_docs());
        const AttnDims dm = P.dims();
        const int HD = P.H * P.D;
        const int* docs = c.has_docs() ? P.doc_start.data() : nullptr;
        // The whole sequence, one-sided: the reference rows.
        std::vector<double> O((size_t)P.B * P.N * HD), L((size_t)P.B * P.H * P.N);
        std::vector<double> dqkv(P.qkv.size(), 0.0);
        const AttnShape s{P.B, P.N, P.H, P.D, P.stride()};
        attention_forward(O.data(), L.data(), P.q(), P.k(), P.v(), P.pos.data(), docs, c.pattern, s, P.scale);
        attention_backward(dqkv.data(), dqkv.data() + HD, dqkv.data() + 2 * HD, P.dout.data(), O.data(), L.data(), P.q(),
                           P.k(), P.v(), P.pos.data(), docs, c.pattern, s, P.scale);
        double worst_f = 0, worst_ft = 0, worst_b = 0;
        for (int R = 1; R <= 5; R++) {
            // A query block anywhere in the sequence (the whole of it when R = 1).
            const int qa = R == 1 ? 0 : (int)rng.below(P.N / 2), qb = R == 1 ? P.N : qa + 1 + (int)rng.below(P.N - qa);
            const int nq = qb - qa;
            const std::vector<double> qrows = P.rows(qa, qb);
            const std::vector<int> qpos(P.pos.begin() + qa, P.pos.begin() + qb);
            const std::vector<int> qdoc = c.has_docs() ? P.slice_bn(P.doc_start, qa, qb, 1) : std::vector<int>();
            const AttnQueries<double> qs{qrows.data(), P.stride(), nq, qpos.data(), c.has_docs() ? qdoc.data() : nullptr};
            std::vector<double> Om((size_t)P.B * nq * HD), Lm((size_t)P.B * P.H * nq), Omt(Om.size()), Lmt(Lm.size());
            attention_partial_init(Om.data(), Lm.data(), dm, nq);
            attention_partial_init(Omt.data(), Lmt.data(), dm, nq);
            const std::vector<int> cut = attn_cuts(rng, P.N, R);
            for (int r = 0; r < R; r++) {
                const std::vector<double> krows = P.rows(cut[r], cut[r + 1]);
                const std::vector<int> kpos(P.pos.begin() + cut[r], P.pos.begin() + cut[r + 1]);
                const AttnKeys<double> ks_k{krows.data() + HD, krows.data() + 2 * HD, P.stride(), cut[r + 1] - cut[r], kpos.data()};
                attention_forward(Om.data(), Lm.data(), qs, ks_k, c.pattern, dm, P.scale, AttnOutput::Merge);
                attention_forward_tiled(Omt.data(), Lmt.data(), qs, ks_k, c.pattern, dm, P.scale, AttnOutput::Merge);
            }
            const std::vector<double> Oref = P.slice_bn(O, qa, qb, HD), Lref = P.slice_bhn(L, qa, qb);
            worst_f = std::max({worst_f, max_diff(Om, Oref), max_diff(Lm, Lref)});
            worst_ft = std::max({worst_ft, max_diff(Omt, Oref), max_diff(Lmt, Lref)});

            // Backward in pieces: delta once, then one block step per key block. dq of the query
            // rows must equal the reference's rows; dk, dv get only these queries' share, so
            // they are checked against one block step over all keys (itself checked above by
            // the R = 1 case, where the query block is the whole sequence).
            std::vector<double> dout = P.slice_bn(P.dout, qa, qb, HD), delta((size_t)P.B * P.H * nq);
            attention_backward_preprocess(delta.data(), dout.data(), Om.data(), dm, nq);
            std::vector<double> dq(qrows.size(), 0.0), dkv_all(P.qkv.size(), 0.0), dkv_blocks(P.qkv.size(), 0.0);
            std::vector<double> dq_all(qrows.size(), 0.0);
            const AttnKeys<double> all{P.k(), P.v(), P.stride(), P.N, P.pos.data()};
            attention_backward_block(dq_all.data(), dkv_all.data() + HD, dkv_all.data() + 2 * HD, dout.data(), Lm.data(),
                                     delta.data(), qs, all, c.pattern, dm, P.scale);
            for (int r = 0; r < R; r++) {
                std::vector<double> krows = P.rows(cut[r], cut[r + 1]), dk(krows.size(), 0.0);
                const std::vector<int> kpos(P.pos.begin() + cut[r], P.pos.begin() + cut[r + 1]);
                const AttnKeys<double> ks{krows.data() + HD, krows.data() + 2 * HD, P.stride(), cut[r + 1] - cut[r], kpos.data()};
                attention_backward_block(dq.data(), dk.data() + HD, dk.data() + 2 * HD, dout.data(), Lm.data(), delta.data(),
                                         qs, ks, c.pattern, dm, P.scale);
                for (int b = 0; b < P.B; b++)  // this block's dK, dV back into the sequence's rows
                    for (size_t x = 0; x < (size_t)ks.n * P.stride(); x++)
                        dkv_blocks[((size_t)b * P.N + cut[r]) * P.stride() + x] = dk[(size_t)b * ks.n * P.stride() + x];
            }
            double e = std::max(max_diff(dq, dq_all), max_diff(dkv_blocks, dkv_all));
            if (R == 1) {  // the query block is the whole sequence: dK, dV are the reference's
                std::vector<double> ref = dqkv;
                for (size_t t = 0; t < ref.size(); t += P.stride())
                    for (int j = 0; j < HD; j++) ref[t + j] = 0;  // (dkv_blocks has no dQ part)
                e = std::max(e, max_diff(dkv_blocks, ref));
            }
            const std::vector<double> dq_ref = P.slice_bn(dqkv, qa, qb, P.stride());
            for (size_t t = 0; t < dq.size(); t += P.stride())
                for (int j = 0; j < HD; j++) e = std::max(e, std::fabs(dq[t + j] - dq_ref[t + j]));
            worst_b = std::max(worst_b, e);
        }
        check_err(worst_f <= 1e-12, "merge of R = 1..5 key blocks == one call: " + c.name, worst_f, 1e-12);
        check_err(worst_ft <= 1e-12, "tiled merge of R = 1..5 key blocks == one call: " + c.name, worst_ft, 1e-12);
        check_err(worst_b <= 1e-12, "pieced backward (R = 1..5 blocks) == one call: " + c.name, worst_b, 1e-12);
    }
}

// Dilated segments cut by the global length, against the spec written literally; and the same
// call with the block's own length as seq_len must differ (the bug a split sequence would hit).
static void test_global_length(SplitMix64& rng) {
    Problem P(rng, false);
    AttnPattern p;
    p.kind = AttnKind::Dilated;
    p.causal = false;
    p.dilated.segments = {32, 1000};  // 1000 > N: the segment is the whole GLOBAL sequence
    p.dilated.dilations = {2, 4};
    const int HD = P.H * P.D, qa = 40, qb = 90;
    const AttnShape s{P.B, P.N, P.H, P.D, P.stride()};
    std::vector<double> O((size_t)P.B * P.N * HD), L((size_t)P.B * P.H * P.N);
    dilated_attention_forward(O.data(), L.data(), P.q(), P.k(), P.v(), p, s, P.scale);
    const std::vector<double> qrows = P.rows(qa, qb);
    const std::vector<int> qpos(P.pos.begin() + qa, P.pos.begin() + qb);
    const AttnQueries<double> qs{qrows.data(), P.stride(), qb - qa, qpos.data(), nullptr};
    const AttnKeys<double> ks{P.k(), P.v(), P.stride(), P.N, P.pos.data()};
    std::vector<double> Oq((size_t)P.B * (qb - qa) * HD), Lq((size_t)P.B * P.H * (qb - qa));
    attention_forward(Oq.data(), Lq.data(), qs, ks, p, P.dims(), P.scale);
    const double e = std::max(max_diff(Oq, P.slice_bn(O, qa, qb, HD)), max_diff(Lq, P.slice_bhn(L, qa, qb)));
    check_err(e <= 1e-12, "dilated, queries 40..89 of 101, global length == spec (dilated_reference.h)", e, 1e-12);
    AttnDims local = P.dims();
    local.seq_len = qb - qa;  // wrong: the segment of 1000 would become the 50 rows of the block
    attention_forward(Oq.data(), Lq.data(), qs, ks, p, local, P.scale);
    const double d = max_diff(Lq, P.slice_bhn(L, qa, qb));
    check_err(d > 1e-3, "the same with the block's length as seq_len differs (the test can fail)", d, 1e-3);
}

static void test_modules() {
    double worst = 0;
    for (const AttnCase& c : attn_cases()) {
        for (int N : {1, 7, 50, 101}) {
            const int H = 5;
            double brute = 0;
            for (int h = 0; h < H; h++)
                for (int i = 0; i < N; i++)
                    for (int j = 0; j < N; j++) brute += key_multiplicity(c.pattern, h, i, j, N);
            worst = std::max(worst, std::fabs(pairs_kept(c.pattern, N, H) - brute));
        }
    }
    check_err(worst == 0, "pairs_kept == sum of multiplicities, every case, N = 1, 7, 50, 101", worst, 0);
    int bad = 0;
    for (const AttnCase& c : attn_cases()) {
        const AttnPattern back = pattern_from_json(JsonParser(pattern_to_json(c.pattern)).parse());
        bad += pattern_to_json(back) != pattern_to_json(c.pattern) || back.kind != c.pattern.kind || back.causal != c.pattern.causal ||
               back.dilated.segments != c.pattern.dilated.segments || back.dilated.dilations != c.pattern.dilated.dilations;
    }
    PatternFlags f;
    f.dilated.segments = "16,40";
    f.dilated.dilations = "1,2";
    const AttnPattern fp = pattern_from_flags("dilated", f);
    bad += fp.kind != AttnKind::Dilated || fp.dilated.segments != std::vector<int>{16, 40} || fp.dilated.dilations != std::vector<int>{1, 2};
    bad += pattern_from_flags("dense", f).kind != AttnKind::Dense;
    AttnKind k;
    bad += attn_kind_from_name("sliding", &k) || std::string(attn_kind_name(AttnKind::Dilated)) != "dilated";
    bad += !attn_kind_from_name("block-sparse", &k) || k != AttnKind::BlockSparse;
    f.block_sparse.block = 32, f.block_sparse.window = 100, f.block_sparse.global = 4, f.block_sparse.dilated_blocks = "3,512", f.block_sparse.random_blocks = "2,9";
    const AttnPattern bp = pattern_from_flags("block-sparse", f);
    bad += bp.block_sparse.block != 32 || bp.block_sparse.window != 100 || bp.block_sparse.global != 4 || bp.block_sparse.dilated_r != 3 || bp.block_sparse.dilated_window != 512 ||
           bp.block_sparse.random_count != 2 || bp.block_sparse.random_seed != 9;
    f.fixed.stride = 64, f.fixed.summary = 8;
    const AttnPattern xp = pattern_from_flags("fixed", f);
    bad += xp.kind != AttnKind::Fixed || xp.fixed.stride != 64 || xp.fixed.summary != 8;
    // The fixed pattern by hand (Child et al.'s figure: l = 4, c = 1): query 9 keeps its block
    // {8, 9} and the last key of blocks 0 and 1, {3, 7}; query 5 keeps {3, 4, 5}.
    AttnPattern hand = xp;
    hand.fixed.stride = 4, hand.fixed.summary = 1;
    auto keys_of = [&](int q) {
        std::vector<int> out;
        for (int k = 0; k < 12; k++)
            if (key_multiplicity(hand, 0, q, k, 12)) out.push_back(k);
        return out;
    };
    bad += keys_of(9) != std::vector<int>{3, 7, 8, 9} || keys_of(5) != std::vector<int>{3, 4, 5} || keys_of(0) != std::vector<int>{0};
    check_err(bad == 0, "pattern JSON round trip, flags, names", bad, 0);

    // The tile predicates against brute force, on random position ranges: a pair tiles_meet
    // refuses holds no kept (query, key) for any head; a pair tiles_full accepts keeps every
    // allowed pair exactly once for every head.
    SplitMix64 rng(11);
    int unsound = 0, tested = 0;
    for (const AttnCase& c : attn_cases()) {
        const int N = 300, H = 3;
        for (int trial = 0; trial < 400; trial++) {
            const int q_lo = (int)rng.below(N), q_hi = std::min(N - 1, q_lo + (int)rng.below(40));
            const int k_lo = (int)rng.below(N), k_hi = std::min(N - 1, k_lo + (int)rng.below(40));
            if (!pattern_tiles_meet(c.pattern, q_lo, q_hi, k_lo, k_hi, N) && !(c.pattern.causal && k_lo > q_hi)) {
                for (int h = 0; h < H; h++)
                    for (int q = q_lo; q <= q_hi; q++)
                        for (int k = k_lo; k <= k_hi; k++) unsound += key_multiplicity(c.pattern, h, q, k, N) != 0;
                tested++;
            }
            if (pattern_tiles_full(c.pattern, q_lo, q_hi, k_lo, k_hi, N)) {
                for (int h = 0; h < H; h++)
                    for (int q = q_lo; q <= q_hi; q++)
                        for (int k = k_lo; k <= k_hi; k++)
                            if (!c.pattern.causal || k <= q) unsound += key_multiplicity(c.pattern, h, q, k, N) != 1;
                tested++;
            }
        }
    }
    check_err(unsound == 0 && tested > 0, "tiles_meet and tiles_full agree with the multiplicities, every case", unsound, 0);
}

static double bf16_round(double x) {  // round to nearest even at 8 significant bits
    const float f = (float)x;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    float r;
    std::memcpy(&r, &u, 4);
    return r;
}

static void test_branchwise(SplitMix64& rng) {
    for (const AttnCase& c : attn_cases()) {
        Problem P(rng, c.has_docs());
        const AttnShape s{P.B, P.N, P.H, P.D, P.stride()};
        const int* doc = c.has_docs() ? P.doc_start.data() : nullptr;
        const size_t no = (size_t)P.B * P.N * P.H * P.D, nl = (size_t)P.B * P.H * P.N;
        std::vector<double> O(no), L(nl), Ob(no, NAN), Lb(nl, NAN), dqkv(P.qkv.size(), 0.0);
        attention_forward(O.data(), L.data(), P.q(), P.k(), P.v(), P.pos.data(), doc, c.pattern, s, P.scale);
        attention_backward(dqkv.data(), dqkv.data() + P.H * P.D, dqkv.data() + 2 * P.H * P.D, P.dout.data(), O.data(),
                           L.data(), P.q(), P.k(), P.v(), P.pos.data(), doc, c.pattern, s, P.scale);
        std::vector<double> g[3], gb[3];
        for (int w = 0; w < 3; w++) {  // the reference's (B, N, H, D) slices, and the branchwise outputs
            for (size_t t = 0; t < (size_t)P.B * P.N; t++)
                g[w].insert(g[w].end(), dqkv.begin() + t * P.stride() + w * P.H * P.D,
                            dqkv.begin() + t * P.stride() + (w + 1) * P.H * P.D);
            gb[w].assign(no, NAN);
        }
        auto exact = [](double x) { return x; };
        branchwise_forward(Ob.data(), Lb.data(), P.q(), P.k(), P.v(), P.pos.data(), doc, c.pattern, s, P.scale, exact);
        branchwise_backward(gb[0].data(), gb[1].data(), gb[2].data(), P.dout.data(), O.data(), L.data(), P.q(), P.k(),
                            P.v(), P.pos.data(), doc, c.pattern, s, P.scale, exact);
        double e = std::max(max_diff(O, Ob), max_diff(L, Lb));
        for (int w = 0; w < 3; w++) e = std::max(e, max_diff(g[w], gb[w]));
        check_err(e <= 1e-12, "spec branch by branch (double) == reference, fwd and bwd: " + c.name, e, 1e-12);
        auto bf = [](double x) { return bf16_round(x); };
        branchwise_forward(Ob.data(), Lb.data(), P.q(), P.k(), P.v(), P.pos.data(), doc, c.pattern, s, P.scale, bf);
        const double eb = max_diff(O, Ob);
        check_err(eb > 1e-5 && eb < 3e-2, "the same rounded to bf16 is a bf16-sized error away: " + c.name, eb, 3e-2);
    }
}

// Block-sparse against the spec's identities, and its layout files. All blocks active is dense
// attention; the diagonal block alone is block-diagonal attention, i.e. dilated (w = b, r = 1).
static void test_block_sparse(SplitMix64& rng) {
    for (bool causal : {true, false})
        for (bool docs : {false, true}) {
            Problem P(rng, docs);
            const AttnShape s{P.B, P.N, P.H, P.D, P.stride()};
            const int* doc = docs ? P.doc_start.data() : nullptr;
            const size_t no = (size_t)P.B * P.N * P.H * P.D, nl = (size_t)P.B * P.H * P.N;
            auto run = [&](const AttnPattern& p) {
                std::vector<double> O(no), L(nl);
                attention_forward(O.data(), L.data(), P.q(), P.k(), P.v(), P.pos.data(), doc, p, s, P.scale);
                O.insert(O.end(), L.begin(), L.end());
                return O;
            };
            AttnPattern all;
            all.kind = AttnKind::BlockSparse, all.causal = causal, all.block_sparse.block = 16, all.block_sparse.dilated_r = 1, all.block_sparse.dilated_window = 1 << 20;
            AttnPattern dense;
            dense.causal = causal;
            const std::string tag = std::string(causal ? "causal" : "non-causal") + (docs ? " docs" : "");
            double e = max_diff(run(all), run(dense));
            check_err(e <= 1e-12, "block-sparse, every block active == dense: " + tag, e, 1e-12);
            AttnPattern diag = all;
            diag.block_sparse.dilated_window = 16;  // block distance 0 only
            AttnPattern bd;
            bd.kind = AttnKind::Dilated, bd.causal = causal, bd.dilated.segments = {16}, bd.dilated.dilations = {1};
            e = max_diff(run(diag), run(bd));
            check_err(e <= 1e-12, "block-sparse, the diagonal block alone == dilated (w = b = 16, r = 1): " + tag, e, 1e-12);
            AttnPattern win = all;
            win.block_sparse.dilated_r = 0, win.block_sparse.dilated_window = 0, win.block_sparse.window = 1 << 20;
            e = max_diff(run(win), run(dense));
            check_err(e <= 1e-12, "block-sparse, a window longer than the sequence == dense: " + tag, e, 1e-12);
        }
    // Layout files: a good one, then each kind of bad line named with its line number.
    const std::string dir = "build/test_block_layouts";
    std::system(("mkdir -p " + dir).c_str());
    auto file = [&](const std::string& name, const std::string& text) {
        FILE* f = std::fopen((dir + "/" + name).c_str(), "w");
        std::fputs(text.c_str(), f);
        std::fclose(f);
        return dir + "/" + name;
    };
    auto L = BlockSparsePattern::read_layout_file(file("good.txt", "# diagonal and block 0\n0: 0\n1: 0 1\n2: 0 2\n"), true);
    check_err(L->n_blocks == 3 && L->heads == 1 && L->view().has(0, 2, 0) && !L->view().has(0, 2, 1) && L->view().has(5, 1, 1),
          "layout file: 3 rows read, shared by every head", 0, 0);
    const char* bad_files[][3] = {{"nocolon.txt", "0 0\n", "line 1: no ':'"},
                                  {"unsorted.txt", "0: 0\n1: 1 0\n", "line 2: key blocks not sorted"},
                                  {"above.txt", "0: 0\n1: 0 2\n", "line 2: a key block above the diagonal"},
                                  {"number.txt", "0: 0\nx: 1\n", "line 2: a bad query block number"},
                                  {"mixed.txt", "0: 0\n1/1: 1\n", "mixes 'Q:' and 'H/Q:' rows"},
                                  {"twice.txt", "0: 0\n0: 0\n", "listed twice"},
                                  {"head_gap.txt", "0/0: 0\n2/0: 0\n", "names heads up to 2 but not head 1"}};
    for (const auto& bf : bad_files) {
        std::string what;
        try {
            BlockSparsePattern::read_layout_file(file(bf[0], bf[1]), true);
        } catch (const FatalError& e) {
            what = e.what();
        }
        check_err(what.find(bf[2]) != std::string::npos, std::string("layout file refused: ") + what, 0, 0);
    }
    // A per-head file naming only head 0 is per-head, not shared: it fits one head, not two.
    AttnPattern head0;
    head0.kind = AttnKind::BlockSparse, head0.causal = true, head0.block_sparse.block = 4;
    head0.block_sparse.layout = BlockSparsePattern::read_layout_file(file("head0.txt", "0/0: 0\n0/1: 0 1\n"), true);
    check_err(pattern_heads_error(head0, 1).empty() && pattern_heads_error(head0, 2).find("but not head 1 of the 2") != std::string::npos,
              "a per-head layout naming only head 0: one head fits, two are refused: " + pattern_heads_error(head0, 2), 0, 0);
    AttnPattern none;
    none.kind = AttnKind::BlockSparse;
    none.block_sparse.block = 48;
    check_err(pattern_error(none).find("power of two") != std::string::npos, "block 48 refused: " + pattern_error(none), 0, 0);
    none.block_sparse.block = 64;
    check_err(pattern_error(none).find("needs a builder") != std::string::npos, "no builder refused: " + pattern_error(none), 0, 0);
    AttnPattern dens = none;
    dens.block_sparse.window = 128, dens.block_sparse.global = 64;
    const double d = BlockSparsePattern::density(dens, 4096, 1);
    // 64 causal block rows: row 0 has 1 active block, row 1 has 2, row 2 has 3, rows 3..63 have 4
    // (the window reaches 2 blocks back, plus the global block 0): 250 of 64 x 65 / 2.
    check_err(std::fabs(d - 250.0 / 2080) < 1e-12, "density of window 128 + global 64 at 4K tokens, b = 64: " + std::to_string(d) + " = 250/2080",
          std::fabs(d - 250.0 / 2080), 1e-12);
}

// The kernels' tile lists (block_sparse_tile_lists) against brute force, for whole sequences and
// for sides that are pieces of one (a ring step): every kept pair's tiles are listed, every
// listed tile pair holds a kept pair for some head, the transposed lists are the same pairs with
// the same cut flags, a pair not marked cut keeps every allowed (query, key) for every head, and
// the launch orders are permutations, longest list first.
static void test_block_sparse_tiles() {
    struct Sides {
        int N, q_pos0, q_n, k_pos0, k_n;
    };
    const std::vector<Sides> sides = {{1, 0, 1, 0, 1}, {37, 0, 37, 0, 37}, {101, 0, 101, 0, 101}, {101, 30, 40, 5, 50}, {101, 64, 37, 70, 20}};
    for (const AttnCase& c : attn_cases()) {
        if (c.pattern.kind != AttnKind::BlockSparse) continue;
        for (const Sides& sd : sides)
            for (auto [BM, BN] : {std::pair<int, int>{16, 16}, {32, 8}, {8, 32}}) {
                const int H = 3, N = sd.N;
                const TileLists t = block_sparse_tile_lists(c.pattern, N, H, BM, BN, sd.q_pos0, sd.q_n, sd.k_pos0, sd.k_n);
                const size_t cells = (size_t)t.n_q_tiles * t.n_k_tiles;
                std::vector<char> listed(cells, 0), cut(cells, 0), kept(cells, 0), dropped(cells, 0);
                for (int qt = 0; qt < t.n_q_tiles; qt++)
                    for (int i = t.q_ptr[qt]; i < t.q_ptr[qt + 1]; i++)
                        listed[(size_t)qt * t.n_k_tiles + t.k_of_q[i]] = 1, cut[(size_t)qt * t.n_k_tiles + t.k_of_q[i]] = t.k_of_q_cut[i];
                for (int h = 0; h < H; h++)
                    for (int i = 0; i < sd.q_n; i++)
                        for (int j = 0; j < sd.k_n; j++) {
                            const int q = sd.q_pos0 + i, k = sd.k_pos0 + j;
                            if (c.pattern.causal && k > q) continue;
                            (key_multiplicity(c.pattern, h, q, k, N) ? kept : dropped)[(size_t)(i / BM) * t.n_k_tiles + j / BN] = 1;
                        }
                int missing = 0, useless = 0, transposed = 0, not_full = 0, order = 0, full_pairs = 0;
                for (size_t i = 0; i < cells; i++) {
                    missing += kept[i] && !listed[i], useless += listed[i] && !kept[i];
                    not_full += listed[i] && !cut[i] && dropped[i];
                    full_pairs += listed[i] && !cut[i];
                }
                for (int kt = 0; kt < t.n_k_tiles; kt++)
                    for (int i = t.k_ptr[kt]; i < t.k_ptr[kt + 1]; i++) {
                        const size_t cell = (size_t)t.q_of_k[i] * t.n_k_tiles + kt;
                        transposed += !listed[cell] || cut[cell] != t.q_of_k_cut[i];
                    }
                transposed += t.q_of_k.size() != t.k_of_q.size();
                auto check_order = [&](const std::vector<int>& ord, const std::vector<int>& ptr) {
                    std::vector<char> seen(ord.size(), 0);
                    for (size_t r = 0; r < ord.size(); r++) {
                        order += ord[r] < 0 || ord[r] >= (int)ord.size() || seen[ord[r]]++;
                        if (r > 0) order += ptr[ord[r] + 1] - ptr[ord[r]] > ptr[ord[r - 1] + 1] - ptr[ord[r - 1]];
                    }
                };
                check_order(t.q_order, t.q_ptr);
                check_order(t.k_order, t.k_ptr);
                char sides_s[96];
                std::snprintf(sides_s, sizeof sides_s, "N %d, queries [%d, +%d) keys [%d, +%d)", N, sd.q_pos0, sd.q_n, sd.k_pos0, sd.k_n);
                check_err(missing == 0 && useless == 0 && transposed == 0 && not_full == 0 && order == 0,
                      "tile lists == brute force: " + c.name + ", " + sides_s + ", tiles " + std::to_string(BM) + "x" +
                          std::to_string(BN) + " (" + std::to_string(full_pairs) + " of " + std::to_string(t.k_of_q.size()) +
                          " pairs whole)",
                      missing + useless + transposed + not_full + order, 0);
            }
    }
    // The cut flags are not all set: a window's interior and the global columns are whole.
    AttnPattern w;
    w.kind = AttnKind::BlockSparse, w.block_sparse.block = 64, w.block_sparse.window = 512, w.block_sparse.global = 64;
    const TileLists t = block_sparse_tile_lists(w, 4096, 2, 64, 64);
    int whole = 0;
    for (char x : t.k_of_q_cut) whole += !x;
    check_err(whole > (int)t.k_of_q.size() * 3 / 4, "window 512 + global 64 at 4K, 64x64 tiles: most listed pairs are whole",
          whole, (int)t.k_of_q.size());
}

int main(int argc, char** argv) {
    return guarded_main([&] {
        SplitMix64 rng(attn_test_seed(argc, argv));
        test_tiled(rng);
        test_tiled_sized(rng);
        test_merge(rng);
        test_global_length(rng);
        test_modules();
        test_branchwise(rng);
        test_block_sparse(rng);
        test_block_sparse_tiles();
        return check_report();
    });
}
