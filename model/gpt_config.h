// The model's shape, its validation (one-line errors naming the flag), and its JSON form
// (kept in every checkpoint's metadata).
#pragma once
#include <string>
#include <vector>
#include "layers/attention_pattern.h"
#include "layers/common.h"
#include "model/json.h"

struct GPTConfig {
    int vocab_size = 8192;
    int n_layer = 4;
    int n_embd = 128;   // C
    int n_head = 2;     // H; head dim D = C / H
    float rope_theta = 10000.0f;
    // One pattern per layer. Empty means every layer is dense causal. A per-layer setting so
    // later patterns (dilated, block-sparse) can mix with dense layers.
    std::vector<AttnPattern> layer_attn;

    int head_dim() const { return n_embd / n_head; }
    AttnPattern attn(int layer) const { return layer_attn.empty() ? AttnPattern{} : layer_attn[layer]; }
};

// Head dims the kernels take. The CPU reference takes any even head dim; the tests use small
// ones (allow_any_head_dim) to keep finite differences cheap.
inline void validate_config(const GPTConfig& c, bool allow_any_head_dim = false) {
    if (c.vocab_size < 2) fatal("--vocab must be at least 2 (got %d)", c.vocab_size);
    if (c.n_layer < 1) fatal("--layers must be at least 1 (got %d)", c.n_layer);
    if (c.n_embd < 1 || c.n_head < 1) fatal("--width and --heads must be positive (got %d, %d)", c.n_embd, c.n_head);
    if (c.n_embd % c.n_head != 0)
        fatal("--heads %d does not divide --width %d: pick a width that is a multiple of the heads", c.n_head, c.n_embd);
    const int D = c.head_dim();
    if (!allow_any_head_dim && D != 64 && D != 128)
        fatal("head dim --width/--heads = %d/%d = %d is not supported: use 64 or 128", c.n_embd, c.n_head, D);
    if (D % 2 != 0) fatal("head dim %d must be even for rotary embedding", D);
    if (!c.layer_attn.empty() && (int)c.layer_attn.size() != c.n_layer)
        fatal("%zu attention patterns given for %d layers", c.layer_attn.size(), c.n_layer);
    if (!(c.rope_theta > 1)) fatal("--rope-theta must be > 1 (got %g)", c.rope_theta);
}

inline std::string config_to_json(const GPTConfig& c) {
    std::string attn = "[";
    for (int l = 0; l < c.n_layer; l++) {
        const AttnPattern p = c.attn(l);
        attn += (l ? "," : "") + std::string("{\"kind\":\"") + attn_kind_name(p.kind) +
                "\",\"causal\":" + (p.causal ? "true" : "false") + "}";
    }
    attn += "]";
    char buf[256];
    snprintf(buf, sizeof buf, "{\"vocab_size\":%d,\"n_layer\":%d,\"n_embd\":%d,\"n_head\":%d,\"rope_theta\":%g,",
             c.vocab_size, c.n_layer, c.n_embd, c.n_head, c.rope_theta);
    return std::string(buf) + "\"layer_attn\":" + attn + "}";
}

// Throws JsonError on a malformed or incomplete config.
inline GPTConfig config_from_json(const std::string& text) {
    Json j = JsonParser(text).parse();
    GPTConfig c;
    c.vocab_size = (int)j.at("vocab_size").as_number();
    c.n_layer = (int)j.at("n_layer").as_number();
    c.n_embd = (int)j.at("n_embd").as_number();
    c.n_head = (int)j.at("n_head").as_number();
    c.rope_theta = (float)j.at("rope_theta").as_number();
    for (const Json& p : j.at("layer_attn").arr) {
        AttnPattern a;
        if (p.at("kind").as_string() != "dense") throw JsonError("unknown attention kind " + p.at("kind").as_string());
        a.causal = p.at("causal").b;
        c.layer_attn.push_back(a);
    }
    return c;
}
