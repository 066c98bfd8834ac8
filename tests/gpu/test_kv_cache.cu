// Incremental inference on the GPU (model/kv_cache_cuda.cuh): a prompt prefilled in chunks, then
// decoded one token at a time, gives the logits of the GPU's full forward over the whole sequence
// at every position within bf16 tolerance, for dense, dilated and block-sparse layers, with two
// sequences at once and across the dilated segments' borders, the dense layer's decoding split
// over its keys; the dilated layer's cache stays
// within its bound; a negative control (a sequence missing its first token) shows the check fails.
// Prints PASS/FAIL lines and "N passed, M failed".
#include <cstdio>
#include <string>
#include <vector>
#include "model/kv_cache_cuda.cuh"
#include "model/kv_cache_file.h"
#include "tests/gradcheck.h"

static int passed = 0, failed = 0;
static void report(bool ok, const std::string& what, double err, double tol) {
    std::printf("%s %-64s err %.3g tol %.2g\n", ok ? "PASS" : "FAIL", what.c_str(), err, tol);
    (ok ? passed : failed)++;
}

static int main_body() {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        std::printf("test_kv_cache: no GPU, skipped\n0 passed, 0 failed\n");
        return 0;
    }
    gc::Rng rng(20261125);
    GPTConfig cfg;
    cfg.vocab_size = 1003, cfg.n_layer = 3, cfg.n_embd = 192, cfg.n_head = 3;  // D = 64
    const AttnPattern dil = make_pattern(AttnKind::Dilated, true, {32, 64}, {1, 2});
    AttnPattern bs = make_pattern(AttnKind::BlockSparse, true);
    bs.block = 16, bs.window = 40, bs.global = 8;
    cfg.layer_attn = {AttnPattern{}, dil, bs};
    const int B = 2, N = 300, chunk = 48, prompt = 150;  // chunks cross segment borders: kept rows move in place
    CudaBackend full(cfg, AttnBackend::Flash);
    full.init_weights(5);
    std::vector<int> tokens(B * N);
    for (int& t : tokens) t = rng.randint(0, cfg.vocab_size - 1);
    full.forward(tokens.data(), nullptr, nullptr, B, N, nullptr);
    std::vector<std::vector<float>> want((size_t)B * N, std::vector<float>(cfg.vocab_size));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < N; t++) full.logits_at(want[(size_t)b * N + t].data(), b, t);

    // Split decoding of the dense layer (model/kv_cache_cuda.cuh) in pieces of 16 keys: from 33
    // cached rows on, every decoded token of the dense layer goes through it.
    KVCacheCuda::kSplitRows = 16;
    KVCacheCuda cache(full, B, chunk);
    cache.reserve(N / 2);  // half the sequence up front: the rest grows as it goes
    std::vector<float> got(cfg.vocab_size);
    std::vector<int> piece;
    double worst = 0;
    long long most = 0;
    for (int at = 0; at < N;) {
        const int n = at < prompt ? std::min(chunk, prompt - at) : 1;
        piece.clear();
        for (int b = 0; b < B; b++) piece.insert(piece.end(), tokens.begin() + b * N + at, tokens.begin() + b * N + at + n);
        cache.append(piece.data(), n);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < n; i++) {
                cache.logits(got.data(), b, i);
                worst = std::max(worst, gc::norm_rel_error(got.data(), want[(size_t)b * N + at + i].data(), cfg.vocab_size));
            }
        at += n;
        most = std::max(most, cache.rows(1));
    }
    report(worst < 2e-2, "KV cache on the GPU: prefill in chunks + decode == full forward (bf16)", worst, 2e-2);
    report(most <= kv_rows_bound(dil, chunk) && cache.rows(0) == N, "dilated cache rows <= longest segment + chunk, dense keeps all",
           (double)most, (double)kv_rows_bound(dil, chunk));
    {  // saved to a file, loaded into a fresh cache: decodes the same bits
        std::vector<float> params(full.num_params());
        full.get_params(params.data());
        const std::string fp = weights_fingerprint(params), path = "kv_cache_test.safetensors";
        save_kv_cache(path, cache, cfg, fp);
        KVCacheCuda loaded(full, B, chunk);
        load_kv_cache(path, loaded, cfg, fp, B);
        std::vector<float> a(cfg.vocab_size), c(cfg.vocab_size);
        size_t diff = 0;
        for (int step = 0; step < 5; step++) {
            std::vector<int> next(B, 7 + step);
            cache.append(next.data(), 1), loaded.append(next.data(), 1);
            for (int b = 0; b < B; b++) {
                cache.logits(a.data(), b, 0), loaded.logits(c.data(), b, 0);
                diff += gc::count_bit_mismatch(a.data(), c.data(), a.size());
            }
        }
        std::remove(path.c_str());
        report(diff == 0, "KV cache saved and loaded: 5 decode steps the same bits", (double)diff, 0);
    }
    KVCacheCuda off(full, B, chunk);
    off.append(tokens.data() + 1, 1);  // sequence 0 with its first token missing
    off.logits(got.data(), 0, 0);
    const double e = gc::norm_rel_error(got.data(), want[0].data(), cfg.vocab_size);
    report(e > 5e-2, "another token at position 0 gives other logits (control)", e, 5e-2);
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

int main() { return guarded_main([&] { return main_body(); }); }
