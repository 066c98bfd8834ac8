// The model's shape, its validation (one-line errors naming the flag), and its JSON form
// (kept in every checkpoint's metadata).
#pragma once
#include <algorithm>
#include <iterator>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>
#include "layers/attention_pattern.h"
#include "layers/common.h"
#include "core/json.h"
#include "core/lists.h"

struct GPTConfig {
    int vocab_size = 8192;
    int n_layer = 4;
    int n_embd = 128;   // C
    int n_head = 2;     // H; head dim D = C / H
    float rope_theta = 10000.0f;
    // Layers without rotary embedding (NoPE: their attention matches q and k by content alone,
    // the same at every distance), sorted; the rest rotate with rope_theta.
    std::vector<int> nope_layers;
    // Log-n attention in the NoPE layers (0: off): a query at position p >= logn_attn is scaled
    // by ln(p + 1) / ln(logn_attn) (layers/rope.h logn_scale_queries). Set it to the longest
    // window trained on, where it changes nothing, to read further.
    int logn_attn = 0;
    // Each head of a NoPE layer learns the slope of its log-n factor: a query at p >= logn_attn is
    // scaled by 1 + s_h ln((p + 1) / logn_attn) (layers/rope.h logn_scale_queries), s_h starting
    // at 1 / ln(logn_attn), where the factor is the fixed one above (to the rounding of the slope
    // to bf16 on the GPU, ~4e-4 of the factor). The slopes, one (H) tensor per NoPE layer, are the
    // model's "attn.logn_slope".
    bool logn_learn = false;
    // The NoPE layers' queries and keys pass a causal depthwise convolution of this many tokens
    // (0: off; layers/qk_conv.h), so that a head can match a phrase rather than one token. Its
    // weights, one (W, 2C) tensor per NoPE layer, are the model's "attn.qk_conv.weight".
    int qk_conv = 0;
    // The NoPE layers whose q and k are convolved, sorted; empty: every NoPE layer. A subset
    // leaves the others matching single tokens.
    std::vector<int> qk_conv_layers;
    // Every layer's softmax has one more key per head, of learned score and zero value, so that a
    // head can attend nowhere (layers/attn_sink.h). Its logits, one (H) tensor per layer, are the
    // model's "attn.sink".
    bool attn_sink = false;
    // A pointer after the last LayerNorm (layers/pointer.h): one more head, of head_dim(), whose
    // copy distribution is mixed into the output by a gate. Its weights are the model's "ptr.*".
    bool pointer = false;
    // One pattern per layer. Empty means every layer is dense causal. A per-layer setting so
    // patterns can mix with dense layers and with each other.
    std::vector<AttnPattern> layer_attn;

    int head_dim() const { return n_embd / n_head; }
    AttnPattern attn(int layer) const { return layer_attn.empty() ? AttnPattern{} : layer_attn[layer]; }
    // The rotary base of a layer: 0 for a NoPE layer (layers/rope.h: base 0 rotates nothing).
    float layer_rope_theta(int layer) const {
        return std::binary_search(nope_layers.begin(), nope_layers.end(), layer) ? 0.0f : rope_theta;
    }
    // The log-n base of a layer's queries: logn_attn in a NoPE layer, else 0 (no scaling).
    int layer_logn_base(int layer) const {
        return logn_attn && std::binary_search(nope_layers.begin(), nope_layers.end(), layer) ? logn_attn : 0;
    }
    // Whether a layer's heads learn their log-n slopes: logn_learn in a NoPE layer.
    bool layer_logn_learn(int layer) const { return logn_learn && layer_logn_base(layer) != 0; }
    // The width of a layer's q/k convolution: qk_conv in a NoPE layer that qk_conv_layers names
    // (or in every NoPE layer when it names none), else 0 (none).
    int layer_qk_conv(int layer) const {
        const bool named = qk_conv_layers.empty() || std::binary_search(qk_conv_layers.begin(), qk_conv_layers.end(), layer);
        return qk_conv && named && std::binary_search(nope_layers.begin(), nope_layers.end(), layer) ? qk_conv : 0;
    }
};

// Limits on the model's shape: far above anything this project trains, low enough that every
// size derived from them (3C, 4C, V*C, the parameter count) is computed without overflow and a
// corrupt or absurd config is refused before anything is allocated.
constexpr int kMaxVocab = 1 << 21, kMaxLayers = 1024, kMaxWidth = 1 << 16;
constexpr long long kMaxParams = 1LL << 34;
// Tokens in one window, and in one batch: positions are int, and 2^28 is 64x the longest
// window one GPU trains today.
constexpr int kMaxSeqLen = 1 << 28;  // 16 bytes each with grads and AdamW state: 256 GiB

// The rotary base: one rule for the flag and for the checkpoint's config (which records the
// float with 9 significant digits, so it reads back as the same float). Far above any base in
// use (1e7 here, 5e5 to 1e8 in published long-context models), far below where theta^(-2i/D)
// leaves float's normal range.
constexpr float kMaxRopeTheta = 1e12f;
inline std::string rope_theta_error(float theta) {
    if (theta > 1 && theta <= kMaxRopeTheta) return "";
    char buf[128];
    snprintf(buf, sizeof buf, "--rope-theta must be in (1, %g] (got %.9g)", (double)kMaxRopeTheta, (double)theta);
    return buf;
}

// {1, 3, 5} -> "1,3,5" (the form --nope-layers takes)
inline std::string int_list_text(const std::vector<int>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); i++) s += (i ? "," : "") + std::to_string(v[i]);
    return s;
}

// The NoPE layers: one rule for --nope-layers and for the checkpoint's config (sorted, distinct,
// each a layer of the model).
inline std::string nope_layers_error(const std::vector<int>& layers, int n_layer) {
    for (size_t i = 0; i < layers.size(); i++) {
        if (layers[i] < 0 || layers[i] >= n_layer)
            return "--nope-layers: layer " + std::to_string(layers[i]) + " does not exist (the model has " + std::to_string(n_layer) + " layers)";
        if (i && layers[i] <= layers[i - 1]) return "--nope-layers must list distinct layers in increasing order (got " +
                                                    std::to_string(layers[i - 1]) + " before " + std::to_string(layers[i]) + ")";
    }
    return "";
}

// Log-n attention: one rule for --logn-attn (train and infer) and the checkpoint's config.
inline std::string logn_attn_error(int base, const std::vector<int>& nope_layers) {
    if (base == 0) return "";
    if (base < 2 || base > kMaxSeqLen)
        return "--logn-attn must be 0 (off) or a window length in [2, " + std::to_string(kMaxSeqLen) + "] (got " + std::to_string(base) + ")";
    if (nope_layers.empty())
        return "--logn-attn scales the queries of NoPE layers and the model has none (train --nope-layers makes them): drop --logn-attn";
    return "";
}
inline std::string logn_learn_error(bool learn, int base) {
    if (learn && base == 0)
        return "--logn-learn learns the slope of each NoPE head's log-n factor and log-n attention is off: give --logn-attn N too";
    return "";
}

// The q/k convolution: one rule for --qk-conv and the checkpoint's config. The ceiling keeps the
// kernels' per-thread loops short; published uses take 3 (Primer) or 4.
constexpr int kMaxQkConv = 64;
inline std::string qk_conv_error(int width, const std::vector<int>& nope_layers) {
    if (width == 0) return "";
    if (width < 2 || width > kMaxQkConv)
        return "--qk-conv must be 0 (off) or a convolution's width in [2, " + std::to_string(kMaxQkConv) + "] (got " + std::to_string(width) + ")";
    if (nope_layers.empty())
        return "--qk-conv acts on the queries and keys of NoPE layers and the model has none (train --nope-layers makes them): drop --qk-conv";
    return "";
}
inline std::string qk_conv_layers_error(const std::vector<int>& layers, int width, const std::vector<int>& nope_layers) {
    if (layers.empty()) return "";
    if (width == 0) return "--qk-conv-layers names the layers of a q/k convolution and --qk-conv is 0: give --qk-conv W or drop --qk-conv-layers";
    for (size_t i = 0; i < layers.size(); i++) {
        if (!std::binary_search(nope_layers.begin(), nope_layers.end(), layers[i]))
            return "--qk-conv-layers: layer " + std::to_string(layers[i]) + " is not a NoPE layer (--nope-layers " +
                   int_list_text(nope_layers) + "): the convolution acts on NoPE layers only";
        if (i && layers[i] <= layers[i - 1]) return "--qk-conv-layers must list distinct layers in increasing order (got " +
                                                    std::to_string(layers[i - 1]) + " before " + std::to_string(layers[i]) + ")";
    }
    return "";
}

// Under context parallelism a rank's first tokens would read the rows of the rank before, which
// the ring does not send.
constexpr const char* kQkConvRingError =
    "--qk-conv and --cp do not combine (a rank's first tokens would need the last rows of the rank before): drop one of them";
// The pointer's head is one more dense head over the whole window, which the ring does not run.
constexpr const char* kPointerRingError = "--pointer and --cp do not combine (the pointer's head reads the whole window): drop one of them";

// False when every layer is NoPE: rope_theta then shapes nothing (a flag for it has no effect,
// and two such models are the same whatever their recorded bases).
inline bool rotates_any_layer(const GPTConfig& c) { return (int)c.nope_layers.size() < c.n_layer; }
// Whether two configs rotate differently by their base (train's --resume and --init-from checks).
inline bool rope_bases_differ(const GPTConfig& a, const GPTConfig& b) {
    return a.rope_theta != b.rope_theta && (rotates_any_layer(a) || rotates_any_layer(b));
}

// Parameters of a config, in 64 bits: the sum of param_layout's tensor sizes (its flat buffer adds
// the alignment's padding, fewer than 8 elements after a tensor).
inline long long config_param_count(const GPTConfig& c) {
    const long long C = c.n_embd, V = c.vocab_size, L = c.n_layer;
    long long conv = 0;  // a (W, 2C) tensor per NoPE layer with a q/k convolution
    for (int l = 0; l < c.n_layer; l++) conv += (long long)c.layer_qk_conv(l) * 2 * C;
    const long long sinks = c.attn_sink ? L * c.n_head : 0;  // an (H) tensor per layer
    long long slopes = 0;                                      // an (H) tensor per NoPE layer that learns them
    for (int l = 0; l < c.n_layer; l++) slopes += c.layer_logn_learn(l) ? c.n_head : 0;
    const long long pointer = c.pointer ? 2LL * c.head_dim() * C + C + 1 : 0;  // query, key, gate
    return V * C + L * (12 * C * C + 13 * C) + 2 * C + conv + sinks + slopes + pointer;
}

// Head dims the kernels take. The CPU reference takes any even head dim; the tests use small
// ones (allow_any_head_dim) to keep finite differences cheap.
inline void validate_config(const GPTConfig& c, bool allow_any_head_dim = false) {
    if (c.vocab_size < 2 || c.vocab_size > kMaxVocab) fatal("--vocab must be in [2, %d] (got %d)", kMaxVocab, c.vocab_size);
    if (c.n_layer < 1 || c.n_layer > kMaxLayers) fatal("--layers must be in [1, %d] (got %d)", kMaxLayers, c.n_layer);
    if (c.n_embd < 1 || c.n_head < 1) fatal("--width and --heads must be positive (got %d, %d)", c.n_embd, c.n_head);
    if (c.n_embd > kMaxWidth) fatal("--width must be at most %d (got %d)", kMaxWidth, c.n_embd);
    if (c.n_embd % c.n_head != 0)
        fatal("--heads %d does not divide --width %d: pick a width that is a multiple of the heads", c.n_head, c.n_embd);
    const int D = c.head_dim();
    if (!allow_any_head_dim && D != 64 && D != 128)
        fatal("head dim --width/--heads = %d/%d = %d is not supported: use 64 or 128", c.n_embd, c.n_head, D);
    if (D % 2 != 0) fatal("head dim %d must be even for rotary embedding", D);
    if (config_param_count(c) > kMaxParams)
        fatal("the model would have %lld parameters, more than the %lld this build allows: lower --layers, --width or the vocabulary",
              config_param_count(c), kMaxParams);
    if (!c.layer_attn.empty() && (int)c.layer_attn.size() != c.n_layer)
        fatal("%zu attention patterns given for %d layers", c.layer_attn.size(), c.n_layer);
    for (const AttnPattern& p : c.layer_attn) {
        const std::string heads = pattern_heads_error(p, c.n_head);
        if (!heads.empty()) fatal("%s (the model's heads)", heads.c_str());
        const std::string why = pattern_error(p);
        if (!why.empty()) fatal("attention pattern: %s", why.c_str());
    }
    const std::string theta = rope_theta_error(c.rope_theta);
    if (!theta.empty()) fatal("%s", theta.c_str());
    const std::string nope = nope_layers_error(c.nope_layers, c.n_layer);
    if (!nope.empty()) fatal("%s", nope.c_str());
    const std::string logn = logn_attn_error(c.logn_attn, c.nope_layers);
    if (!logn.empty()) fatal("%s", logn.c_str());
    const std::string learn = logn_learn_error(c.logn_learn, c.logn_attn);
    if (!learn.empty()) fatal("%s", learn.c_str());
    const std::string conv = qk_conv_error(c.qk_conv, c.nope_layers);
    if (!conv.empty()) fatal("%s", conv.c_str());
    const std::string conv_layers = qk_conv_layers_error(c.qk_conv_layers, c.qk_conv, c.nope_layers);
    if (!conv_layers.empty()) fatal("%s", conv_layers.c_str());
}

// The per-layer patterns from the flags: --attn, a pattern name or a comma list of them cycled
// over the layers ("block-sparse,fixed": even layers block-sparse, odd ones fixed), then
// --layer-pattern, LAYER:NAME entries that give single layers another pattern ("1:dense,3:dense"
// in a block-sparse model). Each pattern is built from its own flags and named as the registry
// names it, so neither the model nor the programs name a pattern.
inline std::vector<AttnPattern> layer_patterns_from_flags(int n_layer, const std::string& attn, const PatternFlags& flags,
                                                          const std::string& layer_pattern = "") {
    std::vector<AttnPattern> cycle;
    for (size_t at = 0; at <= attn.size();) {
        const size_t comma = std::min(attn.find(',', at), attn.size());
        cycle.push_back(pattern_from_flags(attn.substr(at, comma - at), flags));
        at = comma + 1;
    }
    if ((int)cycle.size() > n_layer)
        fatal("--attn %s names %zu patterns for %d layers: give one, or at most one per layer", attn.c_str(), cycle.size(), n_layer);
    std::vector<AttnPattern> out;
    for (int l = 0; l < n_layer; l++) out.push_back(cycle[l % cycle.size()]);
    if (layer_pattern.empty()) return out;
    std::vector<bool> given(n_layer, false);
    for (const std::string& entry : split_commas("--layer-pattern", layer_pattern)) {
        const size_t colon = entry.find(':');
        if (colon == std::string::npos)
            fatal("--layer-pattern: '%s' is not LAYER:PATTERN: give entries such as 1:%s", entry.c_str(), attn_kind_name(AttnKind::Dense));
        const int l = (int)parse_int("--layer-pattern: layer", entry.substr(0, colon), 0, 2147483647);
        if (l >= n_layer) fatal("--layer-pattern: layer %d does not exist (the model has %d layers, 0 to %d)", l, n_layer, n_layer - 1);
        if (given[l]) fatal("--layer-pattern: layer %d is given twice: give each layer once", l);
        given[l] = true;
        const std::string name = entry.substr(colon + 1);
        const AttnPattern p = pattern_from_flags(name, flags, "--layer-pattern");
        // An entry that changes nothing is refused: the user believes it shaped the model.
        if (p.kind == out[l].kind)
            fatal("--layer-pattern: layer %d is %s already (--attn %s), so %s changes nothing: drop it", l, name.c_str(), attn.c_str(),
                  entry.c_str());
        out[l] = p;
    }
    return out;
}

// A flag that gave one pattern's layers (--<pattern>-layers 3,7, a pattern of the registry) is
// refused with the --layer-pattern entries that replace it: "" when argv has none.
inline std::string retired_layer_flag_error(int argc, char** argv) {
    for (int i = 1; i < argc; i++) {
        std::string arg = argv[i], value;
        const size_t eq = arg.find('=');
        if (eq != std::string::npos) value = arg.substr(eq + 1), arg = arg.substr(0, eq);
        else if (i + 1 < argc) value = argv[i + 1];
        const std::string suffix = "-layers";
        if (arg.rfind("--", 0) != 0 || arg.size() <= 2 + suffix.size() || arg.compare(arg.size() - suffix.size(), suffix.size(), suffix) != 0)
            continue;
        std::string name = arg.substr(2, arg.size() - 2 - suffix.size());
        AttnKind kind;
        if (!attn_kind_from_name(name, &kind)) continue;
        std::string entries;
        for (size_t at = 0; at < value.size() && value[0] != '-';) {
            const size_t comma = std::min(value.find(',', at), value.size());
            entries += (entries.empty() ? "" : ",") + value.substr(at, comma - at) + ":" + name;
            at = comma + 1;
        }
        if (entries.empty()) entries = "LAYER:" + name + ",... (e.g. 3:" + name + ",7:" + name + ")";
        return arg + " is gone: use --layer-pattern " + entries;
    }
    return "";
}

inline std::string config_to_json(const GPTConfig& c) {
    std::string attn = "[";
    for (int l = 0; l < c.n_layer; l++) attn += (l ? "," : "") + pattern_to_json(c.attn(l));
    attn += "]";
    char buf[256];
    snprintf(buf, sizeof buf, "{\"vocab_size\":%d,\"n_layer\":%d,\"n_embd\":%d,\"n_head\":%d,\"rope_theta\":%.9g,",
             c.vocab_size, c.n_layer, c.n_embd, c.n_head, c.rope_theta);
    // Written only when there are NoPE layers, so configs without them read as before.
    const std::string nope = c.nope_layers.empty() ? "" : "\"nope_layers\":[" + int_list_text(c.nope_layers) + "],";
    const std::string logn = c.logn_attn ? "\"logn_attn\":" + std::to_string(c.logn_attn) + "," : "";  // likewise
    const std::string conv = c.qk_conv ? "\"qk_conv\":" + std::to_string(c.qk_conv) + "," : "";  // likewise
    const std::string conv_layers = c.qk_conv_layers.empty() ? "" : "\"qk_conv_layers\":[" + int_list_text(c.qk_conv_layers) + "],";
    const std::string learn = c.logn_learn ? "\"logn_learn\":true," : "";  // likewise
    const std::string sink = c.attn_sink ? "\"attn_sink\":true," : "";  // likewise
    const std::string pointer = c.pointer ? "\"pointer\":true," : "";  // likewise
    return std::string(buf) + nope + logn + learn + conv + conv_layers + sink + pointer + "\"layer_attn\":" + attn + "}";
}

// Throws JsonError on a malformed or incomplete config (values of the wrong type or outside
// what an int holds included); validate_config then applies the limits.
inline GPTConfig config_from_json(const std::string& text) {
    Json j = JsonParser(text).parse();
    if (j.kind != Json::Object) throw JsonError("config is not an object");
    // A key this build does not know is refused, not dropped: a model written by a newer build
    // (or edited by hand) would otherwise run as another model, and a resume would drop the key.
    for (const auto& [key, value] : j.obj) {
        static const char* const kKeys[] = {"vocab_size", "n_layer", "n_embd", "n_head", "rope_theta", "layer_attn", "nope_layers", "logn_attn",
                                             "logn_learn", "qk_conv", "qk_conv_layers", "attn_sink", "pointer"};
        if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys))
            throw JsonError("unknown key \"" + key.substr(0, 40) + "\" (this build reads vocab_size, n_layer, n_embd, n_head, rope_theta, "
                            "layer_attn, nope_layers, logn_attn, logn_learn, qk_conv, qk_conv_layers, attn_sink, pointer): use the build that wrote it, or remove the key");
    }
    const long long kInt = 2147483647;
    GPTConfig c;
    c.vocab_size = (int)j.at("vocab_size").as_int("vocab_size", 0, kInt);
    c.n_layer = (int)j.at("n_layer").as_int("n_layer", 0, kInt);
    c.n_embd = (int)j.at("n_embd").as_int("n_embd", 0, kInt);
    c.n_head = (int)j.at("n_head").as_int("n_head", 0, kInt);
    const double theta = j.at("rope_theta").as_number();  // validate_config applies rope_theta_error
    if (!(std::fabs(theta) < 1e38)) throw JsonError("rope_theta is not a finite float");
    c.rope_theta = (float)theta;
    const std::vector<Json>& layers = j.at("layer_attn").as_array("layer_attn");
    if (layers.size() > (size_t)kMaxLayers) throw JsonError("layer_attn has too many entries");
    for (const Json& p : layers) c.layer_attn.push_back(pattern_from_json(p));
    if (j.has("nope_layers")) {  // validate_config applies nope_layers_error
        const std::vector<Json>& nope = j.at("nope_layers").as_array("nope_layers");
        if (nope.size() > (size_t)kMaxLayers) throw JsonError("nope_layers has too many entries");
        for (const Json& l : nope) c.nope_layers.push_back((int)l.as_int("nope_layers", -kInt, kInt));
    }
    if (j.has("logn_attn")) c.logn_attn = (int)j.at("logn_attn").as_int("logn_attn", -kInt, kInt);  // validate_config: logn_attn_error
    if (j.has("logn_learn")) c.logn_learn = j.at("logn_learn").as_bool("logn_learn");  // validate_config: logn_learn_error
    if (j.has("qk_conv")) c.qk_conv = (int)j.at("qk_conv").as_int("qk_conv", -kInt, kInt);  // validate_config: qk_conv_error
    if (j.has("qk_conv_layers")) {  // validate_config: qk_conv_layers_error
        const std::vector<Json>& conv = j.at("qk_conv_layers").as_array("qk_conv_layers");
        if (conv.size() > (size_t)kMaxLayers) throw JsonError("qk_conv_layers has too many entries");
        for (const Json& l : conv) c.qk_conv_layers.push_back((int)l.as_int("qk_conv_layers", -kInt, kInt));
    }
    if (j.has("attn_sink")) c.attn_sink = j.at("attn_sink").as_bool("attn_sink");
    if (j.has("pointer")) c.pointer = j.at("pointer").as_bool("pointer");
    return c;
}
