// The whole GPT on the GPU against the CPU reference: loss, logits and every parameter's
// gradient on a small config (with odd sizes and a document mask), for both attention
// backends, then a few AdamW steps whose losses must track the CPU run.
// bf16 weights and activations put the GPU within about 1e-2 of the fp32/fp64 reference;
// a negative control (gradients of another batch) shows the comparison can fail.
#include <cstdio>
#include <string>
#include <vector>
#include "model/gpt_cuda.cuh"
#include "tests/gradcheck.h"

static int passed = 0, failed = 0;
static void report(bool ok, const std::string& what, double err, double tol) {
    std::printf("%s %-60s err %.3g tol %.2g\n", ok ? "PASS" : "FAIL", what.c_str(), err, tol);
    (ok ? passed : failed)++;
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

static void compare_model(AttnBackend attn, const char* name, uint64_t seed, bool dilated = false) {
    gc::Rng rng(seed);
    GPTConfig cfg;
    cfg.vocab_size = 1003, cfg.n_layer = 2, cfg.n_embd = 192, cfg.n_head = 3;  // D = 64
    // Layer 0 dilated (LongNet, r not dividing w, N not a multiple of w), layer 1 dense.
    if (dilated) cfg.layer_attn = {AttnPattern{AttnKind::Dilated, true, {32, 48, 200}, {1, 5, 2}}, AttnPattern{}};
    const bool doc_mask = attn == AttnBackend::Flash;  // cuDNN has no document mask
    const Batch b = make_batch(rng, 3, 131, cfg.vocab_size, doc_mask);
    const int* ds = doc_mask ? b.doc_start.data() : nullptr;

    // Both start from the same weights, rounded to bf16 (what the GPU computes with).
    std::vector<float> w(param_layout(cfg).back().offset + param_layout(cfg).back().size);
    init_gpt_weights(w.data(), cfg, seed);
    for (float& x : w) x = round_bf16(x + (float)rng.uniform(-0.02, 0.02));
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

    // Negative control: another batch's gradients must be far off.
    const Batch other = make_batch(rng, 3, 131, cfg.vocab_size, doc_mask);
    gpu.forward_backward(other.tokens.data(), other.targets.data(), ds, b.B, b.T);
    gpu.get_grads(g.data());
    const double control = gc::norm_rel_error(g.data(), ref.grads.data(), w.size());
    report(control > 0.3, std::string(name) + ": negative control (other batch) is rejected", control, 0.3);

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

int main(int argc, char** argv) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        std::printf("test_model: no GPU, skipped\n0 passed, 0 failed\n");
        return 0;
    }
    uint64_t seed = 20261121;
    for (int i = 1; i + 1 < argc; i++)
        if (std::string(argv[i]) == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    std::printf("test_model: seed %llu\n", (unsigned long long)seed);
    compare_model(AttnBackend::Flash, "flash attention, doc mask", seed);
    compare_model(AttnBackend::Cudnn, "cudnn attention", seed + 1);
    compare_model(AttnBackend::Flash, "flash, dilated layer + dense layer, doc mask", seed + 3, true);
    compare_training(seed + 2);
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
