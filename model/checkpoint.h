// Checkpoints: one safetensors file per save, "<out>/ckpt_<step>.safetensors".
// Tensors: the model's parameters under their names (param_layout), F32; training
// checkpoints also hold the AdamW moments as "optim.m.<name>" and "optim.v.<name>" (optim/adamw.h).
// Metadata (all strings): "format" = "longnet-gpt/1", "config" (the GPTConfig as JSON),
// "forward" (what the forward computes beyond the shapes: forward_record_json), "tokenizer"
// (the SentencePiece .model file, base64), and for training state "step", "loader_epoch",
// "loader_cursor", "train_args" (the flags that shape the run, as JSON) and "recipe" (the
// identities of the token files it trains on: data/identity.h).
#pragma once
#include <dirent.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <set>
#include <string>
#include <vector>
#include "core/train_stages.h"
#include "model/backend.h"
#include "model/safetensors.h"
#include "model/train_rules.h"
#include "optim/adamw.h"

inline std::string base64_encode(const std::string& in) {
    static const char* tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        uint32_t v = ((uint8_t)in[i] << 16) | ((uint8_t)in[i + 1] << 8) | (uint8_t)in[i + 2];
        out += tbl[v >> 18], out += tbl[(v >> 12) & 63], out += tbl[(v >> 6) & 63], out += tbl[v & 63];
    }
    if (i + 1 == in.size()) {
        uint32_t v = (uint8_t)in[i] << 16;
        out += tbl[v >> 18], out += tbl[(v >> 12) & 63], out += "==";
    } else if (i + 2 == in.size()) {
        uint32_t v = ((uint8_t)in[i] << 16) | ((uint8_t)in[i + 1] << 8);
        out += tbl[v >> 18], out += tbl[(v >> 12) & 63], out += tbl[(v >> 6) & 63], out += '=';
    }
    return out;
}

// Returns false on a character outside the alphabet or a bad length.
inline bool base64_decode(const std::string& in, std::string* out) {
    auto val = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    if (in.size() % 4) return false;
    out->clear();
    for (size_t i = 0; i < in.size(); i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            v[k] = in[i + k] == '=' ? 0 : val(in[i + k]);
            if (v[k] < 0) return false;
        }
        uint32_t x = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
        *out += (char)(x >> 16);
        if (in[i + 2] != '=') *out += (char)((x >> 8) & 255);
        if (in[i + 3] != '=') *out += (char)(x & 255);
    }
    return true;
}

struct TrainState {
    int step = 0;     // training steps done (each consumed one batch)
    int updates = 0;  // AdamW updates applied: step less the steps skipped for a non-finite loss
    uint64_t loader_epoch = 0, loader_cursor = 0;
    std::string train_args;  // JSON
    std::string recipe;      // the token files' identities, JSON (data/identity.h); "" in checkpoints from before them
};

struct Checkpoint {
    GPTConfig cfg;
    std::string tokenizer;  // .model bytes
    std::vector<float> params, m, v;  // m, v empty when the file holds no training state
    bool has_train_state = false;
    TrainState state;
};

inline std::string checkpoint_path(const std::string& dir, int step) {
    char name[64];
    snprintf(name, sizeof name, "/ckpt_%08d.safetensors", step);
    return dir + name;
}

// The checkpoints in dir, oldest (lowest step) first.
inline std::vector<std::string> list_checkpoints(const std::string& dir) {
    std::vector<std::string> names;
    DIR* d = opendir(dir.c_str());
    if (!d) return names;
    while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n.rfind("ckpt_", 0) == 0 && n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0)
            names.push_back(dir + "/" + n);
    }
    closedir(d);
    std::sort(names.begin(), names.end());  // zero-padded steps sort in step order
    return names;
}

// The checkpoint of the highest step in dir, or "" when there is none.
inline std::string latest_checkpoint(const std::string& dir) {
    const std::vector<std::string> all = list_checkpoints(dir);
    return all.empty() ? "" : all.back();
}

// The metadata "forward": what the forward pass computes beyond the config's shapes, so that a
// reader runs a checkpoint without this code (docs/training.md lists the fields,
// scripts/reference_model.py reads them). Each value is what the code computes: the LayerNorm
// epsilon (layers/layernorm.h), the GELU's tanh form (layers/gelu.h), the rotary pairing of
// dimension i with i + D/2 (layers/rope.h), the LM head tied to wte and the attention scale
// 1/sqrt(D) (model/gpt.h); per layer the rotary base (0: NoPE), the log-n base (0: none), in a
// layer that has one the width of the q/k convolution (layers/qk_conv.h; its weights the layer's
// attn.qk_conv.weight), in a NoPE layer whose heads learn their log-n slopes "logn_slope": true
// (layers/rope.h logn_slope_scale: the factor 1 + s_h ln((p + 1) / logn_base), s the layer's
// attn.logn_slope) and, in a model with them, "attn_sink": true (layers/attn_sink.h; the
// logits the layer's attn.sink); the last three written only there, so records of models without
// them read as before. Each layer's attention pattern, with its parameters, is the config's
// layer_attn. A model with a pointer has "pointer" (layers/pointer.h: its head's scale, the null
// key, the keys from the state before, the gate's mixture in probability), likewise only there.
inline std::string forward_record_json(const GPTConfig& c) {
    std::string layers = "[";
    for (int l = 0; l < c.n_layer; l++)
        layers += strf("%s{\"rotary_base\":%.9g,\"logn_base\":%d%s%s%s}", l ? "," : "", (double)c.layer_rope_theta(l),
                       c.layer_logn_base(l), c.layer_qk_conv(l) ? strf(",\"qk_conv\":%d", c.layer_qk_conv(l)).c_str() : "",
                       c.layer_logn_learn(l) ? ",\"logn_slope\":true" : "", c.attn_sink ? ",\"attn_sink\":true" : "");
    const std::string pointer =
        c.pointer ? strf(",\"pointer\":{\"scale\":%.9g,\"null_key\":true,\"key_from\":\"previous_state\",\"mix\":\"probability\"}",
                         1.0 / std::sqrt((double)c.head_dim()))
                  : "";
    return strf("{\"layernorm_eps\":%.9g,\"activation\":\"gelu_tanh\",\"rotary\":\"half_split\",\"lm_head\":\"tied_to_wte\","
                "\"attn_scale\":%.9g,\"layers\":%s]%s}",
                kLayerNormEps, 1.0 / std::sqrt((double)c.head_dim()), layers.c_str(), pointer.c_str());
}

inline void save_checkpoint(const std::string& path, ModelBackend& model, const std::string& tokenizer,
                            const TrainState* state) {
    const std::vector<ParamTensor> layout = param_layout(model.config());
    std::vector<float> params(model.num_params()), m, v;
    model.get_params(params.data());
    std::vector<TensorToWrite> tensors;
    for (const ParamTensor& t : layout) tensors.push_back({t.name, t.shape, params.data() + t.offset});
    std::map<std::string, std::string> meta = {
        {"format", "longnet-gpt/1"},
        {"config", config_to_json(model.config())},
        {"forward", forward_record_json(model.config())},
        {"tokenizer", base64_encode(tokenizer)}};
    if (state) {
        m.resize(model.num_params()), v.resize(model.num_params());
        model.get_opt_state(m.data(), v.data());
        for (const ParamTensor& t : layout) {
            tensors.push_back({kAdamWFirstMoment + t.name, t.shape, m.data() + t.offset});
            tensors.push_back({kAdamWSecondMoment + t.name, t.shape, v.data() + t.offset});
        }
        meta["step"] = std::to_string(state->step);
        meta["updates"] = std::to_string(state->updates);
        meta["loader_epoch"] = std::to_string(state->loader_epoch);
        meta["loader_cursor"] = std::to_string(state->loader_cursor);
        meta["train_args"] = state->train_args;
        if (!state->recipe.empty()) meta["recipe"] = state->recipe;
    }
    write_safetensors(path, tensors, meta);
}

// Every value a checkpoint's metadata holds is checked here, once, so that train and infer can
// trust what they get: a corrupt or hostile file ends in one line naming the file.
inline uint64_t parse_metadata_uint(const std::string& text, uint64_t max, const std::string& path, const char* key) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = text.empty() || text[0] == '-' ? 0 : std::strtoull(text.c_str(), &end, 10);
    if (text.empty() || text[0] < '0' || text[0] > '9' || !end || *end || errno || v > max)
        fatal("checkpoint %s: its \"%s\" is \"%.40s\", not an integer in [0, %llu]: the file is corrupt, use another checkpoint",
              path.c_str(), key, text.c_str(), (unsigned long long)max);
    return v;
}

// The values a checkpoint may hold, one rule for the writer (train stops rather than save
// anything else) and the reader (load_checkpoint): weights finite and within kMaxCheckpointWeight
// (a trained model's weights are of order 1; an AdamW step moves a weight by about --lr <= 1, so
// no run that learns comes near 1e6: beyond it, a file is corrupt or edited), AdamW moments
// finite, the second moment (a mean of squares) not negative. m and v may be null (no training
// state). `what` is empty when every value passes, else e.g. "weights hold NaN or Inf", and
// `where` the first value at fault: `tensor "wte", element 3: nan`.
constexpr float kMaxCheckpointWeight = 1e6f;
struct CheckpointValuesError {
    std::string what, where;
};
inline CheckpointValuesError checkpoint_values_error(const std::vector<ParamTensor>& layout, const float* w, const float* m,
                                                     const float* v) {
    auto at = [&](const char* what, const char* prefix, const ParamTensor& t, size_t i, float x) {
        return CheckpointValuesError{what, strf("tensor \"%s%s\", element %zu: %g", prefix, t.name.c_str(), i - t.offset, x)};
    };
    for (const ParamTensor& t : layout)
        for (size_t i = t.offset; i < t.offset + t.size; i++) {
            if (!std::isfinite(w[i])) return at("weights hold NaN or Inf", "", t, i, w[i]);
            if (std::fabs(w[i]) > kMaxCheckpointWeight) return at("weights hold a value beyond +-1e6", "", t, i, w[i]);
            if (m && !std::isfinite(m[i])) return at("AdamW moments hold NaN or Inf", kAdamWFirstMoment, t, i, m[i]);
            if (v && !std::isfinite(v[i])) return at("AdamW moments hold NaN or Inf", kAdamWSecondMoment, t, i, v[i]);
            if (v && v[i] < 0) return at("AdamW moments hold a negative second moment", kAdamWSecondMoment, t, i, v[i]);
        }
    return {};
}

// A tensor name from a file, fit for a one-line message: control bytes shown as '?', cut at 80.
inline std::string printable_name(const std::string& name) {
    std::string out = name.substr(0, 80);
    for (char& c : out)
        if ((unsigned char)c < 0x20 || c == 0x7f) c = '?';
    return name.size() > 80 ? out + "..." : out;
}

// "" when `given` says what `expected` does (numbers to the 9 digits they are written with),
// else the first difference, e.g. `layernorm_eps is 1e-06, this build computes 1e-05`. A list
// of another length is refused before its entries are compared.
inline std::string forward_record_difference(const Json& given, const Json& expected, const std::string& at) {
    auto text = [](const Json& j) -> std::string {
        if (j.kind == Json::Number) return strf("%.9g", j.num);
        if (j.kind == Json::String) return "\"" + printable_name(j.str) + "\"";
        return j.kind == Json::Array ? "a list" : j.kind == Json::Object ? "an object" : "another value";
    };
    const std::string name = at.empty() ? "the record" : at;
    if (given.kind != expected.kind) return name + " is " + text(given) + ", this build computes " + text(expected);
    if (expected.kind == Json::Number) {
        const bool same = std::fabs(given.num - expected.num) <= 1e-7 * std::fabs(expected.num);
        return same ? "" : name + " is " + text(given) + ", this build computes " + text(expected);
    }
    if (expected.kind == Json::String)
        return given.str == expected.str ? "" : name + " is " + text(given) + ", this build computes " + text(expected);
    if (expected.kind == Json::Array) {
        if (given.arr.size() != expected.arr.size())
            return strf("%s has %zu entries, the model has %zu", name.c_str(), given.arr.size(), expected.arr.size());
        for (size_t i = 0; i < expected.arr.size(); i++) {
            const std::string d = forward_record_difference(given.arr[i], expected.arr[i], strf("%s[%zu]", name.c_str(), i));
            if (!d.empty()) return d;
        }
        return "";
    }
    for (const auto& [key, value] : given.obj)
        if (!expected.has(key)) return "it has a field \"" + printable_name(key) + "\" this build does not know";
    for (const auto& [key, value] : expected.obj) {
        if (!given.has(key)) return "it has no \"" + key + "\"";
        const std::string d = forward_record_difference(given.at(key), value, at.empty() ? key : at + "." + key);
        if (!d.empty()) return d;
    }
    return "";
}

// A checkpoint without "forward" was written before the record: what it implies is what this
// code computes. One with a record that says otherwise was written by another program (or
// edited), and running it here would run another model.
inline void check_forward_record(const std::map<std::string, std::string>& metadata, const GPTConfig& cfg, const std::string& path) {
    auto it = metadata.find("forward");
    if (it == metadata.end()) return;
    std::string why;
    try {
        why = forward_record_difference(JsonParser(it->second).parse(), JsonParser(forward_record_json(cfg)).parse(), "");
    } catch (const JsonError& e) {
        why = std::string("it is not JSON (") + e.what() + ")";
    }
    if (!why.empty())
        fatal("checkpoint %s: its \"forward\" record differs from what this build computes (%s): use the build or program that "
              "wrote it", path.c_str(), why.c_str());
}

// The config is held to train's rules (validate_config), head dims included, so that infer
// refuses a model train would refuse (a config edited to an unsupported head dim is refused by both).
// allow_any_head_dim: the CPU tests' small models only.
inline Checkpoint load_checkpoint(const std::string& path, bool allow_any_head_dim = false) {
    SafetensorsFile f = read_safetensors(path);
    Checkpoint c;
    auto meta = [&](const char* key) -> const std::string& {
        auto it = f.metadata.find(key);
        if (it == f.metadata.end()) fatal("checkpoint %s has no \"%s\" metadata: it was not written by train", path.c_str(), key);
        return it->second;
    };
    if (meta("format") != "longnet-gpt/1")
        fatal("checkpoint %s has format \"%.40s\", this build reads longnet-gpt/1", path.c_str(), meta("format").c_str());
    try {
        c.cfg = config_from_json(meta("config"));
    } catch (const JsonError& e) {
        fatal("checkpoint %s: its config is corrupt (%s)", path.c_str(), e.what());
    }
    try {
        validate_config(c.cfg, allow_any_head_dim);
    } catch (const FatalError& e) {
        fatal("checkpoint %s: its config is not a valid model (%s)", path.c_str(), e.what());
    }
    check_forward_record(f.metadata, c.cfg, path);
    if (!base64_decode(meta("tokenizer"), &c.tokenizer)) fatal("checkpoint %s: its tokenizer is corrupt", path.c_str());
    const std::vector<ParamTensor> layout = param_layout(c.cfg);
    const size_t n = layout.back().offset + layout.back().size;
    c.has_train_state = f.metadata.count("step") != 0;
    // Every tensor is found with its shape before anything is allocated: the file then holds
    // all of them, so the allocations below are bounded by its size.
    for (const ParamTensor& t : layout) {
        f.find(t.name, t.shape);
        if (c.has_train_state) f.find(kAdamWFirstMoment + t.name, t.shape), f.find(kAdamWSecondMoment + t.name, t.shape);
    }
    // ... and nothing else: a tensor this model does not read is not silently skipped (an edited
    // or foreign file; the tiling check in read_safetensors leaves it no bytes to hide in).
    if (f.tensors.size() != layout.size() * (c.has_train_state ? 3 : 1)) {
        std::set<std::string> expected;
        for (const ParamTensor& t : layout) {
            expected.insert(t.name);
            if (c.has_train_state) expected.insert(kAdamWFirstMoment + t.name), expected.insert(kAdamWSecondMoment + t.name);
        }
        for (const auto& [name, t] : f.tensors)
            if (!expected.count(name))
                fatal("checkpoint %s holds a tensor \"%s\" that the model of its config does not have (%zu tensors: %s, %s, ..., %s%s): "
                      "the file was edited or written by another program: use another checkpoint",
                      path.c_str(), printable_name(name).c_str(), layout.size(), layout[0].name.c_str(), layout[1].name.c_str(),
                      layout.back().name.c_str(),
                      c.has_train_state ? ", and optim.m.<name> and optim.v.<name> of each"
                                        : "; AdamW moments only with a \"step\" in the metadata");
    }
    c.params.resize(n);
    for (const ParamTensor& t : layout) f.read(t.name, t.shape, c.params.data() + t.offset);
    if (c.has_train_state) {
        c.m.resize(n), c.v.resize(n);
        for (const ParamTensor& t : layout) {
            f.read(kAdamWFirstMoment + t.name, t.shape, c.m.data() + t.offset);
            f.read(kAdamWSecondMoment + t.name, t.shape, c.v.data() + t.offset);
        }
    }
    // Out-of-range values would poison every later step (or every generated token).
    const CheckpointValuesError bad = checkpoint_values_error(layout, c.params.data(), c.has_train_state ? c.m.data() : nullptr,
                                                              c.has_train_state ? c.v.data() : nullptr);
    if (!bad.what.empty())
        fatal("checkpoint %s: its %s (%s): use an earlier checkpoint", path.c_str(), bad.what.c_str(), bad.where.c_str());
    if (c.has_train_state) {
        c.state.step = (int)parse_metadata_uint(meta("step"), 2147483647, path, "step");
        if (c.state.step < 1) fatal("checkpoint %s: its step is 0, but train saves after step 1 at the earliest: the file is corrupt", path.c_str());
        // Checkpoints written before steps could be skipped have no "updates": every step updated.
        c.state.updates = f.metadata.count("updates") ? (int)parse_metadata_uint(meta("updates"), c.state.step, path, "updates")
                                                      : c.state.step;
        c.state.loader_epoch = parse_metadata_uint(meta("loader_epoch"), 1ull << 40, path, "loader_epoch");
        c.state.loader_cursor = parse_metadata_uint(meta("loader_cursor"), 1ull << 40, path, "loader_cursor");
        c.state.train_args = meta("train_args");
        std::string rule;
        try {
            const Json args = JsonParser(c.state.train_args).parse();
            if (args.kind != Json::Object) throw JsonError("not an object");
            rule = recorded_train_args_error(args);  // each value held to its flag's rule (model/train_rules.h)
        } catch (const JsonError& e) {
            fatal("checkpoint %s: its train_args are corrupt (%s): use another checkpoint", path.c_str(), e.what());
        }
        if (!rule.empty())
            fatal("checkpoint %s: its recorded train_args break train's rules (%s): the file is corrupt, use another checkpoint",
                  path.c_str(), rule.c_str());
        // Checked where it is used (train --resume), which names the file; infer does not need it.
        if (f.metadata.count("recipe")) c.state.recipe = meta("recipe");
    }
    return c;
}

// The longest window a checkpoint's run trained on (its --seq-len, or its longest --schedule
// stage), checked: infer's default context.
inline int checkpoint_seq_len(const Checkpoint& c, const std::string& path, int max_seq_len) {
    try {
        const Json args = JsonParser(c.state.train_args).parse();
        const int seq_len = (int)args.at("seq_len").as_int("seq_len", 2, max_seq_len);
        if (!args.has("schedule")) return seq_len;
        // The stages as train read them (a stage may not repeat the shape before it, so stage 0's
        // batch is the run's); steps only bound where the stages may begin.
        const int batch = args.has("batch") ? (int)args.at("batch").as_int("batch", 1, max_seq_len) : 1;
        int longest = 0;
        try {
            for (const TrainStage& s : parse_schedule(args.at("schedule").as_string(), {0, seq_len, batch}, INT32_MAX, max_seq_len))
                longest = std::max(longest, s.seq_len);
        } catch (const FatalError& e) {
            throw JsonError(std::string("its schedule: ") + e.what());
        }
        return longest;
    } catch (const JsonError& e) {
        fatal("checkpoint %s: its train_args are corrupt (%s): pass --ctx to choose the context", path.c_str(), e.what());
    }
}
