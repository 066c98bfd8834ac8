// libFuzzer harness: KV cache files (model/kv_cache_file.h), as `infer --load-cache` reads them.
//
// Input: a cache file in either form of fuzz_safetensors_bytes (tests/fuzz/fuzz_common.h): the
// bytes verbatim, or header + NUL + data with the header's length written by the harness.
// The model is fixed: the seeds' tiny model (vocab 16, width 8, 2 heads; layer 0 dilated (2,1),
// (4,2), layer 1 dense) with init_weights(7), so the weights fingerprint in the seeds matches and
// mutations reach past it. The file goes to load_kv_cache with a context of 64 positions, then,
// as infer does with an accepted cache, one more token is appended and its logits read.
// Checked on acceptance: the cache's position is within the context, and the logits are finite
// (load_kv_cache bounds every value, so a cache it accepts cannot overflow the attention).
// Findings: see tests/fuzz/fuzz_common.h. Seeds: tests/fuzz/kv_cache/seeds (make_seeds.cpp).
#include <cmath>
#include "model/backend.h"
#include "model/kv_cache_file.h"
#include "tests/fuzz/fuzz_common.h"

// The seeds' model (make_seeds.cpp writes its caches with the same config and weights).
inline GPTConfig fuzz_kv_cache_config() {
    GPTConfig c;
    c.vocab_size = 16, c.n_layer = 2, c.n_embd = 8, c.n_head = 2;
    AttnPattern p;
    p.kind = AttnKind::Dilated, p.dilated.segments = {2, 4}, p.dilated.dilations = {1, 2};
    c.layer_attn = {p, AttnPattern{}};
    return c;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static FuzzFile file("fuzz_kv_cache");
    static const GPTConfig cfg = fuzz_kv_cache_config();
    static CpuBackend* model = [] {
        auto* m = new CpuBackend(cfg);
        m->init_weights(7);
        return m;
    }();
    static const std::string fingerprint = [] {
        std::vector<float> w(model->num_params());
        model->get_params(w.data());
        return weights_fingerprint(w);
    }();
    constexpr long long kContext = 64;
    if (size < 1) return 0;
    const std::string bytes = fuzz_safetensors_bytes(data, size);
    const std::string& path = file.write(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    try {
        CpuIncremental cache(model->model(), 1, 4);
        load_kv_cache(path, cache, cfg, fingerprint, 1, kContext);
        FUZZ_CHECK(cache.position() >= 1 && cache.position() <= kContext, "accepted a cache at position %lld", cache.position());
        const int token = 3;
        cache.append(&token, 1);
        float logits[16];
        cache.logits(logits, 0, 0);
        for (float x : logits) FUZZ_CHECK(std::isfinite(x), "non-finite logit %g from an accepted cache", (double)x);
    } catch (const FatalError& e) {
        fuzz_rejected(e);
    } catch (const JsonError& e) {
        fuzz_rejected(e);
    }
    return 0;
}
