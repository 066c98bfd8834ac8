// Hostile input to the parsers and loaders that train and infer trust: JSON, the model config,
// checkpoint metadata and tensors, flags, token ids. Each case is one the project once got
// wrong (an uncaught std::invalid_argument, undefined float->int casts, a bad_alloc, an
// out-of-bounds write); each must now end in a FatalError or JsonError whose message names the
// culprit. Prints PASS/FAIL lines and "N passed, M failed".
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmath>
#include <functional>
#include <string>
#include <vector>
#include "model/backend.h"
#include "model/checkpoint.h"
#include "data/batch_source.h"
#include "data/identity.h"
#include "core/flags.h"
#include "tests/check.h"

// body, run (in expect_fatal_exit's forked child) under a 1 GiB address-space limit: a read that
// took memory for a huge file's body would fail there with out-of-memory, not the header's line.
static std::function<void()> in_1gib(const std::function<void()>& body) {
    return [body] {
        const rlimit as{1ull << 30, 1ull << 30};
        setrlimit(RLIMIT_AS, &as);
        body();
    };
}

// Passes when body throws FatalError or JsonError whose message contains `want`; any other
// exception, or none, fails.
static void expect_refused(const std::string& name, const std::function<void()>& body, const std::string& want) {
    std::string msg;
    try {
        body();
        check(false, name, "accepted");
        return;
    } catch (const FatalError& e) {
        msg = e.what();
    } catch (const JsonError& e) {
        msg = e.what();
    } catch (const std::exception& e) {
        check(false, name, std::string("wrong exception: ") + e.what());
        return;
    }
    check(msg.find(want) != std::string::npos, name, msg);
}

static std::string json_string(const std::string& literal) { return JsonParser(literal).parse().as_string(); }

static void test_json() {
    check(json_string("\"\\u00e9\\u4e2d\"") == "\xc3\xa9\xe4\xb8\xad", "\\u escapes decode to UTF-8");
    check(json_string("\"\\ud83d\\ude00\"") == "\xf0\x9f\x98\x80", "a surrogate pair decodes to one code point");
    expect_refused("\\uZZZZ", [] { json_string("\"\\uZZZZ\""); }, "four hex digits");
    expect_refused("\\u+123", [] { json_string("\"\\u+123\""); }, "four hex digits");
    expect_refused("\\u12 at the end", [] { json_string("\"\\u12"); }, "four hex digits");
    expect_refused("lone surrogate", [] { json_string("\"\\ud83d x\""); }, "surrogate");
    expect_refused("number beyond a double", [] { JsonParser("1e999").parse(); }, "out of range");
    expect_refused("number with two dots", [] { JsonParser("1.2.3").parse(); }, "trailing");
    expect_refused("a lone minus", [] { JsonParser("-").parse(); }, "bad number");
    expect_refused("nesting 1000 deep", [] { JsonParser(std::string(1000, '[')).parse(); }, "too deep");
    expect_refused("integer field that is a fraction", [] { JsonParser("2.5").parse().as_int("n_layer", 0, 10); }, "n_layer");
    expect_refused("integer field out of int range", [] { JsonParser("1e300").parse().as_int("n_embd", 0, 2147483647); }, "n_embd");
}

static std::string config_with(const std::string& key, const std::string& value) {
    GPTConfig c;
    std::string j = config_to_json(c);
    const size_t at = j.find("\"" + key + "\":");
    const size_t begin = at + key.size() + 3, end = j.find_first_of(",}", begin);
    return j.substr(0, begin) + value + j.substr(end);
}

static void test_config() {
    expect_refused("config n_embd 1e300", [] { config_from_json(config_with("n_embd", "1e300")); }, "n_embd");
    expect_refused("config n_layer -3", [] { config_from_json(config_with("n_layer", "-3")); }, "n_layer");
    expect_refused("config n_embd 2^30", [] { validate_config(config_from_json(config_with("n_embd", "1073741824")), true); }, "--width");
    expect_refused("config n_layer 2e8", [] { validate_config(config_from_json(config_with("n_layer", "200000000")), true); }, "--layers");
    expect_refused("config vocab 2^31-1", [] { validate_config(config_from_json(config_with("vocab_size", "2147483647")), true); }, "--vocab");
    expect_refused("config rope_theta string", [] { config_from_json(config_with("rope_theta", "\"x\"")); }, "number");
    expect_refused("config that is an array", [] { config_from_json("[1,2]"); }, "not an object");
    GPTConfig wide;
    wide.n_layer = 1000, wide.n_embd = 8192, wide.n_head = 64;
    expect_refused("config of 800G parameters", [&] { validate_config(wide); }, "parameters");
    wide.n_embd = 2147483584, wide.n_head = 33554431;  // once: 3*C and 4*C overflowed int
    expect_refused("--width 2147483584 --heads 33554431", [&] { validate_config(wide); }, "--width");
}

// One rule per value at the config's largest sizes: a config that validate_config
// takes at each limit goes through the checkpoint's JSON and back unchanged and is taken again,
// and one step past each limit is refused both as flags and as a read config. (The flag walk in
// tests/test_recorded_values.sh trains real models, so it stops at small sizes.)
static void round_trips(const std::string& name, const GPTConfig& c) {
    try {
        validate_config(c);
        const std::string j = config_to_json(c);
        const GPTConfig back = config_from_json(j);
        validate_config(back);
        check(config_to_json(back) == j, "limit round trip: " + name);
    } catch (const std::exception& e) {
        check(false, "limit round trip: " + name, e.what());
    }
}
// want_read: the reader's words when its own bound comes first (default: the same as the flags')
static void refused_both(const std::string& name, const GPTConfig& c, const std::string& want, std::string want_read = "") {
    if (want_read.empty()) want_read = want;
    expect_refused("past a limit, as flags: " + name, [&] { validate_config(c); }, want);
    expect_refused("past a limit, as a checkpoint config: " + name, [&] { validate_config(config_from_json(config_to_json(c))); },
                   want_read);
}

static void test_config_limits() {
    GPTConfig base;
    base.vocab_size = 2, base.n_layer = 1, base.n_embd = 64, base.n_head = 1;
    GPTConfig c = base;
    c.vocab_size = kMaxVocab;
    round_trips("vocab 2^21", c);
    c.vocab_size = kMaxVocab + 1;
    refused_both("vocab 2^21 + 1", c, "--vocab");
    c = base;  // every layer there is, each NoPE and fixed at its largest block and summary
    c.n_layer = kMaxLayers;
    AttnPattern fixed = make_pattern(AttnKind::Fixed, true);
    fixed.fixed.stride = 1 << 24, fixed.fixed.summary = 1 << 24;
    c.layer_attn.assign(kMaxLayers, fixed);
    for (int l = 0; l < kMaxLayers; l++) c.nope_layers.push_back(l);
    round_trips("1024 layers, all NoPE, fixed stride = summary = 2^24", c);
    c = base;  // the q/k convolution in some NoPE layers: recorded, read back, refused outside them
    c.n_layer = 4, c.nope_layers = {1, 3}, c.qk_conv = kMaxQkConv, c.qk_conv_layers = {3};
    round_trips("q/k convolution 64 in NoPE layer 3 of 1,3", c);
    c.qk_conv_layers = {2};
    refused_both("--qk-conv-layers 2, a rotary layer", c, "layer 2 is not a NoPE layer");
    c.qk_conv_layers = {3, 1};
    refused_both("--qk-conv-layers 3,1", c, "distinct layers in increasing order");
    c.qk_conv_layers = {1}, c.qk_conv = 0;
    refused_both("--qk-conv-layers without --qk-conv", c, "--qk-conv is 0");
    c = base;
    c.n_layer = kMaxLayers + 1;
    refused_both("1025 layers", c, "--layers", "layer_attn has too many entries");  // the reader's bound on the list
    c = base;  // the widest model the parameter cap takes: one layer, heads of 128
    c.n_embd = 37760, c.n_head = 295;
    round_trips("width 37760 (12 C^2 just under 2^34 parameters)", c);
    c.n_embd = 37888, c.n_head = 296;
    refused_both("width 37888", c, "parameters");
    c = base;
    c.rope_theta = kMaxRopeTheta;
    round_trips("rope base 1e12", c);
    c.rope_theta = 1.0001f;
    round_trips("rope base 1.0001", c);
    c.rope_theta = std::nextafter(kMaxRopeTheta, 1e30f);
    refused_both("rope base one float past 1e12", c, "--rope-theta");
    c = base;  // LongNet's most branches
    AttnPattern dil = make_pattern(AttnKind::Dilated, true);
    for (int i = 0; i < kMaxDilatedBranches; i++) dil.dilated.segments.push_back(1 << (i % 24)), dil.dilated.dilations.push_back(1);
    c.layer_attn = {dil};
    round_trips("dilated, 64 branches", c);
}

// A small valid training checkpoint, then copies with one metadata value or tensor replaced.
struct CheckpointFixture {
    std::string dir, path;
    SafetensorsFile file;
    GPTConfig cfg;
    CheckpointFixture() {
        char tmpl[] = "/tmp/inputs_testXXXXXX";
        if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
        dir = tmpl;
        // A head dim train takes (64): load_checkpoint holds the config to train's rules.
        cfg.vocab_size = 16, cfg.n_layer = 1, cfg.n_embd = 64, cfg.n_head = 1;
        CpuBackend m(cfg);
        m.init_weights(3);
        path = checkpoint_path(dir, 5);
        TrainState st{5, 5, 0, 20, "{\"seq_len\":32}", ""};
        save_checkpoint(path, m, "tok", &st);
        file = read_safetensors(path);
    }
    ~CheckpointFixture() {
        for (const char* name : {"/ckpt_00000005.safetensors", "/edited.safetensors"}) std::remove((dir + name).c_str());
        rmdir(dir.c_str());
    }
    // Writes the checkpoint with metadata[key] = value (or, with tensor set, that tensor's value
    // at `index` replaced), returns its path. `extra`: one more tensor of shape [1] by that name;
    // `drop`: a tensor left out (the file still tiles its data).
    std::string edited(const std::string& key, const std::string& value, const char* tensor = nullptr, float x = 0,
                       size_t index = 0, const char* extra = nullptr, const char* drop = nullptr) {
        std::map<std::string, std::string> meta = file.metadata;
        if (!key.empty()) meta[key] = value;
        std::vector<std::vector<char>> copies;
        copies.reserve(file.tensors.size() + 1);
        std::vector<TensorToWrite> ts;
        for (const auto& [name, t] : file.tensors) {
            if (drop && name == drop) continue;
            copies.emplace_back(file.data.begin() + t.begin, file.data.begin() + t.end);
            if (tensor && name == tensor) std::memcpy(copies.back().data() + 4 * index, &x, 4);
            ts.push_back({name, t.shape, copies.back().data()});
        }
        static const float half = 0.5f;
        if (extra) ts.push_back({extra, {1}, &half});
        const std::string out = dir + "/edited.safetensors";
        write_safetensors(out, ts, meta);
        return out;
    }
};

static void test_checkpoint() {
    CheckpointFixture f;
    check(load_checkpoint(f.edited("", "")).state.step == 5, "an unedited copy loads");
    expect_refused("step -7", [&] { load_checkpoint(f.edited("step", "-7")); }, "\"step\"");
    expect_refused("step 0", [&] { load_checkpoint(f.edited("step", "0")); }, "step is 0");
    expect_refused("step 99999999999", [&] { load_checkpoint(f.edited("step", "99999999999")); }, "\"step\"");
    expect_refused("step 12abc", [&] { load_checkpoint(f.edited("step", "12abc")); }, "\"step\"");
    expect_refused("loader_cursor -1", [&] { load_checkpoint(f.edited("loader_cursor", "-1")); }, "loader_cursor");
    expect_refused("updates above step", [&] { load_checkpoint(f.edited("updates", "6")); }, "updates");
    expect_refused("train_args garbage", [&] { load_checkpoint(f.edited("train_args", "{not json")); }, "train_args");
    expect_refused("train_args \\uZZZZ", [&] { load_checkpoint(f.edited("train_args", "{\"a\":\"\\uZZZZ\"}")); }, "train_args");
    expect_refused("config \\uZZZZ", [&] { load_checkpoint(f.edited("config", "{\"vocab_size\":\"\\uZZZZ\"}")); }, "config");
    expect_refused("config n_embd 2^30", [&] {
        load_checkpoint(f.edited("config", config_with("n_embd", "1073741824")));
    }, "--width");
    // One rule for train's flags and the checkpoint's config (head dim), and no key dropped. The
    // edited configs are those of a checkpoint from before the "forward" record (the record would
    // contradict them).
    f.file.metadata.erase("forward");
    GPTConfig half = f.cfg;
    half.n_head = 2;  // head dim 32, which train refuses; the tensors' shapes do not change
    expect_refused("a config edited to head dim 32", [&] { load_checkpoint(f.edited("config", config_to_json(half))); }, "head dim");
    check(load_checkpoint(f.edited("config", config_to_json(half)), /*allow_any_head_dim=*/true).cfg.n_head == 2,
          "the same config loads where any head dim is allowed (the CPU tests)");
    std::string extra = config_to_json(f.cfg);
    extra.insert(1, "\"n_kv_head\":1,");
    expect_refused("a config with an unknown key", [&] { load_checkpoint(f.edited("config", extra)); }, "unknown key \"n_kv_head\"");
    check(load_checkpoint(f.edited("config", config_to_json(f.cfg))).cfg.n_embd == 64, "the config as written loads");
    expect_refused("NaN in AdamW m", [&] { load_checkpoint(f.edited("", "", "optim.m.wte", NAN)); }, "AdamW moments");
    expect_refused("negative AdamW v", [&] { load_checkpoint(f.edited("", "", "optim.v.lnf.bias", -1.0f)); }, "AdamW moments");
    expect_refused("Inf weight", [&] { load_checkpoint(f.edited("", "", "wte", INFINITY)); }, "weights hold NaN or Inf");
    // Values in range, each refusal naming the tensor and the element: weights finite and within
    // +-1e6, moments finite (the same rule train applies before it saves).
    expect_refused("weight 1e30, named with its index", [&] { load_checkpoint(f.edited("", "", "wte", 1e30f, 7)); },
                   "weights hold a value beyond +-1e6 (tensor \"wte\", element 7: 1e+30)");
    expect_refused("weight -2e6", [&] { load_checkpoint(f.edited("", "", "lnf.bias", -2e6f, 3)); }, "tensor \"lnf.bias\", element 3");
    expect_refused("NaN weight, named with its index", [&] { load_checkpoint(f.edited("", "", "blocks.0.mlp.fc.weight", NAN, 100)); },
                   "weights hold NaN or Inf (tensor \"blocks.0.mlp.fc.weight\", element 100: nan)");
    expect_refused("Inf in AdamW v, named", [&] { load_checkpoint(f.edited("", "", "optim.v.wte", -INFINITY, 2)); },
                   "AdamW moments hold NaN or Inf (tensor \"optim.v.wte\", element 2: -inf)");
    check(load_checkpoint(f.edited("", "", "wte", 1e6f, 7)).params[7] == 1e6f, "a weight of exactly 1e6 loads (the bound's control)");
    check(load_checkpoint(f.edited("", "", "optim.m.wte", 1e20f)).m[0] == 1e20f, "a large finite AdamW moment loads");
    {
        const std::vector<ParamTensor> layout = param_layout(f.cfg);
        std::vector<float> w(layout.back().offset + layout.back().size, 0.5f), m(w.size(), 0), v(w.size(), 0);
        check(checkpoint_values_error(layout, w.data(), m.data(), v.data()).what.empty(), "train's writer: sound values pass");
        w[layout[1].offset + 2] = 3e6f;
        const CheckpointValuesError e = checkpoint_values_error(layout, w.data(), m.data(), v.data());
        check(e.what == "weights hold a value beyond +-1e6" && e.where == "tensor \"" + layout[1].name + "\", element 2: 3e+06",
              "train's writer refuses what the loader refuses, naming the element", e.what + " / " + e.where);
    }
    // Every tensor the model has, and no other: an extra name is refused naming it.
    expect_refused("an unknown extra tensor", [&] { load_checkpoint(f.edited("", "", nullptr, 0, 0, "blocks.0.attn.gate")); },
                   "holds a tensor \"blocks.0.attn.gate\" that the model of its config does not have (15 tensors: wte, "
                   "blocks.0.ln1.weight, ..., lnf.bias, and optim.m.<name> and optim.v.<name> of each)");
    expect_refused("an extra tensor whose name holds a newline", [&] { load_checkpoint(f.edited("", "", nullptr, 0, 0, "x\ny")); },
                   "holds a tensor \"x?y\"");
    expect_refused("a missing tensor", [&] { load_checkpoint(f.edited("", "", nullptr, 0, 0, nullptr, "blocks.0.ln2.bias")); },
                   "has no tensor \"blocks.0.ln2.bias\"");
    expect_refused("a missing AdamW moment", [&] { load_checkpoint(f.edited("", "", nullptr, 0, 0, nullptr, "optim.v.lnf.bias")); },
                   "has no tensor \"optim.v.lnf.bias\"");
    {  // AdamW moments in a file without training state: not read, so refused as unknown.
        std::map<std::string, std::string> meta = f.file.metadata;
        meta.erase("step");
        std::vector<TensorToWrite> ts;
        for (const auto& [name, t] : f.file.tensors) ts.push_back({name, t.shape, f.file.data.data() + t.begin});
        const std::string path = f.dir + "/edited.safetensors";
        write_safetensors(path, ts, meta);
        expect_refused("AdamW moments without a step", [&] { load_checkpoint(path); }, "AdamW moments only with a \"step\"");
    }

    auto seq_len_of = [&](const std::string& args) {
        const Checkpoint c = load_checkpoint(f.edited("train_args", args));
        return checkpoint_seq_len(c, f.path, kMaxSeqLen);
    };
    check(seq_len_of("{\"seq_len\":32}") == 32, "checkpoint_seq_len reads seq_len");
    expect_refused("seq_len 0", [&] { seq_len_of("{\"seq_len\":0}"); }, "seq_len");
    expect_refused("seq_len -5", [&] { seq_len_of("{\"seq_len\":-5}"); }, "seq_len");
    expect_refused("seq_len 1e12", [&] { seq_len_of("{\"seq_len\":1e12}"); }, "seq_len");
    expect_refused("seq_len missing", [&] { seq_len_of("{}"); }, "seq_len");
    expect_refused("a directory as checkpoint", [&] { load_checkpoint(f.dir); }, "not a regular file");

    // The tensors must tile the data section exactly: the file's bytes as written, then
    // its header or data edited by hand.
    const std::string bytes = read_file(f.path, "the test checkpoint");
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    const std::string header = bytes.substr(8, n), data = bytes.substr(8 + n);
    auto raw = [&](const std::string& h, const std::string& d) {
        const uint64_t len = h.size();
        std::string out((const char*)&len, 8);
        out += h + d;
        const std::string path = f.dir + "/edited.safetensors";
        write_file_atomic(path, out);
        return path;
    };
    auto offsets_of = [&](const std::string& name) {  // the text "[b,e]" of a tensor's data_offsets
        const size_t at = header.find("\"" + name + "\":{"), o = header.find("\"data_offsets\":", at) + 15;
        return header.substr(o, header.find(']', o) + 1 - o);
    };
    check(load_checkpoint(raw(header, data)).state.step == 5, "the file's own bytes, written again, load (the control)");
    std::string overlap = header;
    const std::string wte = offsets_of("wte"), m_wte = offsets_of("optim.m.wte");
    overlap.replace(overlap.find(wte, overlap.find("\"wte\":{")), wte.size(), m_wte);
    expect_refused("wte's offsets moved onto optim.m.wte's bytes", [&] { load_checkpoint(raw(overlap, data)); }, "overlaps");
    expect_refused("bytes after the last tensor", [&] { load_checkpoint(raw(header, data + std::string(4, '\0'))); }, "4 bytes after tensor");
    std::string gap;  // every tensor 4 bytes further on, 4 bytes of nothing before them
    for (size_t at = 0;;) {
        const size_t o = header.find("\"data_offsets\":[", at);
        if (o == std::string::npos) {
            gap += header.substr(at);
            break;
        }
        const size_t b = o + 16, comma = header.find(',', b), end = header.find(']', comma);
        gap += header.substr(at, b - at) + std::to_string(std::stoull(header.substr(b, comma - b)) + 4) + "," +
               std::to_string(std::stoull(header.substr(comma + 1, end - comma - 1)) + 4);
        at = end;
    }
    expect_refused("4 bytes between the header and the first tensor", [&] { load_checkpoint(raw(gap, std::string(4, '\0') + data)); },
                   "4 bytes between the header and tensor");
    // The header is checked before the data is read: a sparse 20 GB file is refused unread, in
    // a child that may use 1 GB of address space (once: the whole file was read first).
    auto sparse_20g = [&](const std::string& head) {
        const std::string path = raw(header, data);
        const int fd = ::open(path.c_str(), O_WRONLY);
        const bool ok = fd >= 0 && ::pwrite(fd, head.data(), head.size(), 0) == (ssize_t)head.size() && ::ftruncate(fd, 20LL << 30) == 0;
        if (fd >= 0) ::close(fd);
        check(ok, "a 20 GB sparse checkpoint");
        return path;
    };
    const std::string sparse_ck = sparse_20g("");
    expect_fatal_exit("a checkpoint followed by 20 GB of zeros: refused from its header, unread",
                      in_1gib([&] { load_checkpoint(sparse_ck); }), {"is corrupt (", "bytes after tensor"});
    uint64_t huge_header = 200ull << 20;
    const std::string huge_ck = sparse_20g(std::string((const char*)&huge_header, 8));
    expect_fatal_exit("a header length of 200 MB: refused before it is read", in_1gib([&] { load_checkpoint(huge_ck); }),
                      {"a header of 209715200 bytes, more than the 104857600"});
    std::remove(huge_ck.c_str());
}

// Token shards and the files a run identifies: the header is checked against the file's size
// before the body is read (a 20 GB sparse file with a damaged header once went to a generic
// out-of-memory), and a directory, FIFO or device is refused before any read that could block.
static void test_shard_inputs() {
    char tmpl[] = "/tmp/inputs_shardXXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    const std::string dir = tmpl, good = dir + "/good.bin", big = dir + "/big.bin", dir_as_shard = dir + "/sub.bin";
    write_shard(good, {1, 2, 3, 4, 5, 6}, {0, 3}, 100, 42);
    check(read_shard(good, "--mix").tokens.size() == 6, "a sound shard is read (the control)");
    // A 20 GB sparse file: the child may use 1 GB of address space, so any read of it whole fails.
    auto sparse = [&](const std::string& header) {
        const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const bool ok = fd >= 0 && ::write(fd, header.data(), header.size()) == (ssize_t)header.size() &&
                        ::ftruncate(fd, 20LL << 30) == 0;
        if (fd >= 0) ::close(fd);
        return ok;
    };
    const std::string header = read_file(good, "").substr(0, kShardHeaderBytes);
    if (check(sparse(header), "a 20 GB sparse file with a sound header")) {
        expect_fatal_exit("20 GB shard whose header declares 6 tokens: refused from its size, unread",
                          in_1gib([&] { read_shard(big); }), {big, "is 21474836480 bytes but the header (2 docs, 6 tokens", "corrupt"});
        expect_fatal_exit("the same file as --mix", in_1gib([&] { read_shard(big, "--mix"); }), {big, "implies a different size"});
    }
    if (check(sparse(std::string(kShardHeaderBytes, '\0')), "a 20 GB sparse file of zeros")) {
        expect_fatal_exit("20 GB shard with no magic: refused from its header, unread", in_1gib([&] { read_shard(big); }),
                          {big, "bad magic"});
        expect_fatal_exit("the same file as --mix", in_1gib([&] { read_shard(big, "--mix"); }), {"--mix", "is not a token shard"});
    }
    std::remove(big.c_str());
    // The identity train records of each --mix shard is taken before the shard is read.
    check(file_identity(good, "--mix", kShardFlagFix).exists && !file_identity(dir + "/none.bin", "--mix", kShardFlagFix).exists,
          "file_identity: a shard has one, a missing file none (its reader names it)");
    mkdir(dir_as_shard.c_str(), 0755);
    expect_refused("--mix a directory: named a directory, with what --mix takes",
                   [&] { file_identity(dir_as_shard, "--mix", kShardFlagFix); }, "--mix " + dir_as_shard + " is a directory: give a token shard file");
    expect_refused("read_shard --mix of a directory", [&] { read_shard(dir_as_shard, "--mix"); }, "is a directory: give a token shard file");
    const std::string fifo = dir + "/fifo.bin";
    mkfifo(fifo.c_str(), 0644);
    auto within_5s = [](const std::function<void()>& body) {
        return [body] {
            alarm(5);  // a blocking open ends the child: the check fails instead of hanging
            body();
        };
    };
    expect_fatal_exit("file_identity of a FIFO: refused, not blocked in open",
                      within_5s([&] { file_identity(fifo, "--mix", kShardFlagFix); }), {"--mix " + fifo + " is a FIFO"});
    expect_fatal_exit("read_shard of a FIFO", within_5s([&] { read_shard(fifo, "--mix"); }), {"--mix " + fifo + " is a FIFO"});
    expect_fatal_exit("file_identity of /dev/zero", within_5s([] { file_identity("/dev/zero", "--mix", kShardFlagFix); }),
                      {"/dev/zero is a character device"});
    for (const std::string& f : {good, fifo}) std::remove(f.c_str());
    rmdir(dir_as_shard.c_str());
    rmdir(dir.c_str());
}

// A --schedule stage must change the shape, begin after the stage before it, and --time-limit's
// float must be one (a value that underflows is named as too small, not as "not finite").
static void test_schedule_and_time_flags() {
    const TrainStage first{0, 32, 2};
    check(parse_schedule("64x2@2,64x1@3", first, 10, kMaxSeqLen).size() == 3, "--schedule 64x2@2,64x1@3 (each stage a new shape)");
    auto stages_change = [&](const char* schedule, const char* mix) {
        check_stages_change(parse_schedule(schedule, first, 10, kMaxSeqLen), mix);
    };
    expect_refused("--schedule 32x2@2: stage 0's shape again", [&] { stages_change("32x2@2", ""); },
                   "stage from step 2 has the shape of the stage before it (windows of 32 tokens, 2 per step)");
    expect_refused("--schedule 64x2@2,64x2@4: a stage repeating the one before", [&] { stages_change("64x2@2,64x2@4", "a.bin:0.5"); },
                   "stage from step 4 has the shape of the stage before it");
    bool accepted = true;
    try {
        stages_change("64x2@2,64x2@4", "a.bin:0.5;a.bin:0.5;b.bin:0.5");
        stages_change("64x2@2,64x2@4", "a.bin:0.5;a.bin:0.5;a.bin:0.5");
    } catch (const FatalError&) {
        accepted = false;
    }
    check(accepted, "--schedule repeating a shape with --mix given stage by stage: each stage as its caller spelled it (the study's toy windows)");
    check(parse_schedule("32x2@2", first, 10, kMaxSeqLen).size() == 2, "a recorded schedule repeating a shape is still read (old checkpoints)");
    expect_refused("--schedule 64x2@4,128x1@4: a step not after the stage before", [&] { parse_schedule("64x2@4,128x1@4", first, 10, kMaxSeqLen); },
                   "steps must increase");
    auto time_limit = [](const char* value) {
        float t = 0;
        Flags flags("t", "test");
        flags.add_float("time-limit", &t, "");
        const char* args[] = {"t", "--time-limit", value};
        flags.parse(3, const_cast<char**>(args));
        return t;
    };
    expect_refused("--time-limit 1e-45: too small for a float, said so", [&] { time_limit("1e-45"); },
                   "--time-limit 1e-45 is too small for a float (the smallest is 1.2e-38): give 0 or a larger number");
    check(time_limit("0") == 0 && time_limit("0.5") == 0.5f && time_limit("1e-6") == 1e-6f, "--time-limit 0, 0.5 and 1e-6 parse");
}

static void test_flags() {
    auto parse = [](std::vector<const char*> args) {
        float lr = 1;
        int n = 1;
        Flags flags("t", "test");
        flags.add_float("lr", &lr, "");
        flags.add_int("n", &n, "");
        args.insert(args.begin(), "t");
        flags.parse((int)args.size(), const_cast<char**>(args.data()));
    };
    expect_refused("--lr inf", [&] { parse({"--lr", "inf"}); }, "--lr");
    expect_refused("--lr nan", [&] { parse({"--lr=nan"}); }, "--lr");
    expect_refused("--lr 1e40 (overflows a float)", [&] { parse({"--lr", "1e40"}); }, "--lr");
    expect_refused("--n 1e8", [&] { parse({"--n", "1e8"}); }, "--n");
    expect_refused("--n 99999999999", [&] { parse({"--n", "99999999999"}); }, "--n");
    // No wrap, no sign or space strtol would take, and a flag given once.
    expect_refused("--n 4294967360 (2^32 + 64)", [&] { parse({"--n", "4294967360"}); }, "'4294967360'");
    expect_refused("--n +5", [&] { parse({"--n", "+5"}); }, "--n");
    expect_refused("--n ' 5'", [&] { parse({"--n", " 5"}); }, "--n");
    expect_refused("--n given twice", [&] { parse({"--n", "5", "--n=6"}); }, "given twice");
    expect_refused("--lr given twice", [&] { parse({"--lr", "0.5", "--lr", "0.5"}); }, "--lr is given twice");
    bool ok = true;
    try {
        parse({"--n", "-5", "--lr", "0.5"});
    } catch (const std::exception&) {
        ok = false;
    }
    check(ok, "--n -5 --lr 0.5, each once, parse");
}

// A huge --weight-decay would train to NaN and exit 0: refused.
static void test_weight_decay() {
    check(weight_decay_error(0.1f, 2e-3f).empty() && weight_decay_error(0, 1).empty() && weight_decay_error(10, 0.1f).empty(),
          "weight decay 0.1, 0 and 10 (at lr 0.1) are taken");
    check(weight_decay_error(1e30f, 2e-3f).find("--weight-decay must be in [0, 10]") != std::string::npos, "weight decay 1e30 refused",
          weight_decay_error(1e30f, 2e-3f));
    check(!weight_decay_error(-0.1f, 2e-3f).empty() && !weight_decay_error(NAN, 2e-3f).empty(), "weight decay -0.1 and NaN refused");
    check(weight_decay_error(5, 0.5f).find("above 1") != std::string::npos, "lr 0.5 x weight decay 5 refused",
          weight_decay_error(5, 0.5f));
}

// AdamW's betas and epsilon (optim/adamw.h): a beta of 1 divides by a zero bias correction, an
// epsilon of 0 gives 0/0 where a weight has no gradient yet. The same rule reads a recorded run.
static void test_adamw_settings() {
    check(beta_error("--beta1", 0).empty() && beta_error("--beta1", 0.9f).empty() && beta_error("--beta2", 0.999f).empty(),
          "betas 0, 0.9 and 0.999 are taken");
    check(beta_error("--beta2", 1).find("--beta2 must be in [0, 1) (got 1)") != std::string::npos, "beta2 1 refused",
          beta_error("--beta2", 1));
    check(!beta_error("--beta1", -0.1f).empty() && !beta_error("--beta1", NAN).empty(), "beta1 -0.1 and NaN refused");
    check(adam_eps_error(1e-8f).empty() && adam_eps_error(1).empty(), "epsilon 1e-8 and 1 are taken");
    check(adam_eps_error(0).find("--adam-eps must be in (0, 1] (got 0)") != std::string::npos && !adam_eps_error(2).empty() &&
              !adam_eps_error(NAN).empty(),
          "epsilon 0, 2 and NaN refused", adam_eps_error(0));
    check(adamw_config_error(AdamWConfig{}, 2e-3f).empty(), "the default AdamW settings are taken");
    check(adamw_config_error(AdamWConfig{0.9f, 1.0f, 1e-8f, 0.1f}, 2e-3f).find("--beta2") != std::string::npos,
          "settings with beta2 1 refused");
    auto recorded = [](const char* json) { return recorded_train_args_error(JsonParser(json).parse()); };
    check(recorded("{\"beta1\":0.8,\"beta2\":0.99,\"adam_eps\":1e-6}").empty(), "a run recording betas 0.8, 0.99 and epsilon 1e-6 reads");
    check(recorded("{\"beta1\":1}").find("beta1: --beta1 must be in [0, 1) (got 1)") != std::string::npos,
          "a run recording beta1 1 is refused", recorded("{\"beta1\":1}"));
    check(recorded("{\"adam_eps\":0}").find("adam_eps: --adam-eps must be in (0, 1]") != std::string::npos,
          "a run recording epsilon 0 is refused", recorded("{\"adam_eps\":0}"));
}

static void test_token_ids() {
    GPTConfig cfg;
    cfg.vocab_size = 16, cfg.n_layer = 1, cfg.n_embd = 8, cfg.n_head = 2;
    CpuBackend m(cfg);
    m.init_weights(1);
    std::vector<int> in = {1, 2, 3, 4}, tg = {2, 3, 4, 5};
    check(std::isfinite(m.forward(in.data(), tg.data(), nullptr, 2, 2, nullptr)), "ids inside the vocabulary run");
    tg[3] = 16;  // once: an out-of-bounds write in classifier_forward_backward
    expect_refused("target == V", [&] { m.forward(in.data(), tg.data(), nullptr, 2, 2, nullptr); }, "row 1, position 1");
    tg[3] = 5, in[2] = 99;
    expect_refused("token > V", [&] { m.forward(in.data(), tg.data(), nullptr, 2, 2, nullptr); }, "token id 99");
    in[2] = -2;
    expect_refused("negative token", [&] { m.forward(in.data(), tg.data(), nullptr, 2, 2, nullptr); }, "token id -2");
    expect_refused("batch x window too large", [&] { m.reserve(1 << 20, 1 << 20); }, "--batch");
}

int main() {
    test_json();
    test_config();
    test_config_limits();
    test_checkpoint();
    test_flags();
    test_weight_decay();
    test_adamw_settings();
    test_token_ids();
    test_shard_inputs();
    test_schedule_and_time_flags();
    return check_report();
}
