// train: trains the GPT on a prepared corpus (`make data`), on the GPU when there is one and
// the CPU otherwise. Logs a progress line, validation loss, metrics CSV; writes checkpoints
// atomically; resumes exactly; prints a sample at the end. `train --help` lists the flags.
// The sections below are the run's phases in the order they run (parse, validate, load, plan,
// start, report, run, sample); main_body and train_rank, at the bottom, call them in turn.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <csignal>
#include <cstdarg>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include "core/flags.h"
#include "core/io.h"
#include "core/output_path.h"
#include "core/run_lock.h"
#include "data/batch_source.h"
#include "data/identity.h"
#include "data/loader.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "model/backend.h"
#include "model/checkpoint.h"
#include "model/generate.h"
#include "model/memory_plan.h"
#include "model/parallel.h"
#include "model/select_backend.cuh"
#include "model/launch.cuh"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/schedule.h"

struct TrainArgs {
    std::string data = "corpus", out = "out/train", device = "auto", attention = "flash";
    std::string attn = "dense", layer_pattern, nope_layers, qk_conv_layers;
    PatternFlags pattern;  // each pattern module's flags (add_pattern_flags)
    int layers = 4, width = 128, heads = 2, seq_len = 256, batch = 8, steps = 600, logn_attn = 0, qk_conv = 0;
    float lr = 2e-3f, min_lr_frac = 0.1f, grad_clip = 1.0f, rope_theta = 10000.0f;
    AdamWConfig adamw;  // --weight-decay, --beta1, --beta2, --adam-eps (optim/adamw.h)
    int warmup = 60, seed = 1337, val_every = 100, val_batches = 8, ckpt_every = 200, log_every = 10;
    bool resume = false, doc_mask = true, deterministic = false, attn_sink = false, pointer = false, logn_learn = false;
    int sample_tokens = 160, keep_ckpts = 3, max_bad_steps = 5;
    int cp = 1, simulate_ranks = 0;  // context-parallel degree; ranks run as threads of this process
    bool grad_overlap = true;        // data parallel: gradients summed block by block during the backward
    bool shard_update = false;       // data parallel: each rank updates 1/P of the weights and shares them
    bool time_comm = false;          // time the compute stream's waits for communication each step
    int op_split = 0;                // time this step op by op and print where it went (0: none)
    std::string sample_prompt;  // empty: the opening of the first held-out document (print_sample)
    std::string schedule;   // later stages of the window and batch: "8192x16@300,32768x4@600"
    std::string mix;        // token shards mixed into the corpus by fraction: "tasks.bin:0.5"
    std::string init_from;  // a fresh run from these weights (a shorter-window model, say); not a run flag
    std::string recompute = "auto";  // gradient checkpointing policy (model/recompute.h); not a run flag
    float memory_cap_gib = 0;        // plan within this much memory (0: what is free); not a run flag
    int stop_at = 0;                 // stop after this step with a checkpoint, for --resume to go on (0: --steps); not a run flag
    float time_limit = 0;            // stop with a checkpoint once this many minutes have passed (0: none); not a run flag

    // The flags a resumed run must share with the run it continues: each decides some loss
    // (validation ones too) or, for the device and kernels, the rounding of every step.
    // `device_used` is the device --device resolved to.
    std::string to_json(const char* device_used) const {
        char buf[768];
        snprintf(buf, sizeof buf,
                 "{\"seq_len\":%d,\"batch\":%d,\"steps\":%d,\"lr\":%.9g,\"min_lr_frac\":%.9g,\"weight_decay\":%.9g,"
                 "\"grad_clip\":%.9g,\"warmup\":%d,\"seed\":%d,\"doc_mask\":%s,\"val_every\":%d,\"val_batches\":%d,"
                 "\"device\":\"%s\",\"attention\":\"%s\",\"deterministic\":%s}",
                 seq_len, batch, steps, lr, min_lr_frac, adamw.weight_decay, grad_clip, warmup, seed, doc_mask ? "true" : "false",
                 val_every, val_batches, device_used, attention.c_str(), deterministic ? "true" : "false");
        std::string json = buf;
        // Recorded only when given, so that runs from before these flags still resume.
        if (!schedule.empty()) json.insert(json.size() - 1, ",\"schedule\":" + json_quote(schedule));
        if (!mix.empty()) json.insert(json.size() - 1, ",\"mix\":" + json_quote(mix));
        // AdamW's betas and epsilon only when not the defaults, which every run before the flags used.
        const AdamWConfig defaults;
        auto number = [](float v) {
            char b[32];
            snprintf(b, sizeof b, "%.9g", v);
            return std::string(b);
        };
        if (adamw.beta1 != defaults.beta1) json.insert(json.size() - 1, ",\"beta1\":" + number(adamw.beta1));
        if (adamw.beta2 != defaults.beta2) json.insert(json.size() - 1, ",\"beta2\":" + number(adamw.beta2));
        if (adamw.eps != defaults.eps) json.insert(json.size() - 1, ",\"adam_eps\":" + number(adamw.eps));
        return json;
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

// ---- Parse: the flags, and the GPU's defaults where a flag was left out.

static void add_model_flags(Flags& flags, TrainArgs& a) {
    flags.add_int("layers", &a.layers, "transformer blocks");
    flags.add_int("width", &a.width, "model width C");
    flags.add_int("heads", &a.heads, "attention heads (head dim = width/heads must be 64 or 128)");
    flags.add_float("rope-theta", &a.rope_theta, "rotary embedding base");
    flags.add_string("nope-layers", &a.nope_layers, "layers without rotary embedding (NoPE: q and k match by content at any distance), e.g. 1,3,5");
    flags.add_int("logn-attn", &a.logn_attn, "log-n attention in the NoPE layers: a query at position p >= N scaled by "
                                             "ln(p + 1) / ln(N) (0: off; recorded in the checkpoint; infer may change it)");
    flags.add_bool("logn-learn", &a.logn_learn, "each head of a NoPE layer learns the slope of its log-n factor: queries past N "
                                                "scaled by 1 + s ln((p + 1) / N), s started at 1 / ln(N) (needs --logn-attn N)");
    flags.add_int("qk-conv", &a.qk_conv, "W: the NoPE layers' queries and keys pass a causal depthwise convolution over the W "
                                         "tokens up to each (started as the identity), so that a head can match a phrase (0: off)");
    flags.add_string("qk-conv-layers", &a.qk_conv_layers, "the NoPE layers that --qk-conv convolves, e.g. 3,5 (default: every NoPE layer)");
    flags.add_bool("attn-sink", &a.attn_sink, "every layer's softmax gains one key per head of learned score and zero value "
                                              "(an attention sink), so that a head can attend nowhere");
    flags.add_bool("pointer", &a.pointer, "a pointer after the last LayerNorm: one more head whose weights on the earlier "
                                          "positions, gathered by the token each holds, are mixed into the output by a learned "
                                          "gate (layers/pointer.h)");
    flags.add_string("attn", &a.attn, ("attention pattern of the layers: " + attn_kind_names() + ", or a comma list of them cycled over the layers (docs/attention-spec.md)").c_str());
    flags.add_string("layer-pattern", &a.layer_pattern, "single layers of another pattern than --attn gives them: LAYER:PATTERN "
                                                        "entries (layers from 0, patterns as --attn names them), e.g. 0:dense,5:dense");
    add_pattern_flags(flags, a.pattern);
}

static void add_training_flags(Flags& flags, TrainArgs& a) {
    flags.add_int("seq-len", &a.seq_len, "tokens per training window T");
    flags.add_int("batch", &a.batch, "windows per step B");
    flags.add_int("steps", &a.steps, "optimizer steps");
    flags.add_float("lr", &a.lr, "peak learning rate");
    flags.add_float("min-lr-frac", &a.min_lr_frac, "final learning rate as a fraction of --lr");
    flags.add_int("warmup", &a.warmup, "linear warmup steps");
    add_adamw_flags(flags, a.adamw);
    flags.add_float("grad-clip", &a.grad_clip, "clip the gradient norm to this (0: off)");
    flags.add_int("seed", &a.seed, "seed for weights and data order");
    flags.add_bool("doc-mask", &a.doc_mask, "keep attention inside each document of a window");
    flags.add_int("val-every", &a.val_every, "steps between validation losses (0: only at the end)");
    flags.add_int("val-batches", &a.val_batches, "batches per validation");
    flags.add_int("ckpt-every", &a.ckpt_every, "steps between checkpoints (0: only at the end)");
    flags.add_int("log-every", &a.log_every, "steps between progress lines");
    flags.add_int("keep-ckpts", &a.keep_ckpts, "checkpoints kept in --out, newest first (0: all)");
    flags.add_bool("resume", &a.resume, "continue from the latest checkpoint in --out");
    flags.add_string("schedule", &a.schedule, "a length curriculum: later stages as SEQ_LENxBATCH@STEP, each from the step after "
                                              "STEP steps, e.g. 8192x16@300,32768x4@600 (--seq-len x --batch before)");
    flags.add_string("mix", &a.mix, "token shards mixed into the corpus, each a fraction of every batch's windows, e.g. "
                                    "tasks.bin:0.5 (data_tool task-shard makes retrieval documents); one list per stage of "
                                    "--schedule with ';' between them, e.g. tasks2k.bin:0.5;tasks32k.bin:0.5");
    flags.add_string("init-from", &a.init_from, "start from the weights of this checkpoint (a file, or a directory's latest), e.g. a "
                                                "model trained at a shorter --seq-len: step 0, a new optimizer state and schedule; "
                                                "--layers, --width, --heads, --rope-theta must match it, the attention pattern may differ");
    flags.add_bool("deterministic", &a.deterministic, "cuda: bit-reproducible steps (deterministic attention backward, slower; "
                                                      "the ring's too under --cp); the CPU always is");
    flags.add_int("max-bad-steps", &a.max_bad_steps, "consecutive steps with a non-finite loss or gradient (each skipped) that stop the run");
}

static void add_run_flags(Flags& flags, TrainArgs& a) {
    flags.add_int("sample-tokens", &a.sample_tokens, "tokens of sample text printed at the end (0: none)");
    flags.add_string("sample-prompt", &a.sample_prompt, "prompt of the final sample; empty: the opening (12 tokens) of the "
                                                        "first held-out document in val.bin, so the sample speaks of "
                                                        "the corpus it was trained on");
    flags.add_string("recompute", &a.recompute, "gradient checkpointing: auto (the fastest policy that fits in memory), "
                                                "none, selective (recompute LayerNorms and the MLP's up projection) or "
                                                "full (keep each block's input, recompute the block)");
    flags.add_float("memory-cap", &a.memory_cap_gib, "GiB the memory plan may give activations on each rank, to leave "
                                                     "room for others (0: all that is free)");
    flags.add_int("stop-at", &a.stop_at, "stop after this step with a checkpoint (a run in pieces: --resume continues it to "
                                         "--steps; 0: run to --steps)");
    flags.add_float("time-limit", &a.time_limit, "stop with a checkpoint after the step that passes this many minutes of the "
                                                 "run (a run in time-limited pieces, each continued by --resume; 0: none)");
    flags.add_int("cp", &a.cp, "context parallel: split each window over this many GPUs (ring attention); "
                               "the job's ranks are data-parallel groups of --cp");
    flags.add_int("simulate-ranks", &a.simulate_ranks, "run this many ranks as threads of one process, sharing "
                                                       "its device (tests; 0: the launcher's ranks, scripts/launch.sh)");
    flags.add_bool("time-comm", &a.time_comm, "several ranks: time how long each step's compute waits for communication "
                                              "(the ring's transfers, the gradient and loss sums) and print it");
    flags.add_int("op-split", &a.op_split, "time this step (counted from 1) op by op on rank 0's GPU and print its time by "
                                           "kind of op: matrix products, attention, layer norms, ... (0: none)");
    flags.add_bool("shard-update", &a.shard_update, "data parallel (--cp 1, several ranks): each rank applies AdamW to 1/P of "
                                                    "the weights and sends them to the others (off, the default: every rank "
                                                    "updates every weight; the same bits either way; on divides the update's "
                                                    "work by P, but the weights' broadcasts wait before the next forward, "
                                                    "so it rarely pays)");
    flags.add_bool("grad-overlap", &a.grad_overlap, "data parallel (--cp 1, several ranks): sum each block's gradients over "
                                                    "the ranks while the backward goes on (off: all at once after it)");
}

// The flags in the order --help lists them.
static void add_flags(Flags& flags, TrainArgs& a) {
    flags.add_string("data", &a.data, "directory with train.bin, val.bin and tokenizer.model");
    flags.add_string("out", &a.out, "directory for checkpoints, metrics.csv and the sample");
    flags.add_string("device", &a.device, "auto, cpu or cuda");
    flags.add_string("attention", &a.attention, "attention kernels on the GPU: flash (ours) or cudnn");
    add_model_flags(flags, a);
    add_training_flags(flags, a);
    add_run_flags(flags, a);
}

// The GPU default: a ~100M-parameter model (GPT-2 small's body with our vocabulary) on windows of
// 1024 tokens. Flags given on the command line win.
static void apply_gpu_defaults(TrainArgs& a, const Flags& flags) {
    auto preset = [&](const char* flag, int* dst, int value) { if (!flags.was_set(flag)) *dst = value; };
    preset("layers", &a.layers, 12), preset("width", &a.width, 768), preset("heads", &a.heads, 12);
    preset("seq-len", &a.seq_len, 1024), preset("batch", &a.batch, 16), preset("steps", &a.steps, 800);
    preset("warmup", &a.warmup, 100), preset("val-every", &a.val_every, 200), preset("val-batches", &a.val_batches, 4);
    preset("ckpt-every", &a.ckpt_every, 400), preset("log-every", &a.log_every, 20);
    if (!flags.was_set("lr")) a.lr = 6e-4f;
}

// ---- Validate: every flag on its own, once, before any rank starts; what the checks parse is kept.

// --recompute: a policy, or auto (the fastest that fits, chosen per stage).
struct RecomputeChoice {
    Recompute policy = Recompute::None;
    bool is_auto = false;
};

// The run's stages, their --mix shards and the --recompute policy.
struct RunShape {
    std::vector<TrainStage> stages;            // --seq-len x --batch, then --schedule's
    std::vector<std::vector<MixedShard>> mix;  // one list per stage
    RecomputeChoice recompute;
};

static RunShape validate_args(const TrainArgs& a, Device device) {
    RunShape shape;
    // Each value's rule is the one the checkpoint reader applies to a recorded run (model/train_rules.h).
    for (const std::string& e : {steps_error(a.steps), lr_error(a.lr), min_lr_frac_error(a.min_lr_frac), adamw_config_error(a.adamw, a.lr),
                                 grad_clip_error(a.grad_clip), warmup_error(a.warmup), val_every_error(a.val_every),
                                 val_batches_error(a.val_batches)})
        if (!e.empty()) fatal("%s", e.c_str());
    shape.stages = parse_schedule(a.schedule, {0, a.seq_len, a.batch}, a.steps, kMaxSeqLen);
    shape.mix = parse_mix(a.mix, shape.stages.size());
    check_stages_change(shape.stages, a.mix);
    if (a.log_every < 1 || a.ckpt_every < 0 || a.keep_ckpts < 0 || a.sample_tokens < 0)
        fatal("--ckpt-every, --keep-ckpts, --sample-tokens must be >= 0 and --log-every >= 1");
    if (a.max_bad_steps < 1) fatal("--max-bad-steps must be at least 1 (got %d)", a.max_bad_steps);
    if (a.op_split < 0 || a.op_split > a.steps) fatal("--op-split must be a step in [1, --steps %d], or 0 for none (got %d)", a.steps, a.op_split);
    if (a.stop_at < 0 || a.stop_at > a.steps) fatal("--stop-at must be in [0, --steps %d] (got %d)", a.steps, a.stop_at);
    // Any positive limit stops the run after the step that passes it (at least one step); past a
    // year a limit is a slip, and 0 is the way to say none.
    if (!(a.time_limit >= 0 && a.time_limit <= 525600))
        fatal("--time-limit must be 0 (no limit) or a number of minutes up to 525600 (a year) (got %g)", a.time_limit);
    parse_recompute(a.recompute, &shape.recompute.policy, &shape.recompute.is_auto);
    // 0 means no cap; a cap under a MiB would round to 0 bytes, which the planner reads as none.
    if (!(a.memory_cap_gib == 0 || (a.memory_cap_gib >= 1.0 / 1024 && a.memory_cap_gib <= 1e6)))
        fatal("--memory-cap must be 0 (no cap) or in [1/1024, 1e6] GiB (got %g)", a.memory_cap_gib);
    if (a.simulate_ranks > 1 && device == Device::Cuda && a.attention != "flash")
        fatal("--simulate-ranks runs its ranks as threads of one process, and cuDNN's plans are per process: use --attention flash");
    return shape;
}

// ---- Load: the corpus, the model's config, the run resumed or the weights started from.
// Everything that can fail on bad input is checked before anything is written.

// A resumed run must share every flag that decides the losses with the run it continues, both
// ways: a flag the run recorded (--schedule, --mix) but this resume leaves out is refused too, or
// the steps after it would train on another shape and the next checkpoint forget it.
static void require_same_run_flags(const std::string& saved_json, const std::string& now_json, const std::string& out) {
    const Json saved = JsonParser(saved_json).parse(), now = JsonParser(now_json).parse();
    auto text = [](const Json& v) {
        char buf[32];
        snprintf(buf, sizeof buf, "%.9g", v.num);
        return v.kind == Json::Bool ? std::string(v.b ? "on" : "off") : v.kind == Json::String ? v.str : std::string(buf);
    };
    for (const auto& [key, value] : now.obj) {
        std::string flag = "--" + key;
        for (char& c : flag) c = c == '_' ? '-' : c;
        if (!saved.has(key)) fatal("--resume: the checkpoint in %s does not record %s: start a fresh run", out.c_str(), flag.c_str());
        if (saved.at(key).kind != value.kind || text(saved.at(key)) != text(value))
            fatal("--resume: %s is %s but the run in %s used %s: pass the same value to resume", flag.c_str(),
                  text(value).c_str(), out.c_str(), text(saved.at(key)).c_str());
    }
    for (const auto& [key, value] : saved.obj) {
        std::string flag = "--" + key;
        for (char& c : flag) c = c == '_' ? '-' : c;
        if (!now.has(key))
            fatal("--resume: the run in %s trained with %s '%s'; pass the same %s, or start a new run with another --out",
                  out.c_str(), flag.c_str(), text(value).c_str(), flag.c_str());
    }
}

// The recorded --schedule and --mix must parse as they did when the run began: one that does not
// (an edited or damaged file) would otherwise be reported as a flag to pass again.
static void require_recorded_recipe_valid(const std::string& saved_json, const std::string& path) {
    const Json saved = JsonParser(saved_json).parse();
    try {
        std::vector<TrainStage> stages{{}};
        if (saved.has("schedule"))
            stages = parse_schedule(saved.at("schedule").as_string(),
                                    {0, (int)saved.at("seq_len").as_int("seq_len", 2, kMaxSeqLen), (int)saved.at("batch").as_int("batch", 1, kMaxSeqLen)},
                                    (int)saved.at("steps").as_int("steps", 1, INT32_MAX), kMaxSeqLen);
        if (saved.has("mix")) parse_mix(saved.at("mix").as_string(), stages.size());
    } catch (const std::runtime_error& e) {  // FatalError from the parsers, JsonError for a value of the wrong kind
        fatal("--resume: %s is corrupt: its recorded recipe does not parse (%s): use another checkpoint, or start a new run "
              "with another --out", path.c_str(), e.what());
    }
}

// The token files this run trains on, identified (data/identity.h): recorded in every checkpoint.
static std::vector<RecipeFile> run_files(const TrainArgs& a, const RunShape& shape) {
    std::vector<RecipeFile> files;
    for (const char* name : {"train.bin", "val.bin"}) files.push_back({name, a.data + "/" + name, file_identity(a.data + "/" + name)});
    for (const auto& stage : shape.mix)
        for (const MixedShard& m : stage) {
            bool seen = false;
            for (const RecipeFile& f : files) seen = seen || (f.role == "--mix" && f.path == m.path);
            if (!seen) files.push_back({"--mix", m.path, file_identity(m.path, "--mix", kShardFlagFix)});
        }
    return files;
}

// The files the checkpoint recorded must be the ones this resume reads. A checkpoint from before
// they were recorded resumes with a warning (its next checkpoint records the files read now).
static void require_same_files(const Checkpoint& ck, const std::vector<RecipeFile>& now, const std::string& path, bool say) {
    if (ck.state.recipe.empty()) {
        if (say)
            std::fprintf(stderr, "warning: --resume: %s records no identities of train.bin, val.bin or the --mix shards "
                                 "(written before train recorded them): they are not checked\n", path.c_str());
        return;
    }
    std::vector<RecipeFile> saved;
    try {
        saved = recipe_from_json(ck.state.recipe);
    } catch (const JsonError& e) {
        fatal("--resume: %s is corrupt: its recorded recipe does not parse (%s): use another checkpoint, or start a new run "
              "with another --out", path.c_str(), e.what());
    }
    const std::string diff = recipe_difference(saved, now);
    if (!diff.empty())
        fatal("--resume: %s: restore the run's files, or start a new run with another --out", diff.c_str());
}

// "" when the two models are the same, else which flag differs and how.
static std::string model_difference(const GPTConfig& now, const GPTConfig& saved) {
    char buf[256];
    auto differs = [&](const char* flag, long long a, long long b) {
        snprintf(buf, sizeof buf, "%s is %lld but the checkpoint's model has %lld", flag, a, b);
        return std::string(buf);
    };
    if (now.vocab_size != saved.vocab_size) return differs("the tokenizer's vocabulary", now.vocab_size, saved.vocab_size);
    if (now.n_layer != saved.n_layer) return differs("--layers", now.n_layer, saved.n_layer);
    if (now.n_embd != saved.n_embd) return differs("--width", now.n_embd, saved.n_embd);
    if (now.n_head != saved.n_head) return differs("--heads", now.n_head, saved.n_head);
    if (rope_bases_differ(now, saved))
        return "--rope-theta differs from the checkpoint's model";
    if (now.nope_layers != saved.nope_layers) return "--nope-layers differs from the checkpoint's model";
    if (now.logn_attn != saved.logn_attn) return differs("--logn-attn", now.logn_attn, saved.logn_attn);
    if (now.logn_learn != saved.logn_learn)
        return std::string("--logn-learn is ") + (now.logn_learn ? "on" : "off") + " but the checkpoint's model " +
               (saved.logn_learn ? "learns" : "does not learn") + " its log-n slopes";
    if (now.qk_conv != saved.qk_conv) return differs("--qk-conv", now.qk_conv, saved.qk_conv);
    if (now.attn_sink != saved.attn_sink)
        return std::string("--attn-sink is ") + (now.attn_sink ? "on" : "off") + " but the checkpoint's model " + (saved.attn_sink ? "has" : "has no") + " sinks";
    if (now.pointer != saved.pointer)
        return std::string("--pointer is ") + (now.pointer ? "on" : "off") + " but the checkpoint's model " + (saved.pointer ? "has a" : "has no") + " pointer";
    for (int l = 0; l < now.n_layer; l++)
        if (now.layer_qk_conv(l) != saved.layer_qk_conv(l))
            return "layer " + std::to_string(l) + (now.layer_qk_conv(l) ? " convolves" : " does not convolve") + " its queries and keys " +
                   "(--qk-conv-layers) but " + (saved.layer_qk_conv(l) ? "does" : "does not") + " in the checkpoint's model";
    for (int l = 0; l < now.n_layer; l++) {
        const AttnPattern a = now.attn(l), b = saved.attn(l);
        if (a.causal != b.causal) return "layer " + std::to_string(l) + " of the checkpoint's model is " + (b.causal ? "" : "not ") + "causal, which train does not make";
        if (a.kind != b.kind)
            return "layer " + std::to_string(l) + " is " + attn_kind_name(a.kind) + " (--attn, --layer-pattern) but " + attn_kind_name(b.kind) + " in the checkpoint's model";
        if (pattern_to_json(a) != pattern_to_json(b))
            return "layer " + std::to_string(l) + "'s " + attn_kind_name(a.kind) + " pattern (" + pattern_to_json(a) +
                   ") differs from the checkpoint's model (" + pattern_to_json(b) + ")";
    }
    return "";
}

// The training state a checkpoint claims must be one this run can reach: step within --steps,
// and the corpus loader's place in the data exactly where the run's batches up to that step leave it.
static void check_resume_state(const TrainState& st, const TrainArgs& a, const BatchSource& train, const std::string& path) {
    if (st.step > a.steps) fatal("--resume: %s is at step %d, past --steps %d: the file is corrupt or from another run", path.c_str(), st.step, a.steps);
    if (st.step == a.steps) fatal("--resume: the run in %s already finished its %d steps: choose another --out to train again", a.out.c_str(), a.steps);
    const LoaderState want = train.expected_corpus_state(st.step);
    if (st.loader_epoch != want.epoch || st.loader_cursor != want.cursor)
        fatal("--resume: %s says the loader is at epoch %llu, window %llu, but %d steps of this run's batches end at epoch %llu, "
              "window %llu: the checkpoint is corrupt or from other data", path.c_str(), (unsigned long long)st.loader_epoch,
              (unsigned long long)st.loader_cursor, st.step, (unsigned long long)want.epoch, (unsigned long long)want.cursor);
}

// The model's vocabulary is the tokenizer's: a shard's id past it would index the embedding and
// the logits out of bounds (read_shard checked every token against the shard's own vocabulary),
// and a shard of another tokenizer, even a smaller one, trains on ids that mean other text.
// Every shard must carry this tokenizer's fingerprint (a version-1 shard: its vocabulary size).
static void require_tokenizer(const TokenShard& shard, const Tokenizer& tok, const std::string& what, const std::string& fix) {
    require_shard_tokenizer(shard, tok.fingerprint(), (uint32_t)tok.vocab_size(), tok.source(), what, fix);
}

struct Corpus {
    Tokenizer tok;
    TokenShard train, val;
};

static Corpus load_corpus(const TrainArgs& a) {
    Corpus c;
    c.tok.load_file(a.data + "/tokenizer.model");
    c.train = read_shard(a.data + "/train.bin");
    c.val = read_shard(a.data + "/val.bin");
    for (const TokenShard* sh : {&c.train, &c.val})
        require_tokenizer(*sh, c.tok, sh->path, "re-run `make data` (data_tool prepare) to regenerate the corpus");
    return c;
}

static GPTConfig config_from_flags(const TrainArgs& a, const Flags& flags, int vocab_size) {
    GPTConfig cfg;
    cfg.vocab_size = vocab_size;
    cfg.n_layer = a.layers, cfg.n_embd = a.width, cfg.n_head = a.heads, cfg.rope_theta = a.rope_theta, cfg.attn_sink = a.attn_sink;
    cfg.pointer = a.pointer;
    cfg.nope_layers = parse_int_list(a.nope_layers, "--nope-layers");
    // On --resume the model flags left out are the checkpoint's: a lone --logn-attn or --qk-conv
    // is compared with its model (require_model_flags_fit), not checked against NoPE layers
    // nobody gave.
    const bool nope_alone = a.resume && !flags.was_set("nope-layers");
    cfg.logn_attn = nope_alone ? 0 : a.logn_attn;
    cfg.logn_learn = nope_alone ? false : a.logn_learn;
    cfg.qk_conv = nope_alone ? 0 : a.qk_conv;
    const std::vector<int> conv_layers = parse_int_list(a.qk_conv_layers, "--qk-conv-layers");
    if (!nope_alone) cfg.qk_conv_layers = conv_layers;
    validate_config(cfg);  // before sizing anything by --layers or --width
    cfg.logn_attn = a.logn_attn, cfg.logn_learn = a.logn_learn, cfg.qk_conv = a.qk_conv, cfg.qk_conv_layers = conv_layers;
    if (flags.was_set("rope-theta") && !rotates_any_layer(cfg))
        fatal("--rope-theta has no effect: every layer is NoPE (--nope-layers %s), so nothing rotates; drop --rope-theta or "
              "leave a layer out of --nope-layers", a.nope_layers.c_str());
    cfg.layer_attn = layer_patterns_from_flags(a.layers, a.attn, a.pattern, a.layer_pattern);
    // After --layer-pattern: a pattern's flags count only if some layer has it.
    std::vector<std::string> used;
    for (const AttnPattern& p : cfg.layer_attn) used.push_back(attn_kind_name(p.kind));
    refuse_unused_pattern_flags(given_pattern_flags(flags), used, "--attn");
    return cfg;
}

// Model flags given now must describe the checkpoint's model; flags left out take it.
static void require_model_flags_fit(const GPTConfig& from_flags, const GPTConfig& saved, const Flags& flags) {
    std::vector<std::string> model_flags = {"layers", "width", "heads", "rope-theta", "nope-layers", "logn-attn", "logn-learn",
                                           "qk-conv", "qk-conv-layers", "attn-sink", "pointer", "attn", "layer-pattern"};
    for (const std::string& f : pattern_flag_names()) model_flags.push_back(f);
    const std::string diff = model_difference(from_flags, saved);
    bool any_model_flag = false;
    for (const std::string& f : model_flags) any_model_flag = any_model_flag || flags.was_set(f.c_str());
    if (!diff.empty() && (any_model_flag || from_flags.vocab_size != saved.vocab_size || diff.find("causal") != std::string::npos))
        fatal("--resume: %s: drop the model flags when resuming, or start a fresh run", diff.c_str());
}

// The latest checkpoint in --out, which only --resume may continue.
struct ResumePoint {
    std::string path;  // "" when --out holds none
    Checkpoint ck;     // loaded with --resume only
};

// With --resume, *cfg becomes the checkpoint's model.
static ResumePoint load_resume_point(const TrainArgs& a, const Flags& flags, const char* device_used, const Tokenizer& tok,
                                     const std::vector<RecipeFile>& files, bool say, GPTConfig* cfg) {
    ResumePoint rp;
    rp.path = latest_checkpoint(a.out);
    if (!a.resume) {
        if (!rp.path.empty())
            fatal("%s already holds checkpoints (%s): pass --resume to continue, or choose another --out", a.out.c_str(), rp.path.c_str());
        return rp;
    }
    if (rp.path.empty()) fatal("--resume: no checkpoint in %s to resume from; drop --resume to start fresh", a.out.c_str());
    rp.ck = load_checkpoint(rp.path);
    if (!rp.ck.has_train_state) fatal("--resume: %s holds no training state", rp.path.c_str());
    try {
        require_recorded_recipe_valid(rp.ck.state.train_args, rp.path);
        require_same_run_flags(rp.ck.state.train_args, a.to_json(device_used), a.out);
    } catch (const JsonError& e) {
        fatal("--resume: %s: its train_args are corrupt (%s): use another checkpoint", rp.path.c_str(), e.what());
    }
    require_model_flags_fit(*cfg, rp.ck.cfg, flags);
    *cfg = rp.ck.cfg;
    if (rp.ck.tokenizer != tok.serialized_model())
        fatal("--resume: %s/tokenizer.model differs from the one the checkpoint was trained with", a.data.c_str());
    require_same_files(rp.ck, files, rp.path, say);
    return rp;
}

// --init-from: the weights of another run (none without it); attention has no weights, so its
// pattern may differ.
static std::vector<float> load_init_weights(const TrainArgs& a, const GPTConfig& cfg, const Tokenizer& tok, bool say) {
    if (a.init_from.empty()) return {};
    if (a.resume) fatal("--init-from starts a fresh run: drop it when resuming (the checkpoint in %s holds the weights)", a.out.c_str());
    std::string path = a.init_from;
    if (is_directory(path) && (path = latest_checkpoint(a.init_from)).empty())
        fatal("--init-from %s: no checkpoint in that directory", a.init_from.c_str());
    Checkpoint init = load_checkpoint(path);
    const GPTConfig& ic = init.cfg;
    if (ic.vocab_size != cfg.vocab_size || ic.n_layer != cfg.n_layer || ic.n_embd != cfg.n_embd || ic.n_head != cfg.n_head ||
        rope_bases_differ(ic, cfg))
        fatal("--init-from %s holds %d layers, width %d, %d heads, rope theta %g, vocab %d, but this run asks for %d, %d, %d, %g, "
              "%d: pass its --layers, --width, --heads, --rope-theta and its corpus", path.c_str(), ic.n_layer, ic.n_embd,
              ic.n_head, ic.rope_theta, ic.vocab_size, cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.rope_theta, cfg.vocab_size);
    if (ic.nope_layers != cfg.nope_layers)
        fatal("--init-from %s has NoPE layers [%s] but this run asks for [%s]: pass its --nope-layers", path.c_str(),
              int_list_text(ic.nope_layers).c_str(), int_list_text(cfg.nope_layers).c_str());
    if (init.tokenizer != tok.serialized_model())
        fatal("--init-from %s was trained with another tokenizer than %s/tokenizer.model: use its corpus", path.c_str(),
              a.data.c_str());
    if (ic.qk_conv && ic.qk_conv != cfg.qk_conv)
        fatal("--init-from %s convolves its queries and keys over %d tokens but this run asks for %d: pass --qk-conv %d",
              path.c_str(), ic.qk_conv, cfg.qk_conv, ic.qk_conv);
    if (ic.attn_sink != cfg.attn_sink)
        fatal("--init-from %s %s attention sinks and this run %s: %s --attn-sink", path.c_str(), ic.attn_sink ? "has" : "has no",
              cfg.attn_sink ? "asks for them" : "does not", ic.attn_sink ? "pass" : "drop");
    if (ic.pointer != cfg.pointer)
        fatal("--init-from %s %s a pointer and this run %s: %s --pointer", path.c_str(), ic.pointer ? "has" : "has no",
              cfg.pointer ? "asks for one" : "does not", ic.pointer ? "pass" : "drop");
    if (ic.logn_learn && !cfg.logn_learn)
        fatal("--init-from %s learns its log-n slopes and this run does not: pass --logn-learn", path.c_str());
    // A slope is per unit of ln((p + 1) / N): under another N the same slopes are another model.
    if (ic.logn_learn && ic.logn_attn != cfg.logn_attn)
        fatal("--init-from %s learned its log-n slopes from --logn-attn %d and this run asks for %d: pass --logn-attn %d",
              path.c_str(), ic.logn_attn, cfg.logn_attn, ic.logn_attn);
    bool same_convolutions = true;
    for (int l = 0; l < cfg.n_layer; l++) {
        if (ic.layer_qk_conv(l) && !cfg.layer_qk_conv(l))
            fatal("--init-from %s convolves the queries and keys of layer %d and this run does not: pass --qk-conv-layers %s",
                  path.c_str(), l, int_list_text(ic.qk_conv_layers.empty() ? ic.nope_layers : ic.qk_conv_layers).c_str());
        same_convolutions = same_convolutions && ic.layer_qk_conv(l) == cfg.layer_qk_conv(l);
    }
    const bool new_slopes = cfg.logn_learn && !ic.logn_learn;
    if (say)
        std::printf("weights from %s%s%s\n", path.c_str(), same_convolutions ? "" : ", the q/k convolutions from the identity",
                    new_slopes ? ", the log-n slopes from the fixed factor's" : "");
    return same_convolutions && !new_slopes ? std::move(init.params) : weights_with_identity_convolutions(init.params, ic, cfg);
}

static AttnBackend choose_attention(const TrainArgs& a, const GPTConfig& cfg, Device device) {
    const AttnBackend attn = parse_attention_backend(a.attention, a.doc_mask);
    if (device == Device::Cuda) check_attention_backend(attn, cfg, a.deterministic);
    if (device == Device::Cuda) check_ring_backend(a.cp > 1, attn);
    if (a.cp > 1 && cfg.qk_conv) fatal("%s", kQkConvRingError);
    return attn;
}

// Every rank must run the same flags and binary, or their updates would drift apart.
static void require_same_run_on_every_rank(const TrainArgs& a, const GPTConfig& cfg, const char* device_used, ParallelContext& px) {
    const std::string who = a.to_json(device_used) + config_to_json(cfg) + "cp " + std::to_string(a.cp);
    uint64_t h = fnv1a(who.data(), who.size());
    if (FILE* f = std::fopen("/proc/self/exe", "rb")) {
        std::vector<char> buf(1 << 20);
        for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), f)) > 0;) h = fnv1a(buf.data(), n, h);
        std::fclose(f);
    }
    px.check_same(h, "the flags, the model or the binary", "start every rank with the same binary and flags");
}

// The --mix shards of every stage; a file named in several stages is read once.
struct MixedShards {
    std::map<std::string, TokenShard> files;
    std::vector<std::vector<std::pair<const TokenShard*, double>>> per_stage;  // into `files`
};

static MixedShards read_mixed_shards(const std::vector<std::vector<MixedShard>>& mix, const TrainArgs& a, const Tokenizer& tok) {
    MixedShards out;
    out.per_stage.resize(mix.size());
    for (size_t k = 0; k < mix.size(); k++)
        for (const MixedShard& m : mix[k]) {
            if (!out.files.count(m.path)) {
                if (same_file(m.path, a.data + "/val.bin"))
                    fatal("--mix %s is the corpus's validation shard: training on it makes the validation loss meaningless; mix a "
                          "task shard (data_tool task-shard) or another corpus's train.bin", m.path.c_str());
                if (same_file(m.path, a.data + "/train.bin"))
                    fatal("--mix %s is the corpus's own train.bin, which the run draws from already: drop it, or lower the other "
                          "--mix fractions to give the corpus more", m.path.c_str());
                const TokenShard& shard = out.files[m.path] = read_shard(m.path, "--mix");
                require_tokenizer(shard, tok, "--mix " + m.path,
                                  "regenerate it with this corpus's tokenizer (data_tool task-shard --data " + a.data +
                                      "), or train with --data the corpus it came from");
            }
            out.per_stage[k].push_back({&out.files.at(m.path), m.fraction});
        }
    return out;
}

// ---- Plan: each stage of the run.

// What each stage of the run (train --schedule) needs, all checked before anything is written:
// its shape on this rank, its validation batches and the recompute policy the memory plan picks.
struct StagePlan {
    TrainStage stage;
    int Bl = 0, Tl = 0;                  // this rank's part of a step
    int val_batch = 0, val_batches = 0;  // validation windows per batch and batches, at this stage's window
    Recompute policy = Recompute::None;
};

// Error messages name the stage only when --schedule made it.
static const char* stage_flag(const TrainStage& st) { return st.first_step == 0 ? "" : " (--schedule)"; }

// The fastest recompute policy that fits (or the one asked for); if it does not fit, what would.
static Recompute plan_stage_memory(const StagePlan& sp, const TrainArgs& a, const RecomputeChoice& rc, const ModelBackend& model,
                                   const ParallelContext& px, Device device, bool say) {
    int t_step = 1024;  // the longest window that fits, in steps a person reads (and a multiple of 2 x --cp)
    while (t_step > 2 && t_step > sp.Tl) t_step /= 2;
    const MemoryPlan plan = plan_memory(model, sp.Bl, sp.Tl, t_step, rc.is_auto, rc.policy, (size_t)(a.memory_cap_gib * 1073741824.0));
    if (say) std::printf("%s", format_plan(plan, model.memory_name()).c_str());
    if (!plan.chosen_fits) {
        const PolicyPlan& row = plan.rows[(int)plan.chosen];
        std::string alternatives;
        for (const PolicyPlan& r : plan.rows)
            alternatives += std::string(alternatives.empty() ? "" : "; ") + recompute_name(r.policy) + ": --seq-len <= " +
                            std::to_string(r.max_T * px.cp_size) + " or --batch <= " + std::to_string(r.max_B * px.dp_size);
        fatal("out of %s memory: --batch %d x --seq-len %d%s with --recompute %s needs %s for activations but %s "
              "are available%s; what fits: %s%s", model.memory_name(), sp.stage.batch, sp.stage.seq_len, stage_flag(sp.stage),
              a.recompute.c_str(), format_bytes((double)(row.needs.activations + row.needs.extra)).c_str(),
              format_bytes((double)plan.available).c_str(), a.memory_cap_gib > 0 ? " under --memory-cap" : "", alternatives.c_str(),
              px.cp_size > 1 || device != Device::Cuda ? "" : ", or split the window over GPUs (--cp)");
    }
    return plan.chosen;
}

static StagePlan plan_stage(const TrainStage& st, const TrainArgs& a, const RecomputeChoice& rc, const TokenShard& val_shard,
                            const ModelBackend& model, const ParallelContext& px, Device device, bool say) {
    StagePlan sp;
    sp.stage = st;
    const char* which = stage_flag(st);
    // The job's shape: DP groups of CP ranks, each window split in 2 CP chunks, each batch over DP.
    if (st.seq_len % (2 * a.cp))
        fatal("--seq-len %d%s does not split into 2 x --cp %d equal chunks (ring attention's zigzag): use a multiple of %d",
              st.seq_len, which, a.cp, 2 * a.cp);
    if (st.batch % px.dp_size)
        fatal("--batch %d%s windows do not split over %d data-parallel groups (%d ranks / --cp %d): use a multiple of %d",
              st.batch, which, px.dp_size, px.size, a.cp, px.dp_size);
    sp.Bl = st.batch / px.dp_size, sp.Tl = st.seq_len / px.cp_size;
    // Validation may hold fewer windows than a batch: it then runs smaller batches.
    const uint64_t val_windows = val_shard.n_tokens() > 0 ? (val_shard.n_tokens() - 1) / st.seq_len : 0;
    if (val_windows == 0)
        fatal("--seq-len %d%s is longer than %s/val.bin (%llu tokens): lower --seq-len or prepare a larger validation split",
              st.seq_len, which, a.data.c_str(), (unsigned long long)val_shard.n_tokens());
    sp.val_batch = (int)(std::min<uint64_t>(st.batch, val_windows) / px.dp_size * px.dp_size);
    if (sp.val_batch == 0)
        fatal("%s/val.bin holds %llu windows of %d, fewer than the %d data-parallel groups: prepare a larger validation split",
              a.data.c_str(), (unsigned long long)val_windows, st.seq_len, px.dp_size);
    sp.val_batches = (int)std::max<uint64_t>(1, std::min<uint64_t>(a.val_batches, val_windows / sp.val_batch));
    sp.policy = plan_stage_memory(sp, a, rc, model, px, device, say);
    return sp;
}

static std::vector<StagePlan> plan_stages(const BatchSource& train, const TrainArgs& a, const RecomputeChoice& rc,
                                          const TokenShard& val_shard, const ModelBackend& model, const ParallelContext& px,
                                          Device device, bool say) {
    std::vector<StagePlan> plans;
    for (const TrainStage& st : train.stages()) {
        if (say && train.stages().size() > 1) std::printf("stage from step %d: windows of %d tokens, %d per step\n", st.first_step, st.seq_len, st.batch);
        plans.push_back(plan_stage(st, a, rc, val_shard, model, px, device, say));
    }
    return plans;
}

// ---- Start: the weights and optimizer state the run starts from, and --out with its metrics.

// Keeps the rows of metrics.csv up to `step` (a resumed run rewrites what came after), through
// write_file_atomic: a crash here leaves the old file or the new one, never half of either.
static void truncate_metrics(const std::string& path, int step) {
    if (!file_exists(path)) return;
    const std::string text = read_file(path, "check the permissions of --out");
    std::string kept;
    for (size_t at = 0; at < text.size();) {
        const size_t end = std::min(text.find('\n', at), text.size());
        const std::string line = text.substr(at, end - at);
        if (line.rfind("step", 0) == 0 || std::atoll(line.c_str()) <= step) kept += line + "\n";
        at = end + 1;
    }
    write_file_atomic(path, kept);
}

// The weights and optimizer state the run starts from: the checkpoint's when resuming, else
// --init-from's or fresh ones. Returns the step it starts at and sets *updates, the AdamW steps taken.
static int load_model_state(ModelBackend& model, const GPTConfig& cfg, const TrainArgs& a, std::vector<float> init_params,
                            const ResumePoint& rp, bool say, int* updates) {
    {
        std::vector<float> w(model.num_params());
        init_gpt_weights(w.data(), cfg, (uint64_t)a.seed);
        model.set_params(init_params.empty() ? w.data() : init_params.data());
        std::vector<float>().swap(init_params);
    }
    *updates = 0;
    if (!a.resume) return 0;
    model.set_params(rp.ck.params.data());
    model.set_opt_state(rp.ck.m.data(), rp.ck.v.data());
    const int step = rp.ck.state.step;
    *updates = rp.ck.state.updates;
    if (say) std::printf("resumed from %s at step %d\n", rp.path.c_str(), step);
    if (a.stop_at && a.stop_at <= step)
        fatal("--stop-at %d is not past the checkpoint's step %d: give a later step, or drop --stop-at to run to --steps %d",
              a.stop_at, step, a.steps);
    return step;
}

// One writer per --out: the leader holds --out/.longnet-lock (core/run_lock.h) until the
// process ends, so a second run on the same folder is refused before it reads or writes there.
// An --out that holds a lock file (any folder a run wrote) is locked before its checkpoints are
// read (lock_existing_out, first thing in train_rank), without a change to the folder (a run
// refused for a bad flag leaves it as it was); any other --out as soon as open_metrics makes it,
// before metrics.csv is written.
static RunLock out_lock;

static void lock_existing_out(const TrainArgs& a, bool say) {
    if (say && is_directory(a.out)) out_lock.acquire(a.out, "--out", /*only_if_present=*/true);
}

// metrics.csv, a row at a time. Each row is one write(2) to the file, so it is in the
// kernel before the step's checkpoint is (kill -9 loses no row a checkpoint covers), and sync()
// puts the rows on disk before each checkpoint. A failed write (disk full, a file-size limit)
// cuts its torn part off and stops the run in one line. Ranks other than the leader write none.
struct MetricsLog {
    std::string path;
    int fd = -1;

    __attribute__((format(printf, 2, 3))) void row(const char* fmt, ...) {
        if (fd < 0) return;
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        if (n < 0 || n >= (int)sizeof buf) fatal("internal error: a metrics row of %d bytes for %s", n, path.c_str());
        struct stat st;
        if (::fstat(fd, &st) != 0) failed(errno);
        for (size_t done = 0; done < (size_t)n;) {
            const ssize_t w = ::write(fd, buf + done, (size_t)n - done);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                const int e = w < 0 ? errno : EIO;
                if (::ftruncate(fd, st.st_size) != 0) {}  // best effort: end on the last whole row
                failed(e);
            }
            done += (size_t)w;
        }
    }
    void sync() {
        if (fd >= 0 && ::fsync(fd) != 0) failed(errno);
    }
    void close() {
        if (fd >= 0 && ::close(fd) != 0) {
            fd = -1;
            failed(errno);
        }
        fd = -1;
    }
    [[noreturn]] void failed(int e) const {
        fatal("cannot write %s (%s): free space (or raise the file-size limit, ulimit -f), then --resume from the last checkpoint",
              path.c_str(), std::strerror(e));
    }
};

// --out with every missing parent (mkdir -p), locked, and metrics.csv in it: kept up to `step`
// when resuming, else new. One rank writes --out; the others write no metrics.
static MetricsLog open_metrics(const TrainArgs& a, bool say, int step) {
    MetricsLog log;
    if (!say) return log;
    for (size_t at = a.out.find('/', 1);; at = a.out.find('/', at + 1)) {
        const std::string dir = a.out.substr(0, at);
        if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) fatal("cannot create --out %s (%s)", dir.c_str(), strerror(errno));
        if (at == std::string::npos) break;
    }
    out_lock.acquire(a.out, "--out");
    out_lock.write_pid();
    log.path = a.out + "/metrics.csv";
    if (a.resume) truncate_metrics(log.path, step);
    else write_file_atomic(log.path, std::string("step,split,loss,lr,grad_norm,tokens_per_s,elapsed_s\n"));
    log.fd = ::open(log.path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);  // a resumed folder may have lost it
    if (log.fd < 0) fatal("cannot append to %s (%s)", log.path.c_str(), strerror(errno));
    return log;
}

// ---- Report: what the run is, printed by the leader before the first step.

static void report_model_and_data(const TrainArgs& a, const GPTConfig& cfg, const ModelBackend& model, const Corpus& corpus,
                                  const BatchSource& train, const MixedShards& mixed) {
    std::printf("model: %d layers, width %d, %d heads of %d, vocab %d: %.2fM parameters | backend %s\n", cfg.n_layer, cfg.n_embd,
                cfg.n_head, cfg.head_dim(), cfg.vocab_size, model.num_params() / 1e6, model.name().c_str());
    if (!cfg.nope_layers.empty())
        std::printf("rotary embedding: base %g, none in layers %s (NoPE)%s\n", cfg.rope_theta, int_list_text(cfg.nope_layers).c_str(),
                    (std::string(cfg.logn_attn ? ", log-n attention from position " + std::to_string(cfg.logn_attn) : "") +
                     (cfg.logn_learn ? " (each head learns its slope)" : "") +
                     (cfg.qk_conv ? ", their queries and keys convolved over " + std::to_string(cfg.qk_conv) + " tokens" : "") +
                     (cfg.qk_conv_layers.empty() ? "" : " in layers " + int_list_text(cfg.qk_conv_layers) + " only"))
                        .c_str());
    if (cfg.attn_sink) std::printf("attention sinks: one learned logit per head in every layer\n");
    if (cfg.pointer) std::printf("pointer: a copy head of %d after the last LayerNorm, mixed into the output by a gate\n", cfg.head_dim());
    std::printf("data: %llu train tokens (%llu windows of %d), %llu val tokens | %lld tokens per step, %d steps\n",
                (unsigned long long)corpus.train.n_tokens(), (unsigned long long)train.corpus_windows(), a.seq_len,
                (unsigned long long)corpus.val.n_tokens(), (long long)a.batch * a.seq_len, a.steps);
    const std::vector<TrainStage>& stages = train.stages();
    for (size_t k = 0; k < mixed.per_stage.size(); k++)
        for (const auto& [shard, fraction] : mixed.per_stage[k])
            std::printf("mix%s: %s (%llu tokens, %llu documents): %.0f%% of the windows\n",
                        stages.size() > 1 ? (" (stage from step " + std::to_string(stages[k].first_step) + ")").c_str() : "",
                        shard->path.c_str(), (unsigned long long)shard->n_tokens(), (unsigned long long)shard->n_docs(), 100 * fraction);
    AttnPattern dense_causal;
    const double all_pairs = pairs_kept(dense_causal, a.seq_len, cfg.n_head);
    for (int l = 0; l < cfg.n_layer; l++) {  // each sparse pattern where it starts, with the share of pairs it keeps
        const AttnPattern& p = cfg.attn(l);
        const std::string json = pattern_to_json(p);
        if (json == pattern_to_json(dense_causal) || (l > 0 && json == pattern_to_json(cfg.attn(l - 1)))) continue;
        std::printf("layer %d: %s %s, keeps %.4f of the causal pairs at T = %d\n", l, attn_kind_name(p.kind), json.c_str(),
                    pairs_kept(p, a.seq_len, cfg.n_head) / all_pairs, a.seq_len);
    }
}

static void report_parallel(const TrainArgs& a, const GPTConfig& cfg, const StagePlan& first, const ParallelContext& px) {
    if (px.size > 1)
        std::printf("parallel: %d ranks = %d data-parallel groups x --cp %d (%d windows of %d tokens per rank per step)\n",
                    px.size, px.dp_size, px.cp_size, first.Bl, first.Tl);
    if (px.size > 1 && px.cp_size == 1)
        std::printf("data parallel: AdamW %s\n", a.shard_update ? "split over the ranks (each updates 1/P of the weights and sends them on: "
                                                                  "--shard-update)" : "on every rank for every weight (--shard-update off)");
    if (px.cp_size == 1) return;
    // What the ring moves, against a plain ring, layer by layer.
    long long moved = 0, plain = 0, pairs = 0;
    for (int l = 0; l < cfg.n_layer; l++) {
        const RingPlan plan(cfg.attn(l), px.cp_size, a.seq_len);
        moved += plan.chunks_moved(), plain += plan.chunks_moved_plain(), pairs += plan.pairs_computed();
    }
    const double chunk_mb = (double)first.Bl * (a.seq_len / (2 * px.cp_size)) * 2 * cfg.n_embd * 2 / 1e6;
    std::printf("ring: per forward, %.3f MB of K/V sent per rank (a plain ring: %.3f MB); %lld of %lld chunk pairs computed\n",
                moved * chunk_mb / px.cp_size, plain * chunk_mb / px.cp_size, pairs, 4LL * px.cp_size * px.cp_size * cfg.n_layer);
}

// ---- Run: the training loop, one step at a time.

// Mean validation loss over the first n batches of the (unshuffled) validation windows; each
// batch's mean spans every rank's targets.
static double validation_loss(ModelBackend& model, DataLoader& val, int n, const ParallelContext& px, bool doc_mask) {
    const int Bg = val.batch_size(), T = val.seq_len(), Bl = Bg / px.dp_size, Tl = T / px.cp_size;
    std::vector<int> in((size_t)Bg * T), tg(in.size()), ds(in.size()), li((size_t)Bl * Tl), lt(li.size()), ld(li.size());
    const std::vector<int> pos = px.positions(T);
    val.reset();
    double mean = 0;
    for (int i = 0; i < n; i++) {
        val.next_batch(in.data(), tg.data(), ds.data());
        px.take_rows(li.data(), in.data(), Bg, T), px.take_rows(lt.data(), tg.data(), Bg, T), px.take_rows(ld.data(), ds.data(), Bg, T);
        model.forward(li.data(), lt.data(), doc_mask ? ld.data() : nullptr, Bl, Tl, pos.data());
        double nats = model.last_loss_sum();
        long long counted = 0;  // over the whole batch, which every rank holds: no collective
        for (int t : tg) counted += t >= 0;
        px.sum(&nats, 1);
        mean += counted > 0 ? nats / (double)counted : 0;
    }
    return mean / n;
}

// Test hook: LNGPT_NAN_STEPS=a-b makes the loss of steps a..b NaN, as a diverging step would.
static bool injected_nan(int step) {
    const char* env = std::getenv("LNGPT_NAN_STEPS");
    int lo = 0, hi = -1;
    return env && std::sscanf(env, "%d-%d", &lo, &hi) == 2 && step >= lo && step <= hi;
}

// Test hook: LNGPT_POISON_AT_STEP=n sets one weight to NaN after step n's update, as a kernel
// fault or a corrupted device would, so that the checkpoint guard can be tested.
static bool poison_after(int step) {
    const char* env = std::getenv("LNGPT_POISON_AT_STEP");
    int at = 0;
    return env && std::sscanf(env, "%d", &at) == 1 && step == at;
}

// Test hook: LNGPT_GPU_FAULT_AT_STEP=n makes one rank (LNGPT_GPU_FAULT_RANK, default the last)
// hit a device-side trap after step n, as a failing GPU would: its CUDA context is lost, it stops
// with one line, and the others must not wait on it forever (faults across ranks).
__global__ static void gpu_fault_kernel() { __trap(); }
static void inject_gpu_fault_if_due(int step, const ParallelContext& px, bool on_gpu) {
    const char* at = std::getenv("LNGPT_GPU_FAULT_AT_STEP");
    const char* who = std::getenv("LNGPT_GPU_FAULT_RANK");
    if (!on_gpu || !at || std::atoi(at) != step || px.rank != (who ? std::atoi(who) : px.size - 1)) return;
    std::fprintf(stderr, "rank %d: LNGPT_GPU_FAULT_AT_STEP=%d: a device-side trap (test hook)\n", px.rank, step);
    gpu_fault_kernel<<<1, 1>>>();
    CUDA_CHECK(cudaDeviceSynchronize());
}

// What the loop works on; train_rank owns it all.
struct LoopInputs {
    const TrainArgs& a;
    const char* device_used;  // what --device resolved to, recorded in checkpoints
    const std::string& recipe;  // the token files' identities, recorded in checkpoints
    ParallelContext& px;
    ModelBackend& model;
    BatchSource& train;
    const std::vector<StagePlan>& plans;
    const Corpus& corpus;
    MetricsLog& metrics;
};

// One step's outcome, for the log.
struct StepResult {
    float loss = 0, lr = 0;
    double norm = 0, seconds = 0;
    double comm_wait_ms = 0;  // --time-comm: the compute stream's waits for communication
    long long tokens = 0;
    bool skipped = false;
};

class TrainLoop {
  public:
    TrainLoop(const LoopInputs& in, int step, int updates)
        : in_(in), a_(in.a), step_(step), updates_(updates), opt_(in.a.adamw) {
        enter_stage(in_.train.stage_of(step_));
        for (int s = step_; s < a_.steps; s++) tokens_left_ += (long long)in_.train.stage_at(s).batch * in_.train.stage_at(s).seq_len;
        t_start_ = now_s();
        const char* kill_env = std::getenv("LNGPT_KILL_AT_STEP");
        kill_at_step_ = kill_env ? std::atoi(kill_env) : -1;
    }

    // True when --stop-at or --time-limit ended it before --steps.
    bool run() {
        while (step_ < a_.steps) {
            if (in_.train.stage_of(step_) != stage_) enter_stage(in_.train.stage_of(step_));
            log_step(train_step());
            validate_if_due();
            const bool stop = stop_requested();
            if (checkpoint_due() || stop) save(step_);
            std::fflush(stdout);
            // Test hook: die here as `kill -9` would (no cleanup), to prove resume is exact.
            if (kill_at_step_ == step_) raise(SIGKILL);
            inject_gpu_fault_if_due(step_, in_.px, std::strcmp(in_.device_used, "cuda") == 0);
            if (stop) return true;
        }
        return false;
    }

    void report_stop() const {
        if (say()) std::printf("stopped after step %d of %d (%s): --resume with the same flags continues\n", step_, a_.steps,
                               step_ == a_.stop_at ? "--stop-at" : "--time-limit");
    }

    void report_done() const {
        if (!say()) return;
        std::printf("done: %d steps, val loss %.4f, %.0f tokens/s, %s in training steps\n", step_, last_val_,
                    tokens_timed_ / std::max(t_train_, 1e-9), fmt_duration(t_train_).c_str());
        // Rank 0's view: its compute stream's waits for transfers, and its host's for the loss sum.
        if (a_.time_comm)
            std::printf("time split: %.1f ms a step, of which %.1f ms waiting for communication (%.1f%%)\n",
                        1e3 * t_train_ / std::max(steps_timed_, 1), 1e3 * comm_wait_s_ / std::max(steps_timed_, 1),
                        100.0 * comm_wait_s_ / std::max(t_train_, 1e-9));
    }

    int window() const { return in_.plans[stage_].stage.seq_len; }  // the stage in force's

  private:
    const StagePlan& plan() const { return in_.plans[stage_]; }
    bool say() const { return in_.px.leader(); }  // one rank prints, writes metrics and checkpoints
    bool checkpoint_due() const { return (a_.ckpt_every && step_ % a_.ckpt_every == 0) || step_ == a_.steps; }

    // The model's activations are laid out anew for each stage.
    void enter_stage(int k) {
        const StagePlan& sp = in_.plans[k];
        const size_t global = (size_t)sp.stage.batch * sp.stage.seq_len, local = (size_t)sp.Bl * sp.Tl;
        in_ids_.assign(global, 0), tg_.assign(global, 0), ds_.assign(global, 0);
        li_.assign(local, 0), lt_.assign(local, 0), ld_.assign(local, 0);
        positions_ = in_.px.positions(sp.stage.seq_len);
        val_ = std::make_unique<DataLoader>(in_.corpus.val, sp.val_batch, sp.stage.seq_len, 0, /*shuffle=*/false);
        in_.model.set_recompute(sp.policy);
        if (stage_ < 0) in_.model.reserve(sp.Bl, sp.Tl);
        else in_.model.reshape(sp.Bl, sp.Tl);
        if (say() && stage_ >= 0)
            std::printf("step %5d/%d | stage: windows of %d tokens, %d per step (recompute %s)\n", step_, a_.steps, sp.stage.seq_len,
                        sp.stage.batch, recompute_name(sp.policy));
        stage_ = k;
    }

    // The batch, forward and backward, and the update; the step counts even when skipped.
    StepResult train_step() {
        StepResult r;
        r.tokens = (long long)plan().stage.batch * plan().stage.seq_len;
        const double t0 = now_s();
        if (a_.time_comm) comm_wait_timer().take_ms(), host_wait_ms_ = 0;  // this step's waits only
        r.lr = lr_at(step_, a_.warmup, a_.steps, a_.lr, a_.lr * a_.min_lr_frac);
        const bool split = a_.op_split == step_ + 1;
        in_.model.time_ops(split);
        r.loss = forward_backward(draw_batch());
        if (injected_nan(step_ + 1)) r.loss = NAN;
        r.norm = std::isfinite(r.loss) ? in_.model.grad_norm() : NAN;
        step_++;
        // A step whose loss or gradient is not finite changes nothing (AdamW would spread the NaN into
        // every weight); the run goes on with the next batch unless it keeps happening.
        r.skipped = !std::isfinite(r.loss) || !std::isfinite(r.norm);
        if (r.skipped) {
            skip_step(r);
        } else {
            bad_in_a_row_ = 0;
            in_.model.adamw_step(r.lr, clip_scale(r.norm, a_.grad_clip), opt_, ++updates_);
        }
        if (poison_after(step_)) {
            in_.model.gather_state();
            std::vector<float> w(in_.model.num_params());
            in_.model.get_params(w.data());
            w[w.size() / 2] = NAN;
            in_.model.set_params(w.data());
        }
        if (a_.time_comm) r.comm_wait_ms = comm_wait_timer().take_ms() + host_wait_ms_;
        r.seconds = now_s() - t0;
        if (split) print_op_split(in_.model.take_op_split(), r.seconds), in_.model.time_ops(false);
        return r;
    }

    // --op-split: each kind of op's share of the step, as the GPU's events between ops saw it
    // (a host wait shows as the time of the op after it).
    void print_op_split(const std::vector<std::pair<std::string, double>>& kinds, double step_s) const {
        if (!say()) return;
        if (kinds.empty()) {
            std::printf("op split: this backend does not time its ops (the GPU backend does)\n");
            return;
        }
        double total = 0;
        for (const auto& [k, ms] : kinds) total += ms;
        std::printf("op split of step %d (%.1f ms on the GPU, %.1f ms on the host's clock):\n", step_, total, 1e3 * step_s);
        for (const auto& [k, ms] : kinds) std::printf("  %-12s %10.3f ms %6.1f%%\n", k.c_str(), ms, 100 * ms / std::max(total, 1e-9));
    }

    // This step's batch, this rank's rows of it; returns the targets counted over every rank:
    // counted in the whole batch, which every rank draws, so no collective (and no wait for one)
    // starts the step.
    long long draw_batch() {
        const int Bg = plan().stage.batch, T = plan().stage.seq_len;
        in_.train.next_batch(step_, in_ids_.data(), tg_.data(), ds_.data());
        in_.px.take_rows(li_.data(), in_ids_.data(), Bg, T);
        in_.px.take_rows(lt_.data(), tg_.data(), Bg, T);
        in_.px.take_rows(ld_.data(), ds_.data(), Bg, T);
        long long counted = 0;
        for (size_t i = 0; i < (size_t)Bg * T; i++) counted += tg_[i] >= 0;
        return counted;
    }

    // The step's mean loss spans every rank's targets, and so do the gradients.
    float forward_backward(long long counted) {
        in_.model.set_loss_count((int)counted);
        float loss = in_.model.forward_backward(li_.data(), lt_.data(), a_.doc_mask ? ld_.data() : nullptr, plan().Bl, plan().Tl,
                                                positions_.data());
        if (in_.px.world) {
            double sum = in_.model.last_loss_sum();
            const double t_sum = now_s();
            in_.px.sum(&sum, 1);  // the host waits for it (and for the slowest rank)
            host_wait_ms_ += 1e3 * (now_s() - t_sum);
            loss = counted > 0 ? (float)(sum / (double)counted) : 0.f;
            in_.model.all_reduce_grads(*in_.px.world);
        }
        return loss;
    }

    void skip_step(const StepResult& r) {
        bad_in_a_row_++;
        in_.metrics.row("%d,skipped,%.9g,%.6g,%.6g,,%.3f\n", step_, r.loss, r.lr, r.norm, now_s() - t_start_);
        if (say()) std::printf("step %5d/%d | loss %g, gradient norm %g: not finite, step skipped (%d in a row)\n", step_, a_.steps,
                               r.loss, r.norm, bad_in_a_row_);
        if (bad_in_a_row_ >= a_.max_bad_steps) {
            const std::string last = latest_checkpoint(a_.out);
            fatal("%d steps in a row had a non-finite loss or gradient (last: step %d): lower --lr (now %g) or raise --warmup, "
                  "then %s",
                  bad_in_a_row_, step_, a_.lr, last.empty() ? "start again (no checkpoint was written)" : ("resume from " + last).c_str());
        }
    }

    void log_step(const StepResult& r) {
        t_train_ += r.seconds, tokens_timed_ += (double)r.tokens, tokens_left_ -= r.tokens;
        // The rate since the last printed line, not over the run: a length curriculum slows from
        // stage to stage (dense 128K windows train many times slower per token than 2K ones),
        // and a run average would promise an ETA minutes too short.
        recent_s_ += r.seconds, recent_tokens_ += (double)r.tokens;
        comm_wait_s_ += 1e-3 * r.comm_wait_ms, steps_timed_++;
        const double tok_s = recent_tokens_ / std::max(recent_s_, 1e-9);
        if (r.skipped) return;
        // %.9g prints a float exactly, so a resumed run can be compared bit for bit.
        in_.metrics.row("%d,train,%.9g,%.6g,%.6g,%.1f,%.3f\n", step_, r.loss, r.lr, r.norm, r.tokens / r.seconds, now_s() - t_start_);
        if (say() && (step_ % a_.log_every == 0 || step_ == 1 || step_ == a_.steps)) {
            std::printf("step %5d/%d | loss %.6f | lr %.2e | norm %6.3f | %7.0f tok/s | ETA %s", step_, a_.steps, r.loss, r.lr, r.norm,
                        tok_s, fmt_duration((double)tokens_left_ / tok_s).c_str());
            if (a_.time_comm) std::printf(" | step %.1f ms, comm wait %.1f ms", 1e3 * r.seconds, r.comm_wait_ms);
            std::printf("\n");
            recent_s_ = 0, recent_tokens_ = 0;
        }
    }

    void validate_if_due() {
        if (!((a_.val_every && step_ % a_.val_every == 0) || step_ == a_.steps)) return;
        last_val_ = validation_loss(in_.model, *val_, plan().val_batches, in_.px, a_.doc_mask);
        if (say()) std::printf("step %5d/%d | val loss %.6f\n", step_, a_.steps, last_val_);
        in_.metrics.row("%d,val,%.9g,,,,%.3f\n", step_, last_val_, now_s() - t_start_);
    }

    // --stop-at and --time-limit end the run after this step, with a checkpoint; the ranks agree on
    // the clock's verdict.
    bool stop_requested() const {
        double out_of_time = a_.time_limit > 0 && now_s() - t_start_ > 60.0 * a_.time_limit;
        if (a_.time_limit > 0) in_.px.sum(&out_of_time, 1);
        return step_ < a_.steps && (step_ == a_.stop_at || out_of_time > 0);
    }

    void save(int at_step) {
        in_.model.gather_state();  // every rank: a split update's moments whole again
        if (in_.px.size > 1) {  // the ranks' weights must be the same bits: compare a checksum first
            std::vector<float> w(in_.model.num_params());
            in_.model.get_params(w.data());
            in_.px.check_same(fnv1a(w.data(), w.size() * sizeof(float)), "the weights at step " + std::to_string(at_step),
                              "the ranks diverged (a bug, or different hardware or libraries): resume from the last checkpoint");
        }
        if (say()) {
            refuse_non_finite_state(at_step);
            const LoaderState ls = in_.train.expected_corpus_state(at_step);
            TrainState st{at_step, updates_, ls.epoch, ls.cursor, a_.to_json(in_.device_used), in_.recipe};
            in_.metrics.sync();  // the rows up to at_step reach the disk before a checkpoint says they exist
            save_checkpoint(checkpoint_path(a_.out, at_step), in_.model, in_.corpus.tok.serialized_model(), &st);
            // Only once the new checkpoint is safely in place do the oldest ones go.
            const std::vector<std::string> all = list_checkpoints(a_.out);
            for (size_t i = 0; a_.keep_ckpts > 0 && i + a_.keep_ckpts < all.size(); i++) std::remove(all[i].c_str());
            std::printf("saved %s\n", checkpoint_path(a_.out, at_step).c_str());
        }
        in_.px.barrier();  // nobody runs ahead of a checkpoint that may yet fail
    }

    // No checkpoint holds values load_checkpoint refuses (NaN or Inf weights or moments, weights
    // beyond +-1e6): --resume or infer would find nothing usable after hours of training. The run
    // stops instead, keeping the checkpoints already written.
    void refuse_non_finite_state(int at_step) {
        std::vector<float> w(in_.model.num_params()), m(w.size()), v(w.size());
        in_.model.get_params(w.data());
        in_.model.get_opt_state(m.data(), v.data());
        const CheckpointValuesError bad = checkpoint_values_error(param_layout(in_.model.config()), w.data(), m.data(), v.data());
        if (!bad.what.empty()) {
            const std::string last = latest_checkpoint(a_.out);
            fatal("step %d: the %s, so no checkpoint was written (%s): lower --lr (now %g) or raise --warmup, then %s", at_step,
                  bad.what.c_str(), bad.where.c_str(), a_.lr, last.empty() ? "start again" : ("resume from " + last).c_str());
        }
    }

    LoopInputs in_;
    const TrainArgs& a_;
    int step_, updates_, stage_ = -1;
    // The stage in force: the global batch (every rank draws it), this rank's rows of it, their
    // positions, and the validation windows at its length.
    std::vector<int> in_ids_, tg_, ds_, li_, lt_, ld_, positions_;
    std::unique_ptr<DataLoader> val_;
    const AdamWConfig opt_;
    long long tokens_left_ = 0;  // for the ETA
    double t_start_ = 0, t_train_ = 0, tokens_timed_ = 0;  // time and tokens in steps (not validation): the run's tokens/s
    double recent_s_ = 0, recent_tokens_ = 0;              // the same since the last printed step: its tokens/s and the ETA
    double comm_wait_s_ = 0, host_wait_ms_ = 0;            // --time-comm: the run's waits, and this step's on the host
    int steps_timed_ = 0;                                  // steps this process ran (a resumed run starts past 0)
    int bad_in_a_row_ = 0;
    double last_val_ = NAN;
    int kill_at_step_ = -1;
};

// ---- Sample: text from the trained model, on one rank, whole.

// The default prompt: the first tokens of val.bin's first document (after its <s>), text of the
// corpus that training never saw, whatever the corpus is.
static std::vector<int> held_out_opening(const TokenShard& val) {
    const int kOpeningTokens = 12;
    if (val.n_docs() == 0) return {};
    const uint64_t begin = val.doc_starts[0] + 1;
    const uint64_t doc_end = val.n_docs() > 1 ? val.doc_starts[1] : val.n_tokens();
    const uint64_t end = std::min<uint64_t>(doc_end, begin + kOpeningTokens);
    return std::vector<int>(val.tokens.begin() + long(begin), val.tokens.begin() + long(end));
}

static void print_sample(ModelBackend& model, const Tokenizer& tok, const TokenShard& val, const TrainArgs& a, int window) {
    model.set_context_parallel(nullptr);
    const bool typed = !a.sample_prompt.empty();
    const std::vector<int> prompt = typed ? tok.encode(a.sample_prompt) : held_out_opening(val);
    std::vector<int> ids = prompt;
    ids.insert(ids.begin(), tok.bos_id());
    Sampler sampler(SamplerConfig{0.8f, 40, 0.95f, (uint64_t)a.seed});
    StreamDecoder stream(tok);
    std::printf("--- sample ---\n");
    if (typed) {  // printed as typed
        std::fputs(a.sample_prompt.c_str(), stdout);
        stream.prime(prompt);
    } else {
        for (int id : prompt) std::fputs(stream.push(id).c_str(), stdout);
    }
    auto print = [&](int id) {
        std::fputs(stream.push(id).c_str(), stdout);
        std::fflush(stdout);
    };
    if (model.config().pointer) {  // its mixture needs every earlier position's key: a KV cache keeps them
        std::unique_ptr<IncrementalModel> cache = make_kv_cache(model, 1, std::min(window, 4096));
        generate_cached(*cache, model.config().vocab_size, ids, 0, a.sample_tokens, sampler, tok.eos_id(), print, [] {});
    } else {
        generate(model, ids, a.sample_tokens, window, sampler, tok.eos_id(), print);
    }
    std::printf("%s\n--------------\n", stream.flush().c_str());
}

// ---- The program: parse, validate, then each rank loads, plans, runs and reports.

// One rank of the run (all of it when there is one): everything after the flags.
static int train_rank(const TrainArgs& a, const Flags& flags, const RunShape& shape, Device device, ParallelContext& px) {
    const char* device_used = device == Device::Cuda ? "cuda" : "cpu";
    const bool say = px.leader();
    if (a.shard_update && (px.size == 1 || px.cp_size > 1))
        fatal("--shard-update splits AdamW over data-parallel ranks at --cp 1, and this job has %d rank%s at --cp %d, where it "
              "does nothing: drop it", px.size, px.size == 1 ? "" : "s", px.cp_size);
    lock_existing_out(a, say);
    const Corpus corpus = load_corpus(a);
    GPTConfig cfg = config_from_flags(a, flags, corpus.tok.vocab_size());
    const std::vector<RecipeFile> files = run_files(a, shape);
    const std::string recipe = recipe_to_json(files);
    const ResumePoint resume = load_resume_point(a, flags, device_used, corpus.tok, files, say, &cfg);
    validate_config(cfg);  // the whole model: its attention patterns, or the checkpoint's under train's head dims
    std::vector<float> init_params = load_init_weights(a, cfg, corpus.tok, say);
    const AttnBackend attn = choose_attention(a, cfg, device);
    require_same_run_on_every_rank(a, cfg, device_used, px);
    const MixedShards mixed = read_mixed_shards(shape.mix, a, corpus.tok);
    BatchSource train(corpus.train, mixed.per_stage, shape.stages, (uint64_t)a.seed, corpus.tok.bos_id());
    if (a.resume) check_resume_state(resume.ck.state, a, train, resume.path);

    std::unique_ptr<ModelBackend> model = make_backend(device, cfg, attn, a.deterministic);
    model->set_context_parallel(px.cp);
    // Only without context parallelism: the ring's transfers run on a communicator of their own,
    // and two communicators' kernels at once can wait on each other across ranks. (Where the job
    // is one ring, the sums on the ring's own stream are slower: see notes/training.md, the ring's
    // gradient sum during the backward.)
    if (px.world && px.cp_size == 1 && a.grad_overlap) model->set_gradient_comm(px.world);
    if (px.world && px.cp_size == 1 && a.shard_update) model->set_update_comm(px.world);
    const std::vector<StagePlan> plans = plan_stages(train, a, shape.recompute, corpus.val, *model, px, device, say);
    int updates = 0;
    const int step = load_model_state(*model, cfg, a, std::move(init_params), resume, say, &updates);
    MetricsLog metrics = open_metrics(a, say, step);
    if (say) {
        report_model_and_data(a, cfg, *model, corpus, train, mixed);
        report_parallel(a, cfg, plans[0], px);
    }

    comm_wait_timer().enable(a.time_comm);  // this rank's thread (simulated ranks are threads)
    TrainLoop loop({a, device_used, recipe, px, *model, train, plans, corpus, metrics}, step, updates);
    const bool stopped = loop.run();
    metrics.close();
    if (stopped) {
        loop.report_stop();
        return 0;
    }
    loop.report_done();
    if (say && a.sample_tokens > 0) print_sample(*model, corpus.tok, corpus.val, a, loop.window());
    return 0;
}

static int main_body(int argc, char** argv) {
    TrainArgs a;
    Flags flags("train", "Train a GPT with rotary attention on a prepared corpus (make data).");
    add_flags(flags, a);
    const std::string retired = retired_layer_flag_error(argc, argv);
    if (!retired.empty()) fatal("%s", retired.c_str());
    flags.parse(argc, argv);
    // A file-size limit (ulimit -f) fails the write with EFBIG instead of killing train silently
    // (SIGXFSZ, exit 153): the metrics and checkpoint writers then stop the run in one line.
    std::signal(SIGXFSZ, SIG_IGN);
    const Device device = resolve_device(a.device);
    if (device == Device::Cuda) apply_gpu_defaults(a, flags);
    const RunShape shape = validate_args(a, device);
    if (flags.was_set("sample-prompt") && a.sample_tokens == 0)
        fatal("--sample-prompt has no effect with --sample-tokens 0 (no sample is printed): drop it, or give --sample-tokens");
    // --out is a run directory: never a file (a checkpoint given by mistake) or a prepared corpus,
    // and writable; checked before the corpus is read or a step run (core/output_path.h).
    check_run_directory(a.out, "--out");
    return run_parallel(device, a.cp, a.simulate_ranks, "build/train",
                        [&](ParallelContext& px) { return train_rank(a, flags, shape, device, px); });
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
