// The whole GPT on the GPU against the CPU reference: loss, logits and every parameter's
// gradient on a small config (with odd sizes and a document mask), for both attention
// backends, then a few AdamW steps whose losses must track the CPU run.
// bf16 weights and activations put the GPU within about 1e-2 of the fp32/fp64 reference;
// a negative control (gradients of another batch) shows the comparison can fail.
// Also: deterministic mode (two runs of a few AdamW steps bit-identical, dense, dilated and block-sparse, at
// T = 1024), the same bits under every recompute policy (model/recompute.h), out-of-vocabulary tokens and targets refused with the row and position named,
// and data parallelism's gradient buckets against one sum after the backward.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "model/gpt_cuda.cuh"
#include "tests/check.h"
#include "tests/gradcheck.h"

static void report(bool ok, const std::string& what, double err, double tol) {
    check(ok, strf("%-60s err %.3g tol %.2g", what.c_str(), err, tol));
}

static float round_bf16(float x) { return __bfloat162float(__float2bfloat16(x)); }

struct Batch {
    int B, T;
    std::vector<int> tokens, targets, doc_start;
};

static Batch make_batch(gc::Rng& rng, int B, int T, int V, bool doc_mask) {
    Batch b{B, T, {}, {}, {}};
    for (int i = 0; i < B * T; i++) b.tokens.push_back(rng.randint(0, V - 1)), b.targets.push_back(rng.randint(0, V - 1));
    b.targets[5] = -1;
    for (int r = 0; r < B; r++)
        for (int t = 0; t < T; t++) b.doc_start.push_back(doc_mask && r == B - 1 && t >= T / 3 ? T / 3 : 0);
    return b;
}

static void compare_model(AttnBackend attn, const char* name, uint64_t seed, std::vector<AttnPattern> layer_attn = {},
                          std::vector<int> nope_layers = {}, int logn_attn = 0, int qk_conv = 0, std::vector<int> qk_conv_layers = {},
                          bool attn_sink = false, bool pointer = false, int head_dim = 64, int pointer_ids = 23, bool logn_learn = false) {
    gc::Rng rng(seed);
    GPTConfig cfg;
    cfg.vocab_size = 1003, cfg.n_layer = 2, cfg.n_embd = 3 * head_dim, cfg.n_head = 3;
    cfg.pointer = pointer;
    cfg.layer_attn = layer_attn;  // empty: every layer dense
    cfg.nope_layers = nope_layers;
    cfg.logn_attn = logn_attn;
    cfg.logn_learn = logn_learn;
    cfg.qk_conv = qk_conv;
    cfg.qk_conv_layers = qk_conv_layers;
    cfg.attn_sink = attn_sink;
    const bool doc_mask = attn == AttnBackend::Flash;  // cuDNN has no document mask
    // A pointer's copy needs targets that earlier tokens hold: ids from a few for it (from 2, a
    // sequence's groups outgrow a tile of the pointer's kernels: kPointerTile).
    const Batch b = make_batch(rng, 3, 131, pointer ? pointer_ids : cfg.vocab_size, doc_mask);
    const int* ds = doc_mask ? b.doc_start.data() : nullptr;

    // Both start from the same weights, rounded to bf16 (what the GPU computes with).
    std::vector<float> w(param_layout(cfg).back().offset + param_layout(cfg).back().size);
    init_gpt_weights(w.data(), cfg, seed);
    for (float& x : w) x = round_bf16(x + (float)rng.uniform(-0.02, 0.02));
    for (const ParamTensor& t : param_layout(cfg))  // sinks that take a share of every row: their gradient matters
        if (t.name.find("attn.sink") != std::string::npos)
            for (size_t i = 0; i < t.size; i++) w[t.offset + i] = round_bf16((float)rng.uniform(-1, 2));
        else if (t.name.find("attn.logn_slope") != std::string::npos)  // a head's slope unlike another's
            for (size_t i = 0; i < t.size; i++) w[t.offset + i] = round_bf16((float)rng.uniform(0.05, 1.5));
        else if (t.name == "ptr.gate.bias")  // a gate half open: both sides of the mixture carry gradient
            w[t.offset] = 0.0f;
    GPT<double> ref(cfg);
    for (size_t i = 0; i < w.size(); i++) ref.params[i] = w[i];
    CudaBackend gpu(cfg, attn);
    gpu.set_params(w.data());

    const double loss_ref = ref.forward(b.tokens.data(), b.targets.data(), ds, b.B, b.T);
    ref.zero_grad();
    ref.backward();
    const float loss_gpu = gpu.forward_backward(b.tokens.data(), b.targets.data(), ds, b.B, b.T);
    const double lerr = std::fabs(loss_gpu - loss_ref) / loss_ref;
    report(lerr < 5e-3, std::string(name) + ": loss vs CPU fp64", lerr, 5e-3);

    std::vector<float> g(w.size());
    gpu.get_grads(g.data());
    double worst = 0;
    std::string worst_name;
    for (const ParamTensor& t : param_layout(cfg)) {
        const double e = gc::norm_rel_error(g.data() + t.offset, ref.grads.data() + t.offset, t.size);
        if (!(e <= worst)) worst = e, worst_name = t.name;
    }
    report(worst < 3e-2, std::string(name) + ": every gradient tensor (worst " + worst_name + ")", worst, 3e-2);
    if (pointer) {  // the copy carried weight: the check above saw the gather's terms
        double copied = 0;
        for (double pc : ref.ptr_pcopy) copied += pc > 0.05;
        report(copied > 50, std::string(name) + ": targets the pointer copies (p_copy > 0.05)", copied, 50);
        const float loss_fwd = gpu.forward(b.tokens.data(), b.targets.data(), ds, b.B, b.T, nullptr);
        report(std::fabs(loss_fwd - loss_ref) / loss_ref < 5e-3, std::string(name) + ": the forward's loss (no backward) vs CPU fp64",
               std::fabs(loss_fwd - loss_ref) / loss_ref, 5e-3);
    }

    // Negative control: another batch's gradients must be far off.
    const Batch other = make_batch(rng, 3, 131, cfg.vocab_size, doc_mask);
    gpu.forward_backward(other.tokens.data(), other.targets.data(), ds, b.B, b.T);
    gpu.get_grads(g.data());
    const double control = gc::norm_rel_error(g.data(), ref.grads.data(), w.size());
    report(control > 0.3, std::string(name) + ": negative control (other batch) is rejected", control, 0.3);

    if (pointer) return;  // its output is a mixture, which logits_at refuses (the KV cache will serve it)
    // Logits of a few positions, after an inference forward.
    gpu.forward(b.tokens.data(), nullptr, ds, b.B, b.T, nullptr);
    ref.forward(b.tokens.data(), nullptr, ds, b.B, b.T);
    std::vector<float> lg(cfg.vocab_size);
    std::vector<double> lr(cfg.vocab_size);
    double lerr_max = 0;
    for (int bt : {0, 77, b.B * b.T - 1}) {
        gpu.logits_at(lg.data(), bt / b.T, bt % b.T);
        ref.logits_at(lr.data(), bt / b.T, bt % b.T);
        lerr_max = std::max(lerr_max, gc::norm_rel_error(lg.data(), lr.data(), cfg.vocab_size));
    }
    report(lerr_max < 2e-2, std::string(name) + ": logits at 3 positions", lerr_max, 2e-2);
}

// Ten AdamW steps on one batch from the same start: the GPU's losses follow the CPU's down.
static void compare_training(uint64_t seed) {
    gc::Rng rng(seed);
    GPTConfig cfg;
    cfg.vocab_size = 515, cfg.n_layer = 2, cfg.n_embd = 128, cfg.n_head = 2;
    CpuBackend cpu(cfg);
    CudaBackend gpu(cfg, AttnBackend::Flash);
    std::vector<float> w(cpu.num_params());
    init_gpt_weights(w.data(), cfg, seed);
    for (float& x : w) x = round_bf16(x);
    cpu.set_params(w.data());
    gpu.set_params(w.data());
    double worst = 0;
    float first = 0, last = 0;
    const Batch b = make_batch(rng, 4, 64, cfg.vocab_size, true);  // one batch: its loss must fall
    for (int s = 1; s <= 10; s++) {
        const float lc = cpu.forward_backward(b.tokens.data(), b.targets.data(), b.doc_start.data(), b.B, b.T);
        const float lg = gpu.forward_backward(b.tokens.data(), b.targets.data(), b.doc_start.data(), b.B, b.T);
        cpu.adamw_step(1e-3f, clip_scale(cpu.grad_norm(), 1.0f), AdamWConfig{}, s);
        gpu.adamw_step(1e-3f, clip_scale(gpu.grad_norm(), 1.0f), AdamWConfig{}, s);
        worst = std::max(worst, (double)std::fabs(lc - lg) / lc);
        if (s == 1) first = lg;
        last = lg;
    }
    report(worst < 1e-2, "10 training steps: GPU losses track the CPU's", worst, 1e-2);
    report(last < first, "10 training steps: the GPU loss falls", last / first, 1.0);
}

// ------------------------------------------------------------------------------------------------
// Determinism (CudaBackend's deterministic mode): everything a training run keeps, after a few
// AdamW steps from the same start on the same batches, bit for bit.

struct TrainTrace {
    std::vector<float> losses, grads_first, grads_last, params, m, v;
    std::vector<double> norms;
};

// AdamW steps on batches[0..n-2], then a forward_backward of the last batch (grads_last).
static TrainTrace train_trace(const GPTConfig& cfg, bool deterministic, const std::vector<float>& w,
                              const std::vector<Batch>& batches, Recompute recompute = Recompute::None) {
    CudaBackend gpu(cfg, AttnBackend::Flash, deterministic);
    gpu.set_recompute(recompute);
    gpu.set_params(w.data());
    TrainTrace r;
    const size_t n = gpu.num_params();
    for (size_t s = 0; s < batches.size(); s++) {
        const Batch& b = batches[s];
        r.losses.push_back(gpu.forward_backward(b.tokens.data(), b.targets.data(), b.doc_start.data(), b.B, b.T));
        if (s == 0) r.grads_first.resize(n), gpu.get_grads(r.grads_first.data());
        if (s + 1 == batches.size()) break;
        const double norm = gpu.grad_norm();
        r.norms.push_back(norm);
        gpu.adamw_step(1e-3f, clip_scale(norm, 1.0f), AdamWConfig{}, (int)s + 1);
    }
    r.grads_last.resize(n), r.params.resize(n), r.m.resize(n), r.v.resize(n);
    gpu.get_grads(r.grads_last.data());
    gpu.get_params(r.params.data());
    gpu.get_opt_state(r.m.data(), r.v.data());
    return r;
}

template <typename T>
static bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}
static size_t count_differing(const std::vector<float>& a, const std::vector<float>& b) {
    size_t d = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); i++) d += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

// Two deterministic runs agree bit for bit (losses, gradient norms, gradients, weights, AdamW
// moments). B = 8, T = 1024 and several heads, so the default backward's atomic dQ gets several key
// tiles adding into each query row: two default runs usually differ, reported as INFO (the
// atomics may by chance agree). The deterministic backward computes the same gradient as the
// default one (within bf16 rounding), and the forward is the same kernel in both modes.
static void check_determinism(const char* name, const GPTConfig& cfg, uint64_t seed) {
    gc::Rng rng(seed);
    std::vector<float> w(param_layout(cfg).back().offset + param_layout(cfg).back().size);
    init_gpt_weights(w.data(), cfg, seed);
    std::vector<Batch> batches;
    // 8 x 1024 tokens: more key-tile blocks than the GPU runs at once, so they finish in an
    // order that varies (with all of them resident, the atomics tend to land in one order).
    for (int s = 0; s < 4; s++) batches.push_back(make_batch(rng, 8, 1024, cfg.vocab_size, true));
    const TrainTrace a = train_trace(cfg, true, w, batches), b = train_trace(cfg, true, w, batches);
    const std::string pre = std::string(name) + ", deterministic, 3 AdamW steps twice: ";
    check(same_bits(a.losses, b.losses) && same_bits(a.norms, b.norms), pre + "losses and gradient norms bit-identical");
    check(same_bits(a.grads_first, b.grads_first) && same_bits(a.grads_last, b.grads_last),
          pre + "gradients (first and last step) bit-identical (" + std::to_string(count_differing(a.grads_last, b.grads_last)) +
              " differ)");
    check(same_bits(a.params, b.params) && same_bits(a.m, b.m) && same_bits(a.v, b.v),
          pre + "weights and AdamW moments bit-identical (" + std::to_string(count_differing(a.params, b.params)) + " differ)");

    // Gradient checkpointing: a recomputed activation is the same kernel on the same inputs, so
    // with the deterministic backward every policy gives the same bits as keeping everything.
    for (Recompute r : {Recompute::Selective, Recompute::Full}) {
        const TrainTrace p = train_trace(cfg, true, w, batches, r);
        check(same_bits(a.losses, p.losses) && same_bits(a.norms, p.norms) && same_bits(a.grads_first, p.grads_first) &&
                  same_bits(a.grads_last, p.grads_last) && same_bits(a.params, p.params),
              std::string(name) + ", deterministic, --recompute " + recompute_name(r) +
                  ": losses, gradients and weights after 3 steps == none, bitwise (" +
                  std::to_string(count_differing(a.grads_last, p.grads_last)) + " gradients differ)");
    }
    const TrainTrace c = train_trace(cfg, false, w, batches), d = train_trace(cfg, false, w, batches);
    for (Recompute r : {Recompute::Selective, Recompute::Full}) {  // the default backward: within its own noise
        const TrainTrace p = train_trace(cfg, false, w, batches, r);
        const double e = gc::norm_rel_error(p.grads_first.data(), c.grads_first.data(), c.grads_first.size());
        report(e < 1e-2 && p.losses[0] == c.losses[0],
               std::string(name) + ", --recompute " + recompute_name(r) + ": first loss identical, gradient ~ none's", e, 1e-2);
    }
    check(std::memcmp(&a.losses[0], &c.losses[0], sizeof(float)) == 0,
          std::string(name) + ": first loss identical with and without deterministic (same forward)");
    const double e = gc::norm_rel_error(a.grads_first.data(), c.grads_first.data(), a.grads_first.size());
    report(e < 1e-2, std::string(name) + ": deterministic backward's gradient ~ the default's", e, 1e-2);
    std::printf("INFO %s, default (atomic dQ) backward run twice: %zu of %zu first-step gradients differ, %zu weights "
                "differ after 3 steps%s\n",
                name, count_differing(c.grads_first, d.grads_first), c.grads_first.size(), count_differing(c.params, d.params),
                same_bits(c.grads_first, d.grads_first) ? " (the atomics happened to agree)" : "");
}

// Token and target ids outside the vocabulary are refused on the host, naming the batch row
// and position, before anything reaches the device (the classifier reads logit[target]);
// targets < 0 (ignored positions) pass; the backend still works after a refusal.
static void check_vocab_errors(uint64_t seed) {
    gc::Rng rng(seed);
    GPTConfig cfg;
    cfg.vocab_size = 515, cfg.n_layer = 1, cfg.n_embd = 128, cfg.n_head = 2;
    const int V = cfg.vocab_size, T = 64;
    CudaBackend gpu(cfg, AttnBackend::Flash);
    gpu.init_weights(seed);
    const Batch b = make_batch(rng, 2, T, V, false);
    const float before = gpu.forward_backward(b.tokens.data(), b.targets.data(), nullptr, b.B, b.T);
    Batch bad = b;
    bad.tokens[1 * T + 7] = V;
    expect_fatal("token = V (forward_backward)", [&] { gpu.forward_backward(bad.tokens.data(), bad.targets.data(), nullptr, bad.B, bad.T); },
                 {"token id 515 at batch row 1, position 7 is outside the model's vocabulary of 515"});
    bad = b;
    bad.tokens[0 * T + 2] = -3;
    expect_fatal("token = -3 (inference forward)", [&] { gpu.forward(bad.tokens.data(), nullptr, nullptr, bad.B, bad.T, nullptr); },
                 {"token id -3 at batch row 0, position 2 is outside the model's vocabulary"});
    bad = b;
    bad.targets[1 * T + 63] = V + 4;
    expect_fatal("target = V + 4 (forward_backward)", [&] { gpu.forward_backward(bad.tokens.data(), bad.targets.data(), nullptr, bad.B, bad.T); },
                 {"target id 519 at batch row 1, position 63 is outside the model's vocabulary of 515"});
    expect_fatal("target = V + 4 (forward with targets)", [&] { gpu.forward(bad.tokens.data(), bad.targets.data(), nullptr, bad.B, bad.T, nullptr); },
                 {"target id 519 at batch row 1, position 63"});
    bad = b;
    bad.targets[0] = -1, bad.targets[T + 1] = -7;  // ignored positions
    bool ok = true;
    try {
        ok = std::isfinite(gpu.forward_backward(bad.tokens.data(), bad.targets.data(), nullptr, bad.B, bad.T));
    } catch (const FatalError& e) {
        ok = false;
        std::printf("  %s\n", e.what());
    }
    check(ok, "negative targets (-1, -7) are ignored positions, not errors");
    const float after = gpu.forward_backward(b.tokens.data(), b.targets.data(), nullptr, b.B, b.T);
    check(std::memcmp(&before, &after, sizeof(float)) == 0, "after the refusals the same batch gives the same loss");
    expect_fatal("cudnn attention with deterministic", [&] { CudaBackend x(cfg, AttnBackend::Cudnn, true); }, {"--attention flash"});
}

// Data parallelism's gradient buckets (set_gradient_comm): a stand-in communicator of two ranks
// that hold the same gradients doubles each bucket on its own stream, so the summed gradients
// must be exactly twice the unsummed ones (deterministic mode: the same bits each run), every
// element in exactly one bucket, for two steps in a row (the second's zero_grad waits for the
// first's sums).
__global__ static void double_in_place(float* x, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) x[i] *= 2.0f;
}
struct DoublingComm : Comm {
    cudaStream_t s{};
    std::vector<std::pair<const float*, size_t>> calls;
    DoublingComm() { CUDA_CHECK(cudaStreamCreate(&s)); }
    ~DoublingComm() override { cudaStreamDestroy(s); }
    int rank() const override { return 0; }
    int size() const override { return 2; }
    std::string name() const override { return "doubling stand-in"; }
    void sendrecv(const void*, size_t, int, void*, size_t, int) override { fatal("test: no sendrecv here"); }
    void* stream() const override { return s; }
    void all_reduce_sum(float* x, size_t n) override {
        calls.push_back({x, n});
        double_in_place<<<256, 256, 0, s>>>(x, n);
        CUDA_CHECK(cudaGetLastError());
    }
    void broadcast(void*, size_t, int) override {}
    void barrier() override {}
    void abort(const std::string&) override {}
};

static void check_gradient_buckets(uint64_t seed, int qk_conv = 0, bool attn_sink = false) {
    gc::Rng rng(seed);
    GPTConfig cfg;
    cfg.vocab_size = 512, cfg.n_layer = 3, cfg.n_embd = 128, cfg.n_head = 2;
    if (qk_conv) cfg.nope_layers = {1}, cfg.qk_conv = qk_conv;  // a block whose bucket holds the convolution's weights
    cfg.attn_sink = attn_sink;                                   // every block's bucket holds its sinks
    const std::string conv = (qk_conv ? strf(" (q/k convolution %d in layer 1)", qk_conv) : "") + (attn_sink ? " (sinks)" : "");
    const std::vector<Batch> batches = {make_batch(rng, 2, 256, cfg.vocab_size, true), make_batch(rng, 2, 256, cfg.vocab_size, false)};
    CudaBackend plain(cfg, AttnBackend::Flash, true), bucketed(cfg, AttnBackend::Flash, true);
    std::vector<float> w(plain.num_params());
    init_gpt_weights(w.data(), cfg, seed);
    plain.set_params(w.data()), bucketed.set_params(w.data());
    DoublingComm comm;
    bucketed.set_gradient_comm(&comm);
    const size_t n = plain.num_params();
    for (size_t s = 0; s < batches.size(); s++) {
        const Batch& b = batches[s];
        comm.calls.clear();
        plain.forward_backward(b.tokens.data(), b.targets.data(), b.doc_start.data(), b.B, b.T);
        bucketed.forward_backward(b.tokens.data(), b.targets.data(), b.doc_start.data(), b.B, b.T);
        bucketed.all_reduce_grads(comm);
        std::vector<float> g(n), g2(n);
        plain.get_grads(g.data()), bucketed.get_grads(g2.data());
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++) wrong += g2[i] != 2.0f * g[i];
        check(wrong == 0, strf("gradient buckets, step %zu: summed gradients are exactly twice the unsummed (%zu of %zu differ)", s + 1, wrong, n) + conv);
        // The buckets tile the buffer: sorted by start, each begins where the last ended.
        std::vector<std::pair<const float*, size_t>> c = comm.calls;
        std::sort(c.begin(), c.end());
        bool tiled = c.size() == (size_t)cfg.n_layer + 1;
        size_t at = 0;
        for (const auto& [p, len] : c) tiled = tiled && len > 0 && p == c.front().first + at, at += len;
        check(tiled && at == n, strf("gradient buckets, step %zu: %zu sums (a block each and the embedding) cover the %zu gradients once",
                                     s + 1, comm.calls.size(), n) + conv);
    }
}

static int main_body(int argc, char** argv) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        std::printf("test_model: no GPU, skipped\n0 passed, 0 failed\n");
        return 0;
    }
    uint64_t seed = 20261121;
    bool pointer_only = false;  // --pointer-only: the pointer's cases alone (for compute-sanitizer)
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
        else if (a == "--pointer-only") pointer_only = true;
        else fatal("test_model: unknown argument %s (usage: test_model [--seed N] [--pointer-only])", a.c_str());
    }
    std::printf("test_model: seed %llu\n", (unsigned long long)seed);
    // The pointer (layers/cuda/pointer.cuh) at heads of 64 and of 128, over NoPE layers with sinks.
    auto pointer_cases = [&] {
        compare_model(AttnBackend::Flash, "flash with a pointer, heads of 64, doc mask", seed + 21, {}, {}, 0, 0, {}, false, true);
        compare_model(AttnBackend::Flash, "flash, NoPE layer, sinks and a pointer, heads of 128, doc mask", seed + 22, {}, {1}, 0, 0, {},
                      true, true, 128);
        compare_model(AttnBackend::Cudnn, "cudnn attention with a pointer (the pointer's head on our kernels)", seed + 23, {}, {}, 0, 0,
                      {}, false, true);
        for (int hd : {64, 128})
            compare_model(AttnBackend::Flash, hd == 64 ? "a pointer over 2 ids (groups of several tiles), heads of 64"
                                                       : "a pointer over 2 ids (groups of several tiles), heads of 128",
                          seed + 25 + hd, {}, {}, 0, 0, {}, false, true, hd, 2);
    };
    if (pointer_only) {
        pointer_cases();
        return check_report();
    }
    compare_model(AttnBackend::Flash, "flash attention, doc mask", seed);
    compare_model(AttnBackend::Cudnn, "cudnn attention", seed + 1);
    // Layer 0 dilated (LongNet, r not dividing w, N not a multiple of w), layer 1 dense.
    const AttnPattern dilated = dilated_pattern(true, {32, 48, 200}, {1, 5, 2});
    compare_model(AttnBackend::Flash, "flash, dilated layer + dense layer, doc mask", seed + 3, {dilated, AttnPattern{}});
    // Layer 0 block-sparse (a window and global tokens that cut blocks, random blocks per head),
    // layer 1 dilated.
    AttnPattern sparse = make_pattern(AttnKind::BlockSparse, true);
    sparse.block_sparse.block = 16, sparse.block_sparse.window = 40, sparse.block_sparse.global = 8, sparse.block_sparse.random_count = 1, sparse.block_sparse.random_seed = 3;
    compare_model(AttnBackend::Flash, "flash, block-sparse layer + dilated layer, doc mask", seed + 7, {sparse, dilated});
    // Layer 0 fixed (blocks of 16 with a summary of 3), layer 1 dense.
    AttnPattern fixed = make_pattern(AttnKind::Fixed, true);
    fixed.fixed.stride = 16, fixed.fixed.summary = 3;
    compare_model(AttnBackend::Flash, "flash, fixed layer + dense layer, doc mask", seed + 9, {fixed, AttnPattern{}});
    // Layer 1 without rotary embedding (NoPE), layer 0 fixed.
    compare_model(AttnBackend::Flash, "flash, fixed layer + NoPE dense layer, doc mask", seed + 11, {fixed, AttnPattern{}}, {1});
    // The NoPE layer with log-n attention from position 40 (rows 40..130 scaled, forward and backward).
    compare_model(AttnBackend::Flash, "flash, dense + NoPE dense layer with log-n attention from 40", seed + 12, {}, {1}, 40);
    // The q/k convolution (started near the identity, its other taps +-0.02), cut by the document mask.
    compare_model(AttnBackend::Flash, "flash, dense + NoPE dense layer with a q/k convolution of 4, doc mask", seed + 13, {}, {1}, 0, 4);
    // Both layers NoPE, the convolution in layer 1 only (--qk-conv-layers 1): layer 0 matches single tokens.
    compare_model(AttnBackend::Flash, "flash, two NoPE dense layers, a q/k convolution of 4 in layer 1 only, doc mask", seed + 14, {}, {0, 1}, 0, 4,
                  {1});
    // Attention sinks: dense (flash and cuDNN, whose backward takes the sink's log-sum-exp as its
    // own), a dilated layer beside a NoPE one.
    compare_model(AttnBackend::Flash, "flash attention with sinks, doc mask", seed + 16, {}, {}, 0, 0, {}, true);
    compare_model(AttnBackend::Cudnn, "cudnn attention with sinks", seed + 17, {}, {}, 0, 0, {}, true);
    compare_model(AttnBackend::Flash, "flash, dilated layer + NoPE dense layer with log-n from 40, sinks, doc mask", seed + 18,
                  {dilated, AttnPattern{}}, {1}, 40, 0, {}, true);
    // Learned log-n slopes (one per head of the NoPE layer: the slopes' gradient, dq scaled by each
    // head's factor), beside a q/k convolution and sinks, heads of 64 and 128.
    compare_model(AttnBackend::Flash, "flash, dense + NoPE dense layer with learned log-n slopes from 40, doc mask", seed + 30, {}, {1}, 40,
                  0, {}, false, false, 64, 23, true);
    compare_model(AttnBackend::Flash, "flash, NoPE layers with learned log-n slopes from 40, q/k conv 4, sinks, heads of 128", seed + 31,
                  {}, {0, 1}, 40, 4, {}, true, false, 128, 23, true);
    pointer_cases();
    compare_training(seed + 2);
    check_vocab_errors(seed + 4);
    check_gradient_buckets(seed + 13);
    check_gradient_buckets(seed + 15, 3);
    check_gradient_buckets(seed + 19, 0, true);
    {
        GPTConfig dense;  // D = 64
        dense.vocab_size = 2048, dense.n_layer = 2, dense.n_embd = 256, dense.n_head = 4;
        check_determinism("dense, 4 heads of 64, T 1024", dense, seed + 5);
        GPTConfig dil = dense;  // D = 128; layer 0 dilated, layer 1 dense
        dil.n_embd = 512;
        dil.layer_attn = {dilated_pattern(true, {512, 1024}, {1, 2}), AttnPattern{}};
        check_determinism("dilated + dense, 4 heads of 128, T 1024", dil, seed + 6);
        GPTConfig bs = dense;  // D = 64; layer 0 block-sparse (window 256, 64 global tokens), layer 1 dense
        AttnPattern w = make_pattern(AttnKind::BlockSparse, true);
        w.block_sparse.block = 64, w.block_sparse.window = 256, w.block_sparse.global = 64;
        bs.layer_attn = {w, AttnPattern{}};
        check_determinism("block-sparse + dense, 4 heads of 64, T 1024", bs, seed + 8);
        GPTConfig fx = dense;  // D = 64; layer 0 fixed (blocks of 128, summary 16), layer 1 dense
        AttnPattern f = make_pattern(AttnKind::Fixed, true);
        f.fixed.stride = 128, f.fixed.summary = 16;
        fx.layer_attn = {f, AttnPattern{}};
        check_determinism("fixed + dense, 4 heads of 64, T 1024", fx, seed + 10);
        GPTConfig conv = dense;  // layer 1 NoPE with a q/k convolution: its two-stage weight gradient, its raw q/k recomputed
        conv.nope_layers = {1}, conv.qk_conv = 4;
        check_determinism("dense + NoPE dense with a q/k convolution of 4, 4 heads of 64, T 1024", conv, seed + 14);
        GPTConfig sink = dil;  // sinks: their gradient's two-stage sum over rows
        sink.attn_sink = true;
        check_determinism("dilated + dense with sinks, 4 heads of 128, T 1024", sink, seed + 20);
        GPTConfig ptr = dense;  // the pointer: the tiles' kernels and the gate's two-stage sum
        ptr.pointer = true;
        check_determinism("dense with a pointer, 4 heads of 64, T 1024", ptr, seed + 24);
    }
    return check_report();
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
