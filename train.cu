// train: trains the GPT on a prepared corpus (`make data`), on the GPU when there is one and
// the CPU otherwise. Logs a progress line, validation loss, metrics CSV; writes checkpoints
// atomically; resumes exactly; prints a sample at the end. `train --help` lists the flags.
#include <cuda_runtime.h>
#include <sys/stat.h>
#include <csignal>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>
#include "data/loader.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "model/backend.h"
#include "model/checkpoint.h"
#include "model/flags.h"
#include "model/generate.h"
#include "model/select_backend.cuh"

struct TrainArgs {
    std::string data = "corpus", out = "out/train", device = "auto", attention = "flash";
    std::string attn = "dense", segments = "2048,4096,8192", dilations = "1,2,4", dense_layers;
    int layers = 4, width = 128, heads = 2, seq_len = 256, batch = 8, steps = 600;
    float lr = 2e-3f, min_lr_frac = 0.1f, weight_decay = 0.1f, grad_clip = 1.0f, rope_theta = 10000.0f;
    int warmup = 60, seed = 1337, val_every = 100, val_batches = 8, ckpt_every = 200, log_every = 10;
    bool resume = false, doc_mask = true;
    int sample_tokens = 160, keep_ckpts = 3;
    std::string sample_prompt = "And it came to pass";

    // The flags a resumed run must share with the run it continues (they decide every loss).
    std::string to_json() const {
        char buf[512];
        snprintf(buf, sizeof buf,
                 "{\"seq_len\":%d,\"batch\":%d,\"steps\":%d,\"lr\":%.9g,\"min_lr_frac\":%.9g,\"weight_decay\":%.9g,"
                 "\"grad_clip\":%.9g,\"warmup\":%d,\"seed\":%d,\"doc_mask\":%s}",
                 seq_len, batch, steps, lr, min_lr_frac, weight_decay, grad_clip, warmup, seed, doc_mask ? "true" : "false");
        return buf;
    }
};

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static std::string fmt_duration(double s) {
    char buf[32];
    const int t = (int)(s + 0.5);
    if (t >= 3600) snprintf(buf, sizeof buf, "%dh%02dm", t / 3600, t / 60 % 60);
    else snprintf(buf, sizeof buf, "%dm%02ds", t / 60, t % 60);
    return buf;
}

// Mean validation loss over the first n batches of the (unshuffled) validation windows.
static double validate(ModelBackend& model, DataLoader& val, int n, std::vector<int>& in, std::vector<int>& tg,
                       std::vector<int>& ds, bool doc_mask) {
    val.reset();
    double sum = 0;
    for (int i = 0; i < n; i++) {
        val.next_batch(in.data(), tg.data(), ds.data());
        sum += model.forward(in.data(), tg.data(), doc_mask ? ds.data() : nullptr, val.batch_size(), val.seq_len());
    }
    return sum / n;
}

// Keeps the rows of metrics.csv up to `step` (a resumed run rewrites what came after).
static void truncate_metrics(const std::string& path, int step) {
    FILE* f = std::fopen(path.c_str(), "r");
    if (!f) return;
    std::string kept, line;
    char buf[4096];
    while (std::fgets(buf, sizeof buf, f)) {
        line = buf;
        if (line.rfind("step", 0) == 0 || std::atoi(line.c_str()) <= step) kept += line;
    }
    std::fclose(f);
    const std::string tmp = path + ".tmp";
    FILE* o = std::fopen(tmp.c_str(), "w");
    if (!o || std::fputs(kept.c_str(), o) < 0 || std::fclose(o) != 0) fatal("cannot rewrite %s", path.c_str());
    std::rename(tmp.c_str(), path.c_str());
}

// A resumed run must share every flag that decides the losses with the run it continues.
static void require_same_run_flags(const std::string& saved_json, const std::string& now_json, const std::string& out) {
    const Json saved = JsonParser(saved_json).parse(), now = JsonParser(now_json).parse();
    auto text = [](const Json& v) {
        char buf[32];
        snprintf(buf, sizeof buf, "%.9g", v.num);
        return v.kind == Json::Bool ? std::string(v.b ? "on" : "off") : std::string(buf);
    };
    for (const auto& [key, value] : now.obj) {
        std::string flag = "--" + key;
        for (char& c : flag) c = c == '_' ? '-' : c;
        if (!saved.has(key)) fatal("--resume: the checkpoint in %s does not record %s: start a fresh run", out.c_str(), flag.c_str());
        if (text(saved.at(key)) != text(value))
            fatal("--resume: %s is %s but the run in %s used %s: pass the same value to resume", flag.c_str(),
                  text(value).c_str(), out.c_str(), text(saved.at(key)).c_str());
    }
}

int main(int argc, char** argv) {
    TrainArgs a;
    Flags flags("train", "Train a GPT with rotary attention on a prepared corpus (make data).");
    flags.add_string("data", &a.data, "directory with train.bin, val.bin and tokenizer.model");
    flags.add_string("out", &a.out, "directory for checkpoints, metrics.csv and the sample");
    flags.add_string("device", &a.device, "auto, cpu or cuda");
    flags.add_string("attention", &a.attention, "attention kernels on the GPU: flash (ours) or cudnn");
    flags.add_int("layers", &a.layers, "transformer blocks");
    flags.add_int("width", &a.width, "model width C");
    flags.add_int("heads", &a.heads, "attention heads (head dim = width/heads must be 64 or 128)");
    flags.add_float("rope-theta", &a.rope_theta, "rotary embedding base");
    flags.add_string("attn", &a.attn, "attention pattern of the layers: dense or dilated (LongNet)");
    flags.add_string("segments", &a.segments, "dilated: segment length of each branch (a segment longer than the sequence is the whole sequence)");
    flags.add_string("dilations", &a.dilations, "dilated: dilation rate of each branch");
    flags.add_string("dense-layers", &a.dense_layers, "layers that stay dense with --attn dilated, e.g. 0,5");
    flags.add_int("seq-len", &a.seq_len, "tokens per training window T");
    flags.add_int("batch", &a.batch, "windows per step B");
    flags.add_int("steps", &a.steps, "optimizer steps");
    flags.add_float("lr", &a.lr, "peak learning rate");
    flags.add_float("min-lr-frac", &a.min_lr_frac, "final learning rate as a fraction of --lr");
    flags.add_int("warmup", &a.warmup, "linear warmup steps");
    flags.add_float("weight-decay", &a.weight_decay, "AdamW weight decay (matrices only)");
    flags.add_float("grad-clip", &a.grad_clip, "clip the gradient norm to this (0: off)");
    flags.add_int("seed", &a.seed, "seed for weights and data order");
    flags.add_bool("doc-mask", &a.doc_mask, "keep attention inside each document of a window");
    flags.add_int("val-every", &a.val_every, "steps between validation losses (0: only at the end)");
    flags.add_int("val-batches", &a.val_batches, "batches per validation");
    flags.add_int("ckpt-every", &a.ckpt_every, "steps between checkpoints (0: only at the end)");
    flags.add_int("log-every", &a.log_every, "steps between progress lines");
    flags.add_int("keep-ckpts", &a.keep_ckpts, "checkpoints kept in --out, newest first (0: all)");
    flags.add_bool("resume", &a.resume, "continue from the latest checkpoint in --out");
    flags.add_int("sample-tokens", &a.sample_tokens, "tokens of sample text printed at the end (0: none)");
    flags.add_string("sample-prompt", &a.sample_prompt, "prompt of the final sample");
    flags.parse(argc, argv);
    const Device device = resolve_device(a.device);
    if (device == Device::Cuda) {
        // The GPU default: a ~100M-parameter model (GPT-2 small's body with our vocabulary) on
        // windows of 1024 tokens. Flags given on the command line win.
        auto preset = [&](const char* flag, int* dst, int value) { if (!flags.was_set(flag)) *dst = value; };
        preset("layers", &a.layers, 12), preset("width", &a.width, 768), preset("heads", &a.heads, 12);
        preset("seq-len", &a.seq_len, 1024), preset("batch", &a.batch, 16), preset("steps", &a.steps, 800);
        preset("warmup", &a.warmup, 100), preset("val-every", &a.val_every, 200), preset("val-batches", &a.val_batches, 4);
        preset("ckpt-every", &a.ckpt_every, 400), preset("log-every", &a.log_every, 20);
        if (!flags.was_set("lr")) a.lr = 6e-4f;
    }

    if (a.steps < 1) fatal("--steps must be at least 1 (got %d)", a.steps);
    if (a.batch < 1 || a.seq_len < 2) fatal("--batch must be >= 1 and --seq-len >= 2 (got %d, %d)", a.batch, a.seq_len);
    if (!(a.lr > 0)) fatal("--lr must be positive (got %g)", a.lr);
    if (a.warmup < 0 || a.val_batches < 1 || a.log_every < 1 || a.val_every < 0 || a.ckpt_every < 0)
        fatal("--warmup, --val-every, --ckpt-every must be >= 0 and --val-batches, --log-every >= 1");

    // Everything that can fail on bad input is checked before anything is written.
    Tokenizer tok;
    tok.load_file(a.data + "/tokenizer.model");
    const TokenShard train_shard = read_shard(a.data + "/train.bin");
    const TokenShard val_shard = read_shard(a.data + "/val.bin");
    GPTConfig cfg;
    cfg.vocab_size = tok.vocab_size();
    cfg.n_layer = a.layers, cfg.n_embd = a.width, cfg.n_head = a.heads, cfg.rope_theta = a.rope_theta;
    if (a.layers >= 1) cfg.layer_attn = layer_patterns_from_flags(a.layers, a.attn, a.segments, a.dilations, a.dense_layers);

    const std::string existing = latest_checkpoint(a.out);
    Checkpoint ck;
    if (a.resume) {
        if (existing.empty()) fatal("--resume: no checkpoint in %s to resume from; drop --resume to start fresh", a.out.c_str());
        ck = load_checkpoint(existing);
        if (!ck.has_train_state) fatal("--resume: %s holds no training state", existing.c_str());
        require_same_run_flags(ck.state.train_args, a.to_json(), a.out);
        const char* model_flags[] = {"layers", "width", "heads", "rope-theta", "attn", "segments", "dilations", "dense-layers"};
        if (config_to_json(cfg) != config_to_json(ck.cfg))
            for (const char* f : model_flags)
                if (flags.was_set(f))
                    fatal("--resume: --%s differs from the checkpoint's model; drop the model flags when resuming", f);
        cfg = ck.cfg;
        if (ck.tokenizer != tok.serialized_model())
            fatal("--resume: %s/tokenizer.model differs from the one the checkpoint was trained with", a.data.c_str());
    } else if (!existing.empty()) {
        fatal("%s already holds checkpoints (%s): pass --resume to continue, or choose another --out", a.out.c_str(), existing.c_str());
    }
    validate_config(cfg);
    const AttnBackend attn_backend = parse_attention_backend(a.attention, a.doc_mask);
    if (device == Device::Cuda) check_attention_backend(attn_backend, cfg);
    DataLoader train(train_shard, a.batch, a.seq_len, (uint64_t)a.seed, /*shuffle=*/true);
    // Validation may hold fewer windows than a batch: it then runs smaller batches.
    const uint64_t val_windows = val_shard.n_tokens() > 0 ? (val_shard.n_tokens() - 1) / a.seq_len : 0;
    if (val_windows == 0)
        fatal("--seq-len %d is longer than %s/val.bin (%llu tokens): lower --seq-len or prepare a larger validation split",
              a.seq_len, a.data.c_str(), (unsigned long long)val_shard.n_tokens());
    const int val_batch = (int)std::min<uint64_t>(a.batch, val_windows);
    DataLoader val(val_shard, val_batch, a.seq_len, 0, /*shuffle=*/false);
    const int val_batches = (int)std::max<uint64_t>(1, std::min<uint64_t>(a.val_batches, val.n_windows() / val_batch));

    std::unique_ptr<ModelBackend> model = make_backend(device, cfg, attn_backend);
    model->reserve(a.batch, a.seq_len);
    int step = 0;
    {
        std::vector<float> w(model->num_params());
        init_gpt_weights(w.data(), cfg, (uint64_t)a.seed);
        model->set_params(w.data());
    }
    if (a.resume) {
        model->set_params(ck.params.data());
        model->set_opt_state(ck.m.data(), ck.v.data());
        train.restore({ck.state.loader_epoch, ck.state.loader_cursor});
        step = ck.state.step;
        std::printf("resumed from %s at step %d\n", existing.c_str(), step);
    }
    // mkdir -p: every missing parent too.
    for (size_t at = a.out.find('/', 1); ; at = a.out.find('/', at + 1)) {
        const std::string dir = a.out.substr(0, at);
        if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) fatal("cannot create --out %s (%s)", dir.c_str(), strerror(errno));
        if (at == std::string::npos) break;
    }
    const std::string metrics_path = a.out + "/metrics.csv";
    if (a.resume) truncate_metrics(metrics_path, step);
    else {
        FILE* m = std::fopen(metrics_path.c_str(), "w");
        if (!m) fatal("cannot write %s", metrics_path.c_str());
        std::fputs("step,split,loss,lr,grad_norm,tokens_per_s,elapsed_s\n", m);
        std::fclose(m);
    }
    FILE* metrics = std::fopen(metrics_path.c_str(), "a");
    if (!metrics) fatal("cannot append to %s", metrics_path.c_str());

    const long long tokens_per_step = (long long)a.batch * a.seq_len;
    std::printf("model: %d layers, width %d, %d heads of %d, vocab %d: %.2fM parameters | backend %s\n", cfg.n_layer,
                cfg.n_embd, cfg.n_head, cfg.head_dim(), cfg.vocab_size, model->num_params() / 1e6, model->name().c_str());
    std::printf("data: %llu train tokens (%llu windows of %d), %llu val tokens | %lld tokens per step, %d steps\n",
                (unsigned long long)train_shard.n_tokens(), (unsigned long long)train.n_windows(), a.seq_len,
                (unsigned long long)val_shard.n_tokens(), tokens_per_step, a.steps);

    std::vector<int> in(tokens_per_step), tg(tokens_per_step), ds(tokens_per_step);
    const AdamWConfig opt{0.9f, 0.95f, 1e-8f, a.weight_decay};
    const double t_start = now_s();
    double t_train = 0;  // seconds spent in steps (not validation), for tokens/s and the ETA
    int steps_timed = 0;
    auto save = [&](int at_step) {
        const LoaderState ls = train.state();
        TrainState st{at_step, ls.epoch, ls.cursor, a.to_json()};
        save_checkpoint(checkpoint_path(a.out, at_step), *model, tok.serialized_model(), &st);
        // Only once the new checkpoint is safely in place do the oldest ones go.
        const std::vector<std::string> all = list_checkpoints(a.out);
        for (size_t i = 0; a.keep_ckpts > 0 && i + a.keep_ckpts < all.size(); i++) std::remove(all[i].c_str());
        std::fflush(metrics);
        std::printf("saved %s\n", checkpoint_path(a.out, at_step).c_str());
    };
    double last_val = NAN;
    const char* kill_env = std::getenv("LNGPT_KILL_AT_STEP");
    const int kill_at_step = kill_env ? std::atoi(kill_env) : -1;
    while (step < a.steps) {
        const double t0 = now_s();
        const float lr = lr_at(step, a.warmup, a.steps, a.lr, a.lr * a.min_lr_frac);
        train.next_batch(in.data(), tg.data(), ds.data());
        const float loss = model->forward_backward(in.data(), tg.data(), a.doc_mask ? ds.data() : nullptr, a.batch, a.seq_len);
        if (!std::isfinite(loss)) fatal("loss is %f at step %d: lower --lr (now %g) or raise --warmup", loss, step + 1, a.lr);
        const double norm = model->grad_norm();
        model->adamw_step(lr, clip_scale(norm, a.grad_clip), opt, step + 1);
        step++;
        const double dt = now_s() - t0;
        t_train += dt, steps_timed++;
        const double tok_s = tokens_per_step * steps_timed / t_train;
        // %.9g prints a float exactly, so a resumed run can be compared bit for bit.
        std::fprintf(metrics, "%d,train,%.9g,%.6g,%.6g,%.1f,%.3f\n", step, loss, lr, norm, tokens_per_step / dt, now_s() - t_start);
        if (step % a.log_every == 0 || step == 1 || step == a.steps)
            std::printf("step %5d/%d | loss %.6f | lr %.2e | norm %6.3f | %7.0f tok/s | ETA %s\n", step, a.steps, loss, lr,
                        norm, tok_s, fmt_duration((a.steps - step) * t_train / steps_timed).c_str());
        if ((a.val_every && step % a.val_every == 0) || step == a.steps) {
            last_val = validate(*model, val, val_batches, in, tg, ds, a.doc_mask);
            std::printf("step %5d/%d | val loss %.6f\n", step, a.steps, last_val);
            std::fprintf(metrics, "%d,val,%.9g,,,,%.3f\n", step, last_val, now_s() - t_start);
        }
        if ((a.ckpt_every && step % a.ckpt_every == 0) || step == a.steps) save(step);
        std::fflush(stdout);
        std::fflush(metrics);
        // Test hook: die here as `kill -9` would (no cleanup), to prove resume is exact.
        if (kill_at_step == step) raise(SIGKILL);
    }
    std::fclose(metrics);
    std::printf("done: %d steps, val loss %.4f, %.0f tokens/s, %s in training steps\n", step, last_val,
                tokens_per_step * steps_timed / std::max(t_train, 1e-9), fmt_duration(t_train).c_str());

    if (a.sample_tokens > 0) {
        std::vector<int> ids = tok.encode(a.sample_prompt);
        ids.insert(ids.begin(), tok.bos_id());
        Sampler sampler(SamplerConfig{0.8f, 40, 0.95f, (uint64_t)a.seed});
        StreamDecoder stream(tok);
        std::printf("--- sample ---\n%s", a.sample_prompt.c_str());
        for (size_t i = 1; i < ids.size(); i++) stream.push(ids[i]);
        generate(*model, ids, a.sample_tokens, a.seq_len, sampler, tok.eos_id(), [&](int id) {
            std::fputs(stream.push(id).c_str(), stdout);
            std::fflush(stdout);
        });
        std::printf("%s\n--------------\n", stream.flush().c_str());
    }
    return 0;
}
