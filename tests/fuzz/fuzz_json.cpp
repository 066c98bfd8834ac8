// libFuzzer harness: the JSON parser and the model config (core/json.h, model/gpt_config.h),
// as a checkpoint's "config" metadata and a safetensors header reach them.
//
// Feeds the input bytes, as text, to
//   1. JsonParser::parse;
//   2. json_quote + parse: quoting any byte string must parse back to the same string;
//   3. config_from_json + validate_config(allow_any_head_dim = true), exactly as load_checkpoint
//      does; a config that passes must survive config_to_json -> config_from_json unchanged
//      (that text is what checkpoints store) and validate again.
// Findings: see tests/fuzz/fuzz_common.h (anything but FatalError/JsonError escaping, a
// sanitizer report, a failed FUZZ_CHECK). Seeds: tests/fuzz/json/seeds, dictionary json.dict.
#include "model/gpt_config.h"
#include "core/json.h"
#include "tests/fuzz/fuzz_common.h"

// Per layer, as the model sees them (an empty layer_attn means all dense).
static bool same_patterns(const GPTConfig& a, const GPTConfig& b) {
    for (int l = 0; l < a.n_layer; l++) {
        const AttnPattern p = a.attn(l), q = b.attn(l);
        if (p.kind != q.kind || p.causal != q.causal || p.dilated.segments != q.dilated.segments || p.dilated.dilations != q.dilated.dilations) return false;
    }
    return true;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);

    try {
        (void)JsonParser(text).parse();
    } catch (const JsonError& e) {
        fuzz_rejected(e);
    }

    {
        const std::string quoted = json_quote(text);
        Json q;
        try {
            q = JsonParser(quoted).parse();
        } catch (const JsonError& e) {
            FUZZ_CHECK(false, "json_quote output does not parse: %s", e.what());
        }
        FUZZ_CHECK(q.kind == Json::String && q.str == text, "json_quote -> parse does not give the string back");
    }

    GPTConfig c;
    try {
        c = config_from_json(text);
        validate_config(c, /*allow_any_head_dim=*/true);
    } catch (const JsonError& e) {
        fuzz_rejected(e);
        return 0;
    } catch (const FatalError& e) {
        fuzz_rejected(e);
        return 0;
    }
    const std::string saved = config_to_json(c);
    GPTConfig back;
    try {
        back = config_from_json(saved);
        validate_config(back, /*allow_any_head_dim=*/true);
    } catch (const std::runtime_error& e) {
        FUZZ_CHECK(false, "a valid config does not load back from its own JSON %s: %s", saved.c_str(), e.what());
    }
    FUZZ_CHECK(back.vocab_size == c.vocab_size && back.n_layer == c.n_layer && back.n_embd == c.n_embd &&
                   back.n_head == c.n_head && same_patterns(back, c),
               "config changes through config_to_json: %s", saved.c_str());
    FUZZ_CHECK(back.rope_theta == c.rope_theta, "rope_theta %.9g comes back as %.9g through config_to_json (%s)",
               c.rope_theta, back.rope_theta, saved.c_str());
    return 0;
}
