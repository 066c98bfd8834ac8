// A KV cache saved to a file and loaded later (infer --save-cache, --load-cache), so a long
// prompt (a book, a source tree) is prefilled once and questioned many times. A safetensors file:
//   kv.<l>        (B, rows_l, 2C) F32: layer l's K and V rows: every position before the cache's,
//                 or a dilated layer's packed branches one after the other (model/kv_cache.h)
//   last_hidden   (B, C) F32: each sequence's last token's final hidden state (its logits)
//   qk_tail.<l>   (B, W - 1, 2C) F32: in a layer with a q/k convolution of W, its last raw q and k
//                 rows, which the next token's convolution reads
//   metadata: format "longnet-gpt-kv/2" (/1 held unpacked dilated rows and is refused), position,
//   the model's config, and a hash of its weights, so a cache is refused by any other model.
// Written to a temporary file and renamed.
// The GPU's bf16 values are written as F32 exactly; a cache from the GPU loads on the GPU to the
// same bits.
#pragma once
#include <cmath>
#include <string>
#include "model/gpt_config.h"
#include "model/kv_cache.h"
#include "model/parallel.h"
#include "model/safetensors.h"

inline std::string weights_fingerprint(const std::vector<float>& params) {
    return std::to_string(fnv1a(params.data(), params.size() * sizeof(float)));
}

inline void save_kv_cache(const std::string& path, IncrementalModel& m, const GPTConfig& cfg, const std::string& fingerprint) {
    const IncrementalModel::State st = m.export_state();
    const int B = (int)(st.last_hidden.size() / cfg.n_embd);
    std::vector<TensorToWrite> tensors;
    std::vector<std::string> names(cfg.n_layer);
    for (int l = 0; l < cfg.n_layer; l++) {
        names[l] = "kv." + std::to_string(l);
        tensors.push_back({names[l], {B, (int)st.rows[l], 2 * cfg.n_embd}, st.kv[l].data()});
    }
    tensors.push_back({"last_hidden", {B, cfg.n_embd}, st.last_hidden.data()});
    std::vector<std::string> tails(cfg.n_layer);
    for (int l = 0; l < cfg.n_layer; l++)
        if (const int W = cfg.layer_qk_conv(l)) {
            tails[l] = "qk_tail." + std::to_string(l);
            tensors.push_back({tails[l], {B, W - 1, 2 * cfg.n_embd}, st.qk_tail[l].data()});
        }
    write_safetensors(path, tensors,
                      {{"format", "longnet-gpt-kv/2"}, {"position", std::to_string(st.position)},
                       {"config", config_to_json(cfg)}, {"weights", fingerprint}},
                      kCacheRole);
}

// K and V rows come from layer-normed activations times the weights: a cache value beyond this
// never comes from a model that trains, and 1e38-sized rows would overflow the attention scores.
constexpr float kMaxCacheValue = 1e6f;

// Loads into a fresh cache m (B sequences), at most max_position positions (the context a model
// that keeps every row may read); every mismatch is one line naming the cause and the fix.
inline void load_kv_cache(const std::string& path, IncrementalModel& m, const GPTConfig& cfg, const std::string& fingerprint,
                          int B, long long max_position = kMaxSeqLen) {
    // The largest cache this model can have written for B sequences (every layer at position
    // kMaxSeqLen, F32, the last hidden states) plus 1 MiB for the header: a larger file is no
    // cache of this model and is refused from its size, before it is read.
    const double most = kv_cache_bytes(cfg, kMaxSeqLen, B, sizeof(float)) + (double)B * cfg.n_embd * sizeof(float) + (1 << 20);
    const SafetensorsFile f =
        read_safetensors(path, kCacheRole, most < (double)kReadFileMaxBytes ? (uint64_t)most : kReadFileMaxBytes);
    auto meta = [&](const char* key) {
        auto it = f.metadata.find(key);
        if (it == f.metadata.end()) fatal("--load-cache %s: no \"%s\" in its metadata: not a KV cache file (infer --save-cache writes them)", path.c_str(), key);
        return it->second;
    };
    if (f.metadata.count("format") && f.metadata.at("format") == "longnet-gpt/1")
        fatal("--load-cache %s is a checkpoint, not a KV cache (infer --save-cache writes them): give it as --checkpoint, "
              "or prefill with --save-cache", path.c_str());
    if (meta("format") != "longnet-gpt-kv/2")
        fatal("--load-cache %s: format %s, expected longnet-gpt-kv/2: prefill again with this version's infer --save-cache",
              path.c_str(), meta("format").c_str());
    if (meta("config") != config_to_json(cfg) && meta("weights") == fingerprint) {
        // The same weights prefilled under another --logn-attn: the queries it scaled shaped
        // every later layer's rows, so the cache is another; say which setting made it.
        try {
            const GPTConfig saved = config_from_json(meta("config"));
            GPTConfig same = cfg;
            same.logn_attn = saved.logn_attn;
            if (config_to_json(same) == meta("config"))
                fatal("--load-cache %s was prefilled with --logn-attn %d and this run has %d: pass --logn-attn %d, or prefill "
                      "again", path.c_str(), saved.logn_attn, cfg.logn_attn, saved.logn_attn);
        } catch (const JsonError&) {
        }
    }
    if (meta("config") != config_to_json(cfg) || meta("weights") != fingerprint)
        fatal("--load-cache %s was made by another model or checkpoint: prefill again with this --checkpoint", path.c_str());
    IncrementalModel::State st;
    char* end = nullptr;
    const std::string pos = meta("position");
    st.position = std::strtoll(pos.c_str(), &end, 10);
    if (pos.empty() || *end || st.position < 1 || st.position > kMaxSeqLen)
        fatal("--load-cache %s: position '%s' is not in [1, %d]: the file is corrupt: prefill again with --save-cache", path.c_str(),
              pos.c_str(), kMaxSeqLen);
    if (st.position > max_position)
        fatal("--load-cache %s holds %lld positions, more than the %lld this model may read here (--ctx): raise --ctx or "
              "prefill a shorter context", path.c_str(), st.position, max_position);
    for (int l = 0; l < cfg.n_layer; l++) {
        const std::string name = "kv." + std::to_string(l);
        if (!f.has(name)) fatal("--load-cache %s has no tensor %s", path.c_str(), name.c_str());
        const std::vector<int>& shape = f.tensors.at(name).shape;
        const long long rows = shape.size() == 3 ? shape[1] : -1;
        if (shape.size() != 3 || shape[0] != B || shape[2] != 2 * cfg.n_embd || rows != kv_cache_rows_at(cfg.attn(l), st.position))
            fatal("--load-cache %s: tensor %s has a shape that does not fit %d sequences at position %lld: prefill again with "
                  "--save-cache", path.c_str(), name.c_str(), B, st.position);
        st.rows.push_back(rows);
        st.kv.emplace_back((size_t)B * rows * 2 * cfg.n_embd);
        f.read(name, shape, st.kv.back().data());
    }
    st.last_hidden.resize((size_t)B * cfg.n_embd);
    f.read("last_hidden", {B, cfg.n_embd}, st.last_hidden.data());
    st.qk_tail.resize(cfg.n_layer);
    for (int l = 0; l < cfg.n_layer; l++)
        if (const int W = cfg.layer_qk_conv(l)) {
            const std::string name = "qk_tail." + std::to_string(l);
            if (!f.has(name)) fatal("--load-cache %s has no tensor %s: prefill again with --save-cache", path.c_str(), name.c_str());
            if (f.tensors.at(name).shape != std::vector<int>{B, W - 1, 2 * cfg.n_embd})
                fatal("--load-cache %s: tensor %s does not fit %d sequences of this model: prefill again with --save-cache",
                      path.c_str(), name.c_str(), B);
            st.qk_tail[l].resize((size_t)B * (W - 1) * 2 * cfg.n_embd);
            f.read(name, {B, W - 1, 2 * cfg.n_embd}, st.qk_tail[l].data());
        }
    auto check_values = [&](const std::vector<float>& v, const std::string& name) {
        for (float x : v)
            if (!(std::fabs(x) <= kMaxCacheValue))
                fatal("--load-cache %s: tensor %s holds %g (NaN, Inf or beyond %g): the file is corrupt: prefill again with "
                      "--save-cache", path.c_str(), name.c_str(), (double)x, (double)kMaxCacheValue);
    };
    for (int l = 0; l < cfg.n_layer; l++) check_values(st.kv[l], "kv." + std::to_string(l));
    check_values(st.last_hidden, "last_hidden");
    for (int l = 0; l < cfg.n_layer; l++) check_values(st.qk_tail[l], "qk_tail." + std::to_string(l));
    m.import_state(st);
}
