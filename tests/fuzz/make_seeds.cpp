// Writes the seed corpora of the fuzz harnesses: small valid inputs of each format, written by
// the project's own writers, so the fuzzers start from the inside of every format.
//
//   make fuzz-seeds      (build/fuzz/make_seeds tests/fuzz)
//
// Output, under the given directory (the seeds are committed; re-run only when a format changes):
//   json/seeds/          configs as config_to_json writes them, a safetensors header, plain JSON
//   checkpoint/seeds/    checkpoints of tiny models (vocab 16, width 8) by save_checkpoint, in
//                        both of fuzz_checkpoint's input forms (.raw and .split)
//   shard_loader/seeds/  4 loader-setting bytes + a tiny shard by write_shard
//   tokenizer/seeds/     tiny SentencePiece models (bpe with byte fallback, unigram, char, word)
//   layout/seeds/        block-sparse layout files (shared and per head, comments, both masks),
//                        after fuzz_layout's mode byte
//   (task_file/seeds/ are lines of `data_tool tasks` output, committed as written, not made here)
//   kv_cache/seeds/      KV caches of the dense + dilated tiny model (init_weights(7)) by
//                        save_kv_cache, in both of fuzz_kv_cache's input forms
// Deterministic: the same bytes every run. Every seed is loaded back here (a seed the reader
// rejects would only test the first check).
#include <sys/stat.h>
#include <unordered_map>
#include "core/io.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "data/train_tokenizer.h"
#include "layers/patterns/block_layout.h"
#include "model/checkpoint.h"
#include "model/kv_cache_file.h"

static std::string dir_of(const std::string& root, const char* harness) {
    const std::string d = root + "/" + harness;
    ::mkdir(d.c_str(), 0755);
    ::mkdir((d + "/seeds").c_str(), 0755);
    return d + "/seeds/";
}

static GPTConfig tiny(int layers, int width, int heads) {
    GPTConfig c;
    c.vocab_size = 16, c.n_layer = layers, c.n_embd = width, c.n_head = heads;
    return c;
}

static GPTConfig tiny_dilated() {
    GPTConfig c = tiny(2, 8, 2);
    AttnPattern p;
    p.kind = AttnKind::Dilated, p.dilated.segments = {2, 4}, p.dilated.dilations = {1, 2};
    c.layer_attn = {p, AttnPattern{}};
    return c;
}

static void json_seeds(const std::string& out) {
    GPTConfig big;  // the defaults, as `make train` writes them
    GPTConfig theta = tiny(1, 8, 1);
    theta.rope_theta = 500000.0f;
    GPTConfig noncausal = tiny(1, 8, 1);
    noncausal.layer_attn = {AttnPattern{}};
    noncausal.layer_attn[0].causal = false;
    for (const GPTConfig& c : {big, theta, noncausal, tiny(1, 8, 1), tiny_dilated()})
        validate_config(config_from_json(config_to_json(c)), /*allow_any_head_dim=*/true);
    write_file_atomic(out + "config_default.json", config_to_json(big));
    write_file_atomic(out + "config_tiny.json", config_to_json(tiny(1, 8, 1)));
    write_file_atomic(out + "config_dilated.json", config_to_json(tiny_dilated()));
    write_file_atomic(out + "config_theta.json", config_to_json(theta));
    write_file_atomic(out + "config_noncausal.json", config_to_json(noncausal));
    write_file_atomic(out + "safetensors_header.json",
                      "{\"__metadata__\":{\"format\":\"longnet-gpt/1\",\"step\":\"3\"},"
                      "\"wte\":{\"dtype\":\"F32\",\"shape\":[16,8],\"data_offsets\":[0,512]}}");
    write_file_atomic(out + "values.json",
                      "[null, true, false, 0, -1.5e-3, 1E+2, \"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\u20ac\", "
                      "{}, [], {\"k\": [[1], {\"x\": \"y\"}]}]");
    write_file_atomic(out + "train_args.json",
                      "{\"batch\":2,\"seq_len\":4,\"lr\":0.001,\"seed\":1,\"doc_mask\":true}");
}

// A safetensors file as seeds of both input forms of fuzz_safetensors_bytes (fuzz_common.h):
// NAME.raw (mode 0 + the file) and NAME.split (mode 1 + header + NUL + data); the file is removed.
static void write_safetensors_seeds(const std::string& file, const std::string& name) {
    const std::string bytes = read_file(file, "");
    std::remove(file.c_str());
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
    write_file_atomic(name + ".raw", std::string(1, '\0') + bytes);
    write_file_atomic(name + ".split", std::string(1, '\1') + bytes.substr(8, n) + std::string(1, '\0') + bytes.substr(8 + n));
}

static void checkpoint_seeds(const std::string& out) {
    auto save = [&](const char* name, const GPTConfig& cfg, const TrainState* state) {
        CpuBackend model(cfg);
        model.init_weights(7);
        // The embedded tokenizer is not parsed on load (fuzz_tokenizer covers that): a few bytes.
        const std::string file = out + "tmp.safetensors";
        save_checkpoint(file, model, "tok\n", state);
        (void)load_checkpoint(file);
        write_safetensors_seeds(file, out + name);
    };
    save("tiny", tiny(1, 8, 1), nullptr);
    save("dilated", tiny_dilated(), nullptr);
    TrainState st;
    st.step = 3, st.loader_epoch = 1, st.loader_cursor = 2;
    st.train_args = "{\"batch\":2,\"seq_len\":4,\"lr\":0.001}";
    save("tiny_train_state", tiny(1, 4, 2), &st);
}

static void shard_seeds(const std::string& out) {
    const std::string tmp = out + "tmp.bin";
    auto save = [&](const char* name, const std::string& settings, const std::vector<uint32_t>& tokens,
                    const std::vector<uint64_t>& starts, uint32_t vocab) {
        write_shard(tmp, tokens, starts, vocab, 0x5eed);
        const std::string shard = read_file(tmp, "");
        (void)read_shard(tmp);
        std::remove(tmp.c_str());
        write_file_atomic(out + name, settings + shard);
    };
    std::vector<uint32_t> toks;
    for (uint32_t i = 0; i < 40; i++) toks.push_back((i * 7 + 3) % 16);
    // settings: B-1, T-1, shuffle|fix_sizes<<1|seed<<2, restore|epoch<<4|cursor (fuzz_shard_loader.cpp)
    save("plain.bin", std::string("\x01\x03\x00\x00", 4), toks, {0, 5, 17, 30}, 16);
    save("shuffled.bin", std::string("\x00\x02\x0d\x00", 4), toks, {0, 1, 2, 3, 20}, 16);
    save("fix_sizes.bin", std::string("\x01\x05\x02\x00", 4), toks, {0, 5, 17, 30}, 16);
    save("restored.bin", std::string("\x02\x01\x00\x93", 4), toks, {0, 9}, 16);
    std::vector<uint32_t> wide;  // vocab > 65536: 4-byte tokens
    for (uint32_t i = 0; i < 24; i++) wide.push_back(i * 4099 % 70000);
    save("wide_tokens.bin", std::string("\x00\x04\x03\x00", 4), wide, {0, 12}, 70000);
    save("one_doc.bin", std::string("\x00\x00\x00\x00", 4), {1, 2, 3}, {0}, 4);
    save("empty.bin", std::string("\x00\x00\x00\x00", 4), {}, {}, 16);
}

// Deterministic pseudo-English: enough distinct pairs for a few hundred BPE merges.
static std::string tokenizer_text() {
    static const char* words[] = {"the", "and", "of", "to", "in", "that", "he", "shall", "unto", "for", "i",
                                  "his", "a", "lord", "they", "be", "is", "him", "not", "them", "it",
                                  "with", "all", "thou", "thy", "was", "god", "which", "my", "me", "said",
                                  "but", "ye", "their", "have", "will", "thee", "from", "as", "are", "when",
                                  "this", "out", "were", "upon", "man", "by", "you", "israel", "king", "son",
                                  "up", "there", "hath", "then", "people", "came", "had", "house", "into",
                                  "on", "her", "come", "one", "we", "children", "s", "before", "your",
                                  "also", "day", "land", "so", "men", "against", "shalt", "if", "at",
                                  "caf\xc3\xa9", "na\xc3\xafve", "2024", "x86_64", "{\"k\": 1}", "int main()"};
    const size_t n = sizeof words / sizeof *words;
    uint64_t s = 12345;
    std::string text;
    for (int line = 0; line < 400; line++) {
        const int len = 4 + int(s % 9);
        for (int w = 0; w < len; w++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            text += words[(s >> 33) % n];
            text += w + 1 < len ? " " : ".\n";
        }
    }
    return text;
}

static std::string train_spm(const std::string& text, const std::unordered_map<std::string, std::string>& extra) {
    std::unordered_map<std::string, std::string> options = {
        {"character_coverage", "1.0"}, {"num_threads", "1"}, {"minloglevel", "2"},
        {"unk_id", "0"}, {"bos_id", "1"}, {"eos_id", "2"}, {"pad_id", "-1"},
        {"normalization_rule_name", "identity"}};  // nmt_nfkc would add a 237 KB charsmap per model
    for (const auto& [k, v] : extra) options[k] = v;
    sentencepiece::SetRandomGeneratorSeed(1234);
    std::string model;
    LineIterator lines(text);
    const auto status = sentencepiece::SentencePieceTrainer::Train(options, &lines, &model);
    if (!status.ok()) fatal("training a seed tokenizer failed: %s", status.ToString().c_str());
    return model;
}

static void tokenizer_seeds(const std::string& out) {
    const std::string text = tokenizer_text();
    auto write_model = [&](const char* name, const std::string& model) {
        Tokenizer tok;
        tok.load_serialized(model);
        write_file_atomic(out + name, model);
    };
    // The project's own trainer (data_tool prepare), at a tiny vocabulary: byte fallback, identity.
    write_model("bpe_byte_fallback.model", train_bpe_tokenizer(text, 300));
    write_model("unigram.model", train_spm(text, {{"model_type", "unigram"}, {"vocab_size", "60"}}));
    write_model("char.model", train_spm(text, {{"model_type", "char"}, {"vocab_size", "40"}, {"hard_vocab_limit", "false"}}));
    write_model("word.model", train_spm(text, {{"model_type", "word"}, {"vocab_size", "50"}}));
}

// Written by hand (a layout file is a person's text), each read back by the reader under test.
static void layout_seeds(const std::string& out) {
    const std::string tmp = out + "tmp.txt";
    auto save = [&](const char* name, bool causal, const std::string& text) {
        write_file_atomic(tmp, text);
        (void)read_block_layout_file(tmp, causal);
        std::remove(tmp.c_str());
        write_file_atomic(out + name, std::string(1, causal ? '\1' : '\0') + text);
    };
    save("shared.txt", true, "# diagonal and block 0\n0: 0\n1: 0 1\n2: 0 2\n3: 0 1 3\n");
    save("per_head.txt", true, "0/0: 0\n0/1: 0 1\n1/0: 0\n1/2: 1 2   # head 1\n");
    save("full.txt", false, "0: 0 2\n1: 0 1 3\n2: 1 2\n\t3 :\t0 3\r\n");
    save("empty_rows.txt", true, "\n# only comments and blanks around\n  \n5:\n7: 7\n");
}

static void kv_cache_seeds(const std::string& out) {
    const GPTConfig cfg = tiny_dilated();  // fuzz_kv_cache_config() in fuzz_kv_cache.cpp
    CpuBackend model(cfg);
    model.init_weights(7);
    std::vector<float> w(model.num_params());
    model.get_params(w.data());
    const std::string fingerprint = weights_fingerprint(w);
    for (int n : {5, 9}) {  // 9 crosses both dilated segments' borders
        CpuIncremental cache(model.model(), 1, 4);
        for (int i = 0; i < n; i++) {
            const int t = 1 + i % 15;
            cache.append(&t, 1);
        }
        const std::string file = out + "tmp.safetensors";
        save_kv_cache(file, cache, cfg, fingerprint);
        CpuIncremental back(model.model(), 1, 4);
        load_kv_cache(file, back, cfg, fingerprint, 1, 64);
        write_safetensors_seeds(file, out + "position_" + std::to_string(n));
    }
}

int main(int argc, char** argv) {
    return guarded_main([&] {
        if (argc != 2) fatal("usage: make_seeds DIR (tests/fuzz)");
        const std::string root = argv[1];
        json_seeds(dir_of(root, "json"));
        checkpoint_seeds(dir_of(root, "checkpoint"));
        shard_seeds(dir_of(root, "shard_loader"));
        tokenizer_seeds(dir_of(root, "tokenizer"));
        layout_seeds(dir_of(root, "layout"));
        kv_cache_seeds(dir_of(root, "kv_cache"));
        return 0;
    });
}
