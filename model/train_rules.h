// One rule per value: each numeric training flag has one validator here, called by
// train's flag check (validate_args) and by the checkpoint reader (load_checkpoint, which infer
// and train --resume share) on the values a checkpoint records in its "train_args". A checkpoint
// edited to --lr -1 is then refused by infer in the same words train refuses the flag in. The
// model's own fields (--layers, --width, --heads, --vocab, --rope-theta, --nope-layers,
// --logn-attn, each layer's pattern) share validate_config (model/gpt_config.h) the same way;
// --seq-len, --batch and --schedule share parse_schedule (core/train_stages.h); the optimizer's
// flags have their rules in its room: --lr, --min-lr-frac, --warmup in optim/schedule.h,
// --grad-clip in optim/clip.h, --weight-decay, --beta1, --beta2, --adam-eps in optim/adamw.h.
// Each *_error returns "" when the value is allowed, else the message (naming the flag).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include "core/error.h"
#include "core/json.h"
#include "core/train_stages.h"
#include "model/gpt_config.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/schedule.h"

inline std::string rule_text(const char* fmt, double v) {
    char buf[200];
    snprintf(buf, sizeof buf, fmt, v);
    return buf;
}

inline std::string steps_error(long long steps) {
    return steps >= 1 ? "" : rule_text("--steps must be at least 1 (got %.0f)", (double)steps);
}
inline std::string val_every_error(long long every) {
    return every >= 0 ? "" : rule_text("--val-every must be >= 0 (got %.0f)", (double)every);
}
inline std::string val_batches_error(long long n) {
    return n >= 1 ? "" : rule_text("--val-batches must be at least 1 (got %.0f)", (double)n);
}
// --seq-len and --batch: parse_schedule's rule for the first stage.
inline std::string seq_len_batch_error(long long seq_len, long long batch) {
    if (seq_len < 0 || seq_len > INT32_MAX || batch < 0 || batch > INT32_MAX)
        return rule_text("--batch and --seq-len must each be at most 2147483647 (got %.0f)", (double)(seq_len < 0 || seq_len > INT32_MAX ? seq_len : batch));
    try {
        parse_schedule("", {0, (int)seq_len, (int)batch}, 1, kMaxSeqLen);
    } catch (const FatalError& e) {
        return e.what();
    }
    return "";
}

// The values a checkpoint's train_args record, each held to its flag's rule above: "" when all
// pass, else "<key> <value>: <the flag's message>". Keys absent (older checkpoints) are skipped;
// a value of the wrong type throws JsonError naming its key.
inline std::string recorded_train_args_error(const Json& args) {
    auto integer = [&](const char* key) { return args.at(key).as_int(key, -(1LL << 53), 1LL << 53); };
    auto number = [&](const char* key) {
        if (args.at(key).kind != Json::Number) throw JsonError(std::string(key) + " is not a number");
        return args.at(key).num;
    };
    // A float of a recorded value: past float's range it is an infinity (a plain cast would be
    // undefined), which every rule refuses.
    auto as_float = [](double v) { return v > 3.4e38 ? HUGE_VALF : v < -3.4e38 ? -HUGE_VALF : (float)v; };
    auto say = [](const char* key, const std::string& why) { return why.empty() ? why : std::string(key) + ": " + why; };
    std::string e;
    if (e.empty() && args.has("steps")) e = say("steps", steps_error(integer("steps")));
    if (e.empty() && args.has("seq_len") && args.has("batch"))
        e = say("seq_len and batch", seq_len_batch_error(integer("seq_len"), integer("batch")));
    if (e.empty() && args.has("lr")) e = say("lr", lr_error(number("lr")));
    if (e.empty() && args.has("min_lr_frac")) e = say("min_lr_frac", min_lr_frac_error(number("min_lr_frac")));
    if (e.empty() && args.has("weight_decay"))
        e = say("weight_decay", weight_decay_error(as_float(number("weight_decay")), args.has("lr") ? as_float(number("lr")) : 0.0f));
    if (e.empty() && args.has("beta1")) e = say("beta1", beta_error("--beta1", as_float(number("beta1"))));
    if (e.empty() && args.has("beta2")) e = say("beta2", beta_error("--beta2", as_float(number("beta2"))));
    if (e.empty() && args.has("adam_eps")) e = say("adam_eps", adam_eps_error(as_float(number("adam_eps"))));
    if (e.empty() && args.has("grad_clip")) e = say("grad_clip", grad_clip_error(number("grad_clip")));
    if (e.empty() && args.has("warmup")) e = say("warmup", warmup_error(integer("warmup")));
    if (e.empty() && args.has("val_every")) e = say("val_every", val_every_error(integer("val_every")));
    if (e.empty() && args.has("val_batches")) e = say("val_batches", val_batches_error(integer("val_batches")));
    return e;
}
