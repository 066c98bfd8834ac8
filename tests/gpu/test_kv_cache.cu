// Incremental inference on the GPU (model/kv_cache_cuda.cuh, layers/cuda/attention_decode.cuh).
//   Kernels, on fresh random inputs with outputs poisoned first:
//     cache_append_cuda and cache_unpack_cuda move exactly the bits the CPU reference
//     (layers/attention_decode.h) moves; attention_decode_cuda matches the CPU reference in
//     float64 within bf16 tolerance, for D = 64 and 128, odd batch and piece sizes, dense and
//     dilated branches (segments that do not divide one another, a dilation above the head count),
//     at positions on and across segment borders; attention_decode_step_cuda gives the bits of
//     the four launches it replaces (rope, log-n, append, attention), NoPE and log-n included.
//   Models: a prompt prefilled in chunks, then decoded one token at a time, gives the logits of
//     the GPU's full forward over the whole sequence within bf16 tolerance: dense + dilated +
//     block-sparse layers (chunk path for every token), and dense + two dilated patterns (decoding
//     through attention_decode_step_cuda, as a CUDA graph and without, and through the four
//     launches it replaced: the same bits); the dilated
//     cache holds its bound from the start and never more; a saved and loaded cache decodes the
//     same bits; a control (a sequence missing its first token) shows the check can fail.
//   The pointer (model/pointer_cache_cuda.cuh): the cache's log-probabilities and losses, prefill
//     in chunks then decode, against the CPU model's full forward in fp64 (its mixture), at heads
//     of 64 and 128; a gathered copy goes on as its source; the same cache without the pointer's
//     copy (its gate shut) is far off (control).
// Prints PASS/FAIL lines and "N passed, M failed". --kernels: the kernel tests alone (for the
// sanitizers).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>
#include "model/kv_cache_cuda.cuh"
#include "model/kv_cache_file.h"
#include "tests/gpu/attention_cases.cuh"  // DevArena, download, as_double, to_bf16, check
#include "tests/gradcheck.h"

static void report(bool ok, const std::string& what, double err, double tol) {
    check(ok, what + strf(" err %.3g tol %.2g", err, tol));
}

// Branches of the given shapes (a dense one with dense_rows rows), empty, in float64 on the host
// (ref) and in `copies` bf16 copies on the device; then positions up to `last` appended to every
// one in chunks of 37, K/V/Q random, rounded to bf16 (from 0 for a dense layer; a dilated one
// from last - 300: earlier rows lie in other segments).
struct TestCaches {
    std::vector<std::vector<double>> host;  // (B, rows, 2C) per branch
    std::vector<CacheBranch<double>> ref;
    std::vector<std::vector<CacheBranch<bf16>>> dev;
};
static TestCaches filled_caches(gc::Rng& rng, DevArena& mem, const std::vector<CacheBranchShape>& shapes, int B, int H, int D,
                                long long dense_rows, long long last, int copies) {
    const int C = H * D;
    TestCaches t;
    t.host.resize(shapes.size());
    t.dev.resize(copies);
    for (size_t i = 0; i < shapes.size(); i++) {
        const long long rows = shapes[i].rows > 0 ? shapes[i].rows : dense_rows;
        t.host[i].assign((size_t)B * rows * 2 * C, 0.0);
        t.ref.push_back({shapes[i].w, shapes[i].r, t.host[i].data(), rows});
        for (auto& d : t.dev) d.push_back({shapes[i].w, shapes[i].r, mem.upload(to_bf16(t.host[i])), rows});
    }
    const bool dense = shapes[0].rows < 0;
    for (long long at = dense ? 0 : std::max(0LL, last - 300); at <= last;) {
        const int n = (int)std::min<long long>(37, last + 1 - at);
        std::vector<double> qkv((size_t)B * n * 3 * C);
        gc::fill_uniform(qkv.data(), qkv.size(), rng, -1.0, 1.0);
        const std::vector<bf16> qkv_bf = to_bf16(qkv);
        cache_append(t.ref, as_double(qkv_bf).data(), at, n, B, H, D);
        const int* at_dev = mem.upload(std::vector<int>{(int)at});
        for (auto& d : t.dev) cache_append_cuda(d, mem.upload(qkv_bf), at_dev, n, B, H, D, 0);
        at += n;
    }
    return t;
}

// The three kernels against the CPU reference: branches filled by appending chunks of random
// K/V rows up to position p, then one query row decoded at p.
static void test_decode_kernels(gc::Rng& rng, int D, int B, int H, const std::vector<CacheBranchShape>& shapes, long long p,
                                const DecodePieces& cut, const std::string& what, bool sink = false) {
    const int C = H * D;
    DevArena mem;
    TestCaches t = filled_caches(rng, mem, shapes, B, H, D, p + 1, p, 1);
    const std::vector<std::vector<double>>& host = t.host;
    std::vector<CacheBranch<double>>& ref = t.ref;
    const std::vector<CacheBranch<bf16>>& dev = t.dev[0];
    bool append_ok = true;
    for (size_t i = 0; i < shapes.size(); i++)
        append_ok = append_ok && as_double(download(dev[i].kv, host[i].size())) == host[i];
    report(append_ok, "cache_append_cuda == CPU, bit for bit: " + what, append_ok ? 0 : 1, 0);

    // One query row per sequence at p (its K/V already appended above): O and L vs float64.
    std::vector<double> q((size_t)B * C);
    gc::fill_uniform(q.data(), q.size(), rng, -1.0, 1.0);
    const std::vector<bf16> q_bf = to_bf16(q);
    const std::vector<double> q_r = as_double(q_bf);
    const double scale = 1.0 / std::sqrt((double)D);
    std::vector<double> want_o((size_t)B * C), want_l((size_t)B * H);
    // A sink per head (layers/attn_sink.h), near the rows' log-sum-exps so that it takes a share.
    std::vector<double> sinks(H);
    gc::fill_uniform(sinks.data(), sinks.size(), rng, -1.0, 4.0);
    const std::vector<bf16> sinks_bf = to_bf16(sinks);
    const std::vector<double> sinks_r = as_double(sinks_bf);
    attention_decode(want_o.data(), want_l.data(), q_r.data(), C, ref, p, B, H, D, scale, sink ? sinks_r.data() : nullptr);
    const int S = attention_decode_pieces(dev, cut);
    float *po = mem.alloc<float>((size_t)B * S * C, 0xff), *pl = mem.alloc<float>((size_t)B * S * H, 0xff);  // NaN poison
    bf16* d_o = mem.alloc<bf16>((size_t)B * C, 0xff);
    float* d_l = mem.alloc<float>((size_t)B * H, 0xff);
    attention_decode_cuda(d_o, d_l, mem.upload(q_bf), C, dev, mem.upload(std::vector<int>{(int)p}), B, H, D, (float)scale,
                          cut, po, pl, 0, sink ? mem.upload(sinks_bf) : nullptr);
    const std::vector<double> got_o = as_double(download(d_o, (size_t)B * C));
    const std::vector<double> got_l = as_double(download(d_l, (size_t)B * H));
    // bf16 output: rounding alone is up to 2^-9 relative; fp32 sums of <= 2K terms add far less.
    const double eo = gc::rel_error(got_o.data(), want_o.data(), got_o.size(), 1e-2);
    const double el = gc::rel_error(got_l.data(), want_l.data(), got_l.size(), 1e-3);
    char l_err[32];
    std::snprintf(l_err, sizeof l_err, "%.2g", el);
    report(eo < 8e-3 && el < 1e-4, "attention_decode_cuda == float64 CPU (O; L err " + std::string(l_err) + "): " + what, eo, 8e-3);

    // Unpacked rows for a chunk starting at p (positions lo .. p - 1) vs the CPU, bit for bit,
    // over poison: every element some branch keeps is written.
    long long lo = p;
    for (const CacheBranchShape& s : shapes) lo = std::min(lo, p / s.w * s.w);
    if (p > lo) {
        const long long rows = p - lo;
        std::vector<double> want((size_t)rows * 2 * C, NAN);
        bf16* d_rows = mem.alloc<bf16>((size_t)B * rows * 2 * C, 0xff);
        cache_unpack_cuda(d_rows, rows, dev, lo, p, B, H, D, 0);
        const std::vector<double> got = as_double(download(d_rows, (size_t)B * rows * 2 * C));
        size_t bad = 0;
        for (int b = 0; b < B; b++) {
            std::fill(want.begin(), want.end(), NAN);
            cache_unpack(want.data(), ref, lo, p, b, H, D);
            for (size_t i = 0; i < want.size(); i++) {
                const double g = got[(size_t)b * want.size() + i];
                bad += std::isnan(want[i]) ? !std::isnan(g) : g != want[i];  // unkept elements stay as they were
            }
        }
        report(bad == 0, "cache_unpack_cuda == CPU, bit for bit: " + what, (double)bad, 0);
    }
}

// attention_decode_step_cuda (one launch: rope, log-n, append, attention, merge) against the
// four launches it replaces, on two copies of the same cache: the same bits in O, the
// log-sum-exp and every cached row; and O against the CPU reference in float64. Two tokens in a row (p, p + 1): the second finds the tickets the first left at zero.
// slopes: the heads' learned log-n slopes (empty: the fixed factor).
static void test_decode_step(gc::Rng& rng, int D, int B, int H, const std::vector<CacheBranchShape>& shapes, long long p,
                             const DecodePieces& cut, float theta, int logn_base, const std::string& what,
                             const std::vector<double>& slopes = {}) {
    const int C = H * D;
    DevArena mem;
    TestCaches t = filled_caches(rng, mem, shapes, B, H, D, p + 2, p - 1, 2);  // rows before p, in both copies
    std::vector<CacheBranch<double>>& ref = t.ref;
    std::vector<CacheBranch<bf16>> &four = t.dev[0], &one = t.dev[1];  // the four launches' cache, the one launch's
    const int S = attention_decode_pieces(four, cut);
    float *po = mem.alloc<float>((size_t)B * S * C, 0xff), *pl = mem.alloc<float>((size_t)B * S * H, 0xff);
    int* tickets = mem.alloc<int>((size_t)B * H, 0);
    bf16* qkv = mem.alloc<bf16>((size_t)B * 3 * C, 0xff);
    const double scale = 1.0 / std::sqrt((double)D);
    const std::vector<bf16> slope_bf = to_bf16(slopes);
    const std::vector<double> slope_d = as_double(slope_bf);  // the reference reads the bf16 slopes the kernels do
    const bf16* slope_dev = slopes.empty() ? nullptr : mem.upload(slope_bf);
    const double* slope_ref = slopes.empty() ? nullptr : slope_d.data();
    double worst = 0;
    size_t diff = 0;
    for (long long pt = p; pt <= p + 1; pt++) {
        std::vector<double> pre((size_t)B * 3 * C);
        gc::fill_uniform(pre.data(), pre.size(), rng, -1.0, 1.0);
        const std::vector<bf16> pre_bf = to_bf16(pre);
        // The reference: attention_decode_step's pieces in float64, with the model's roundings of
        // the rotated (and scaled) q and k to bf16; without them the rounding of q and k alone
        // moves O's small elements by ~3% of the floor rel_error judges them by (measured).
        std::vector<double> want_o((size_t)B * C), want_l((size_t)B * H), qkv_r((size_t)B * 3 * C);
        const int pi = (int)pt;
        rope_forward(qkv_r.data(), as_double(pre_bf).data(), &pi, B, 1, H, D, theta);
        qkv_r = as_double(to_bf16(qkv_r));
        if (logn_base) {
            logn_scale_queries(qkv_r.data(), &pi, B, 1, H, D, logn_base, slope_ref);
            qkv_r = as_double(to_bf16(qkv_r));
        }
        cache_append(ref, qkv_r.data(), pt, 1, B, H, D);
        attention_decode(want_o.data(), want_l.data(), qkv_r.data(), 3 * C, ref, pt, B, H, D, scale);
        const bf16* pre_dev = mem.upload(pre_bf);
        const int* pos = mem.upload(std::vector<int>{(int)pt});
        bf16 *o4 = mem.alloc<bf16>((size_t)B * C, 0xff), *o1 = mem.alloc<bf16>((size_t)B * C, 0xff);
        float *l4 = mem.alloc<float>((size_t)B * H, 0xff), *l1 = mem.alloc<float>((size_t)B * H, 0xff);
        rope_forward_cuda(qkv, pre_dev, pos, B, 1, H, D, theta, 0);
        logn_scale_queries_cuda(qkv, pos, B, 1, H, D, logn_base, 0, slope_dev);
        cache_append_cuda(four, qkv, pos, 1, B, H, D, 0);
        attention_decode_cuda(o4, l4, qkv, 3 * C, four, pos, B, H, D, (float)scale, cut, po, pl, 0);
        CUDA_CHECK(cudaMemset(po, 0xff, (size_t)B * S * C * 4));  // poison again: the one launch writes its own
        CUDA_CHECK(cudaMemset(pl, 0xff, (size_t)B * S * H * 4));
        attention_decode_step_cuda(o1, l1, pre_dev, one, pos, B, H, D, (float)scale, theta, logn_base, cut, po, pl, tickets, 0,
                                   nullptr, slope_dev);
        const std::vector<bf16> a = download(o4, (size_t)B * C), b = download(o1, (size_t)B * C);
        const std::vector<float> la = download(l4, (size_t)B * H), lb = download(l1, (size_t)B * H);
        diff += gc::count_bit_mismatch(a.data(), b.data(), a.size()) + gc::count_bit_mismatch(la.data(), lb.data(), la.size());
        const std::vector<double> got = as_double(b);
        worst = std::max(worst, gc::rel_error(got.data(), want_o.data(), got.size(), 1e-2));
    }
    for (size_t i = 0; i < shapes.size(); i++) {
        const size_t n = (size_t)B * four[i].rows * 2 * C;
        const std::vector<bf16> a = download(four[i].kv, n), b = download(one[i].kv, n);
        diff += gc::count_bit_mismatch(a.data(), b.data(), n);
    }
    const std::vector<int> left = download(tickets, (size_t)B * H);
    for (int t : left) diff += t != 0;
    report(diff == 0, "attention_decode_step_cuda == rope + log-n + append + attention_decode_cuda, bit for bit (O, L, cache, "
                      "tickets back at 0): " + what, (double)diff, 0);
    report(worst < 8e-3, "attention_decode_step_cuda == float64 CPU (rope, log-n, append, attention_decode): " + what, worst, 8e-3);
}

// Logits of every position through the cache (prefill in chunks of `chunk` up to `prompt`, then
// one token at a time) against the full forward's; the largest error.
static double cached_vs_full(CudaBackend& full, const std::vector<std::vector<float>>& want, const std::vector<int>& tokens,
                             int B, int N, int chunk, int prompt, std::vector<float>* all_logits, const GPTConfig& cfg,
                             bool* dilated_fixed) {
    KVCacheCuda cache(full, B, chunk);
    cache.reserve(N / 2);  // half the sequence up front: the rest grows as it goes
    const size_t dilated_bytes = cache.layer_bytes(1);
    std::vector<float> got(cfg.vocab_size);
    std::vector<int> piece;
    double worst = 0;
    for (int at = 0; at < N;) {
        const int n = at < prompt ? std::min(chunk, prompt - at) : 1;
        piece.clear();
        for (int b = 0; b < B; b++) piece.insert(piece.end(), tokens.begin() + b * N + at, tokens.begin() + b * N + at + n);
        cache.append(piece.data(), n);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < n; i++) {
                cache.logits(got.data(), b, i);
                worst = std::max(worst, gc::norm_rel_error(got.data(), want[(size_t)b * N + at + i].data(), cfg.vocab_size));
                if (all_logits) all_logits->insert(all_logits->end(), got.begin(), got.end());
            }
        at += n;
        *dilated_fixed = *dilated_fixed && cache.layer_bytes(1) == dilated_bytes;
    }
    if (cache.layer_bytes(0) < (size_t)B * N * 2 * cfg.n_embd * sizeof(bf16)) *dilated_fixed = false;  // the dense layer: every row
    return worst;
}

// Pieces of `rows` rows in every branch (a dense one in at most 256): short sequences in many.
static DecodePieces pieces_of(int rows) { return DecodePieces{rows, 256, rows}; }

// The pointer's cache against the CPU's full forward in fp64 (test_model_cpu checks the CPU's own
// cache against the same forward): log-probabilities of every position through chunks then
// decoding, each chunk's losses, and a gathered copy's last row.
static void test_pointer_cache(gc::Rng& rng, int head_dim) {
    GPTConfig cfg;
    cfg.vocab_size = 1003, cfg.n_layer = 2, cfg.n_embd = 3 * head_dim, cfg.n_head = 3, cfg.nope_layers = {1}, cfg.pointer = true;
    const int B = 2, N = 200, chunk = 48, prompt = 120;
    std::vector<int> tokens(B * N), targets(B * N);
    for (int& t : tokens) t = rng.randint(0, 22);  // tokens that recur: the copy weighs
    for (int b = 0; b < B; b++)
        for (int t = 0; t < N; t++) targets[b * N + t] = t + 1 < N ? tokens[b * N + t + 1] : -1;
    std::vector<float> w(param_layout(cfg).back().offset + param_layout(cfg).back().size);
    init_gpt_weights(w.data(), cfg, 11);
    for (float& x : w) x = __bfloat162float(__float2bfloat16(x + (float)rng.uniform(-0.02, 0.02)));
    w[param_layout(cfg).back().offset] = 0.0f;  // the gate half open
    GPT<double> ref(cfg);
    for (size_t i = 0; i < w.size(); i++) ref.params[i] = w[i];
    ref.forward(tokens.data(), targets.data(), nullptr, B, N);
    const std::vector<double> ref_losses = ref.losses;
    double copied = 0;
    for (double pc : ref.ptr_pcopy) copied += pc > 0.05;
    ref.forward(tokens.data(), nullptr, nullptr, B, N);
    CudaBackend gpu(cfg, AttnBackend::Flash);
    gpu.set_params(w.data());
    KVCacheCuda cache(gpu, B, chunk);
    std::vector<float> got(cfg.vocab_size), losses;
    std::vector<double> want(cfg.vocab_size);
    std::vector<int> piece, piece_targets;
    double worst = 0, worst_loss = 0;
    for (int at = 0; at < N;) {
        const int n = at < prompt ? std::min(chunk, prompt - at) : 1;
        piece.clear(), piece_targets.clear();
        for (int b = 0; b < B; b++) {
            piece.insert(piece.end(), tokens.begin() + b * N + at, tokens.begin() + b * N + at + n);
            piece_targets.insert(piece_targets.end(), targets.begin() + b * N + at, targets.begin() + b * N + at + n);
        }
        cache.append(piece.data(), n);
        losses.assign((size_t)B * n, 0.0f);
        cache.losses(losses.data(), piece_targets.data());
        for (int b = 0; b < B; b++)
            for (int i = 0; i < n; i++) {
                cache.logits(got.data(), b, i);
                ref.logits_at(want.data(), b, at + i);
                worst = std::max(worst, gc::norm_rel_error(got.data(), want.data(), cfg.vocab_size));
                const double rl = ref_losses[(size_t)b * N + at + i];
                worst_loss = std::max(worst_loss, std::fabs(losses[(size_t)b * n + i] - rl) / std::max(rl, 1.0));
            }
        at += n;
    }
    const std::string d = "pointer cache, heads of " + std::to_string(head_dim);
    report(copied > 50, d + ": targets the CPU's pointer copies (p_copy > 0.05)", copied, 50);
    report(worst < 2e-2, d + ": prefill in chunks + decode == the CPU's full forward (log-probabilities, bf16)", worst, 2e-2);
    report(worst_loss < 1e-2, d + ": each chunk's losses == the CPU's (relative, bf16)", worst_loss, 1e-2);
    KVCacheCuda copy(gpu, B, chunk);
    copy.gather(cache, {1, 0});
    copy.logits(got.data(), 0, 0);
    ref.logits_at(want.data(), 1, N - 1);
    const double e = gc::norm_rel_error(got.data(), want.data(), cfg.vocab_size);
    report(e < 2e-2, d + ": a gathered copy's last row == its source's", e, 2e-2);
    w[param_layout(cfg).back().offset] = -1e4f;  // the gate shut: the language model alone
    gpu.set_params(w.data());
    std::vector<int> first_rows(tokens.begin(), tokens.begin() + chunk);
    KVCacheCuda shut_chunk(gpu, 1, chunk);
    shut_chunk.append(first_rows.data(), chunk);
    shut_chunk.logits(got.data(), 0, chunk - 1);
    ref.logits_at(want.data(), 0, chunk - 1);
    const double c = gc::norm_rel_error(got.data(), want.data(), cfg.vocab_size);
    report(c > 5e-2, d + ": the same weights with the gate shut are far from the mixture (control)", c, 5e-2);
}

static int main_body(bool kernels_only) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        std::printf("test_kv_cache: no GPU, skipped\n0 passed, 0 failed\n");
        return 0;
    }
    gc::Rng rng(20261125);
    {
        const std::vector<CacheBranchShape> longnet = pattern_cache_branches(
            dilated_pattern(true, {64, 96, 200}, {1, 3, 16}));  // 200 / 16 with 5 heads: classes no head keeps
        const std::vector<CacheBranchShape> dense = pattern_cache_branches(AttnPattern{});
        for (int D : {64, 128}) {
            test_decode_kernels(rng, D, 3, 5, longnet, 599, pieces_of(7), "D " + std::to_string(D) + ", dilated 64/96/200 r 1/3/16, p 599");
            test_decode_kernels(rng, D, 3, 5, longnet, 600, pieces_of(16), "D " + std::to_string(D) + ", dilated, p 600 (a border of all three)");
            test_decode_kernels(rng, D, 2, 3, dense, 1030, pieces_of(100), "D " + std::to_string(D) + ", dense, p 1030, pieces of >= 100");
        }
        test_decode_kernels(rng, 64, 1, 12, dense, 5000, pieces_of(7), "D 64, dense, 12 heads, p 5000: 251 pieces of 20 (at most 256)");
        for (int D : {64, 128}) {  // a sink mixed in as one more piece of output zero
            test_decode_kernels(rng, D, 3, 5, longnet, 599, pieces_of(7), "D " + std::to_string(D) + ", dilated, p 599, sinks", true);
            test_decode_kernels(rng, D, 2, 3, dense, 1030, pieces_of(100), "D " + std::to_string(D) + ", dense, p 1030, sinks", true);
        }
        for (int D : {64, 128}) {
            const std::string d = "D " + std::to_string(D);
            test_decode_step(rng, D, 3, 5, longnet, 599, pieces_of(7), 10000.0f, 0, d + ", dilated 64/96/200 r 1/3/16, p 599, 600");
            test_decode_step(rng, D, 2, 5, longnet, 191, pieces_of(16), 0.0f, 100, d + ", dilated, NoPE with log-n from 100, p 191, 192");
            test_decode_step(rng, D, 2, 5, longnet, 191, pieces_of(16), 0.0f, 100,
                             d + ", dilated, NoPE with learned log-n slopes from 100, p 191, 192", {0.05, 0.4, 1.5, 0.9, 3.0});
            test_decode_step(rng, D, 2, 3, dense, 1030, pieces_of(100), 500.0f, 0, d + ", dense, theta 500, p 1030, 1031");
        }
        test_decode_step(rng, 64, 1, 12, dense, 5000, pieces_of(7), 10000.0f, 300, "D 64, dense, 12 heads, p 5000: 251 pieces, log-n from 300");
        // The model's cut (DecodePieces{}): dilated pieces of 256 rows, walked in 2 tiles each,
        // both fetched into L2 before the wait; the dense layer's 40 pieces of 128.
        const std::vector<CacheBranchShape> long_segments = pattern_cache_branches(dilated_pattern(true, {2048, 4096}, {1, 2}));
        test_decode_kernels(rng, 64, 2, 4, long_segments, 4095, DecodePieces{}, "D 64, dilated 2048/4096 r 1/2, p 4095, the model's cut");
        test_decode_step(rng, 64, 2, 4, long_segments, 6000, DecodePieces{}, 10000.0f, 0, "D 64, dilated 2048/4096 r 1/2, p 6000, 6001, the model's cut");
        test_decode_step(rng, 64, 1, 4, dense, 5000, DecodePieces{}, 10000.0f, 0, "D 64, dense, p 5000, 5001, the model's cut");
    }
    if (kernels_only) {  // what compute-sanitizer runs (scripts/device.sh sanitizers): our kernels, no cuBLASLt
        return check_report();
    }
    test_pointer_cache(rng, 64);
    test_pointer_cache(rng, 128);

    GPTConfig cfg;
    cfg.vocab_size = 1003, cfg.n_layer = 3, cfg.n_embd = 192, cfg.n_head = 3;  // D = 64
    const AttnPattern dil = dilated_pattern(true, {32, 64}, {1, 2});
    const AttnPattern dil2 = dilated_pattern(true, {24, 40}, {4, 3});  // neither divides the other
    AttnPattern bs = make_pattern(AttnKind::BlockSparse, true);
    bs.block_sparse.block = 16, bs.block_sparse.window = 40, bs.block_sparse.global = 8;
    AttnPattern fx = make_pattern(AttnKind::Fixed, true);  // blocks of 32: chunks cross them
    fx.fixed.stride = 32, fx.fixed.summary = 4;
    const int B = 2, N = 300, chunk = 48, prompt = 150;  // chunks cross segment borders
    KVCacheCuda::kDecodePieces = pieces_of(16);          // the dense layer and every branch in several pieces
    std::vector<int> tokens(B * N);
    for (int& t : tokens) t = rng.randint(0, cfg.vocab_size - 1);
    for (int with_bs = 2; with_bs >= 0; with_bs--) {
        cfg.layer_attn = {AttnPattern{}, dil, with_bs == 2 ? fx : with_bs ? bs : dil2};
        // With the fixed layer, layers 0 and 2 NoPE with log-n attention from position 100 and a q/k
        // convolution of 4: the prefill's chunks and the decoded tokens scale their queries and
        // convolve (reading the rows the chunks before kept) as the full forward does.
        // Without the block-sparse layer (every layer decodes a token directly: the one-launch
        // step, the graph and the four launches below), layers 0 and 2 NoPE, a q/k convolution of
        // 3 in layer 2 only (--qk-conv-layers 2), so a step mixes convolved and plain NoPE layers.
        cfg.nope_layers = with_bs == 2 || with_bs == 0 ? std::vector<int>{0, 2} : std::vector<int>{};
        cfg.logn_attn = with_bs == 2 ? 100 : with_bs == 0 ? 60 : 0;
        cfg.logn_learn = with_bs == 0;  // learned slopes where every layer decodes in the one-launch step
        cfg.qk_conv = with_bs == 2 ? 4 : with_bs == 0 ? 3 : 0;
        if (with_bs == 0) cfg.qk_conv_layers = {2};
        // Attention sinks without the fixed layer: in the decode step's merge (direct decoding) and
        // after a chunk's attention (prefill; with the block-sparse layer, decoding too).
        cfg.attn_sink = with_bs < 2;
        CudaBackend full(cfg, AttnBackend::Flash);
        full.init_weights(5);
        if (cfg.qk_conv || cfg.attn_sink) {  // convolutions off the identity, so that the rows before a chunk count; sinks that
                                             // weigh; slopes of their own, a head's unlike another's
            std::vector<float> w(full.num_params());
            full.get_params(w.data());
            for (const ParamTensor& t : param_layout(cfg)) {
                if (t.name.find("qk_conv") != std::string::npos)
                    for (size_t i = 0; i < t.size; i++) w[t.offset + i] += (float)rng.uniform(-0.5, 0.5);
                if (t.name.find("attn.sink") != std::string::npos)
                    for (size_t i = 0; i < t.size; i++) w[t.offset + i] = (float)rng.uniform(-1, 2);
                if (t.name.find("attn.logn_slope") != std::string::npos)
                    for (size_t i = 0; i < t.size; i++) w[t.offset + i] = (float)rng.uniform(0.05, 1.5);
            }
            full.set_params(w.data());
        }
        full.forward(tokens.data(), nullptr, nullptr, B, N, nullptr);
        std::vector<std::vector<float>> want((size_t)B * N, std::vector<float>(cfg.vocab_size));
        for (int b = 0; b < B; b++)
            for (int t = 0; t < N; t++) full.logits_at(want[(size_t)b * N + t].data(), b, t);
        const std::string layers = with_bs == 2 ? "dense + dilated + fixed l32 c4, NoPE layers 0, 2 with log-n from 100, q/k conv 4"
                                   : with_bs   ? "dense + dilated + block-sparse, sinks"
                                               : "dense + dilated + dilated 24/40 r 4/3, NoPE layers 0, 2 with learned log-n slopes from 60, "
                                                 "q/k conv 3 in layer 2, sinks";
        bool fixed = true;
        std::vector<float> graph_logits, eager_logits;
        KVCacheCuda::kUseGraphs = true;
        const double worst = cached_vs_full(full, want, tokens, B, N, chunk, prompt, &graph_logits, cfg, &fixed);
        report(worst < 2e-2, "GPU cache, prefill in chunks + decode == full forward (bf16): " + layers, worst, 2e-2);
        report(fixed, "dilated cache: sum w_i/r_i packed rows from the start, never more; dense keeps all", fixed ? 0 : 1, 0);
        if (!with_bs) {
            KVCacheCuda::kUseGraphs = false;
            cached_vs_full(full, want, tokens, B, N, chunk, prompt, &eager_logits, cfg, &fixed);
            KVCacheCuda::kUseGraphs = true;
            const size_t diff = gc::count_bit_mismatch(graph_logits.data(), eager_logits.data(), graph_logits.size());
            report(diff == 0 && graph_logits.size() == eager_logits.size(), "decode as a CUDA graph == a launch per kernel, bit for bit",
                   (double)diff, 0);
            std::vector<float> four_logits;
            KVCacheCuda::kDecodeOneLaunch = false;
            cached_vs_full(full, want, tokens, B, N, chunk, prompt, &four_logits, cfg, &fixed);
            KVCacheCuda::kDecodeOneLaunch = true;
            const size_t diff4 = gc::count_bit_mismatch(graph_logits.data(), four_logits.data(), graph_logits.size());
            report(diff4 == 0 && graph_logits.size() == four_logits.size(),
                   "decode with a token's attention in one launch == in four (rope, log-n, append, attention), bit for bit",
                   (double)diff4, 0);
            std::vector<float> plain_logits;
            g_pdl = false;
            cached_vs_full(full, want, tokens, B, N, chunk, prompt, &plain_logits, cfg, &fixed);
            g_pdl = true;
            const size_t diffp = gc::count_bit_mismatch(graph_logits.data(), plain_logits.data(), graph_logits.size());
            report(diffp == 0 && graph_logits.size() == plain_logits.size(),
                   "decode with early launches (pdl.cuh) == every launch after the one before, bit for bit", (double)diffp, 0);
        }
        // Saved to a file, loaded into a fresh cache: decodes the same bits.
        KVCacheCuda cache(full, B, chunk);
        for (int at = 0; at < prompt; at += chunk) {
            const int n = std::min(chunk, prompt - at);
            std::vector<int> piece;
            for (int b = 0; b < B; b++) piece.insert(piece.end(), tokens.begin() + b * N + at, tokens.begin() + b * N + at + n);
            cache.append(piece.data(), n);
        }
        for (int step = 0; step < 3; step++) {
            std::vector<int> next(B, 3 + step);
            cache.append(next.data(), 1);
        }
        std::vector<float> params(full.num_params());
        full.get_params(params.data());
        const std::string fp = weights_fingerprint(params), path = "kv_cache_test.safetensors";
        save_kv_cache(path, cache, cfg, fp);
        KVCacheCuda loaded(full, B, chunk);
        load_kv_cache(path, loaded, cfg, fp, B);
        std::vector<float> a(cfg.vocab_size), c(cfg.vocab_size);
        size_t diff = 0;
        for (int step = 0; step < 40; step++) {  // past the 64-row segment border
            std::vector<int> next(B, 7 + step);
            cache.append(next.data(), 1), loaded.append(next.data(), 1);
            for (int b = 0; b < B; b++) {
                cache.logits(a.data(), b, 0), loaded.logits(c.data(), b, 0);
                diff += gc::count_bit_mismatch(a.data(), c.data(), a.size());
            }
        }
        std::remove(path.c_str());
        report(diff == 0, "KV cache saved and loaded: 40 decode steps the same bits: " + layers, (double)diff, 0);
        if (!with_bs) {  // one context replicated into 3 sequences, each then fed its own tokens
            KVCacheCuda one(full, 1, chunk), three(full, 3, chunk);
            for (int at = 0; at < prompt; at += chunk) one.append(tokens.data() + at, std::min(chunk, prompt - at));
            three.replicate(one);
            double worst3 = 0;
            for (int step = 0; step < 30; step++) {  // sequences 0 and 2 go on as the test's first sequence, 1 elsewhere
                std::vector<int> next{tokens[prompt + step], 11 + step, tokens[prompt + step]};
                three.append(next.data(), 1);
                for (int b : {0, 2}) {
                    three.logits(a.data(), b, 0);
                    worst3 = std::max(worst3, gc::norm_rel_error(a.data(), want[prompt + step].data(), cfg.vocab_size));
                }
            }
            report(worst3 < 2e-2, "a context replicated into 3 sequences decoding their own tokens == full forward", worst3, 2e-2);
            // Two contexts prefilled together, gathered into 4 sequences in another order (as
            // infer --tasks shares a context among its questions): each decodes as its source.
            KVCacheCuda two(full, B, chunk), four(full, 4, 1);
            for (int at = 0; at < prompt; at += chunk) {
                const int n = std::min(chunk, prompt - at);
                std::vector<int> piece;
                for (int b = 0; b < B; b++) piece.insert(piece.end(), tokens.begin() + b * N + at, tokens.begin() + b * N + at + n);
                two.append(piece.data(), n);
            }
            const std::vector<int> from{1, 0, 1, 0};
            four.reserve(N);
            four.gather(two, from);
            double worst4 = 0;
            for (int step = 0; step < 30; step++) {
                std::vector<int> next;
                for (int f : from) next.push_back(tokens[f * N + prompt + step]);
                four.append(next.data(), 1);
                for (int q = 0; q < 4; q++) {
                    four.logits(a.data(), q, 0);
                    worst4 = std::max(worst4, gc::norm_rel_error(a.data(), want[(size_t)from[q] * N + prompt + step].data(), cfg.vocab_size));
                }
            }
            report(worst4 < 2e-2, "two contexts gathered into 4 sequences (1, 0, 1, 0), each decoding as its source == full forward",
                   worst4, 2e-2);
        }
        {  // The attention probe (model/attention_probe.h): each query's weights over all its keys
           // sum to 1 in every measured layer and head (the flash kernel's log-sum-exp against the
           // probe's own dot products), the same over chunks of 48 and one chunk of 300. With
           // sinks the keys' weights sum to 1 less the sink's share: never above 1, and below it.
            const std::vector<long long> queries{5, 47, 48, 150, 299};
            std::vector<ProbePair> pairs;
            for (long long q : queries)
                for (long long k = 0; k <= q; k++) pairs.push_back({q, k});
            auto probe_run = [&](int ch) {
                AttnProbe pr;
                pr.reset(pairs, cfg.n_layer, cfg.n_head);
                KVCacheCuda one(full, 1, ch);
                one.set_probe(&pr);
                for (int at = 0; at < N; at += ch) one.append(tokens.data() + at, std::min(ch, N - at));
                return pr;
            };
            const AttnProbe a = probe_run(chunk), b = probe_run(N);
            double worst_sum = 0, worst_diff = 0, sink_share = 0;
            int measured = 0;
            for (int l = 0; l < cfg.n_layer; l++) {
                if (!pattern_cache_keeps_every_row(cfg.attn(l))) continue;
                measured++;
                for (int h = 0; h < cfg.n_head; h++) {
                    size_t p = 0;
                    for (long long q : queries) {
                        double sum = 0;
                        for (long long k = 0; k <= q; k++, p++) {
                            sum += a.at(p, l, h);
                            const double d = std::fabs(a.at(p, l, h) - b.at(p, l, h));
                            worst_diff = std::isnan(d) ? INFINITY : std::max(worst_diff, d);
                        }
                        const double off = cfg.attn_sink ? sum - 1 : std::fabs(sum - 1);
                        worst_sum = std::isnan(sum) ? INFINITY : std::max(worst_sum, off);
                        sink_share = std::max(sink_share, 1 - sum);
                    }
                }
            }
            if (cfg.attn_sink) {
                report(measured >= 1 && worst_sum < 1e-2, "attention probe: each query's weights over its keys sum to at most 1: " + layers,
                       worst_sum, 1e-2);
                report(sink_share > 1e-2, "attention probe: the sinks take a share of some query's weight: " + layers, sink_share, 1e-2);
            } else {
                report(measured >= 1 && worst_sum < 1e-2, "attention probe: each query's weights over its keys sum to 1: " + layers, worst_sum, 1e-2);
            }
            report(worst_diff < 1e-3, "attention probe: chunks of 48 == one chunk of 300: " + layers, worst_diff, 1e-3);
        }
        if (with_bs) {
            KVCacheCuda off(full, B, chunk);
            off.append(tokens.data() + 1, 1);  // sequence 0 with its first token missing
            std::vector<float> got(cfg.vocab_size);
            off.logits(got.data(), 0, 0);
            const double e = gc::norm_rel_error(got.data(), want[0].data(), cfg.vocab_size);
            report(e > 5e-2, "another token at position 0 gives other logits (control)", e, 5e-2);
        }
    }
    return check_report();
}

// --kernels: the kernel tests alone.
int main(int argc, char** argv) {
    return guarded_main([&] { return main_body(argc > 1 && std::string(argv[1]) == "--kernels"); });
}
