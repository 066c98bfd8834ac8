// The learning rate of each step: linear warmup to the peak, then cosine decay to a floor at the
// run's last step; and the rules of its flags (--lr, --min-lr-frac, --warmup), shared by train's
// flag check and a checkpoint's recorded run (model/train_rules.h). Each *_error returns "" when
// the value is allowed, else the message naming the flag.
#pragma once
#include <cmath>
#include <cstdio>
#include <string>

// Linear warmup to max_lr over warmup steps, then cosine decay to min_lr at total steps.
inline float lr_at(int step, int warmup, int total, float max_lr, float min_lr) {
    if (step < warmup) return max_lr * (step + 1) / warmup;
    if (total <= warmup) return max_lr;
    double progress = (double)(step - warmup) / (total - warmup);
    if (progress > 1) progress = 1;
    return (float)(min_lr + 0.5 * (max_lr - min_lr) * (1 + std::cos(3.141592653589793 * progress)));
}

inline std::string schedule_rule_text(const char* fmt, double v) {
    char buf[200];
    snprintf(buf, sizeof buf, fmt, v);
    return buf;
}
// An AdamW step moves each weight by about lr: above 1 a step or two leaves weights that give no
// finite loss, and a checkpoint nothing can use.
inline std::string lr_error(double lr) {
    return lr > 0 && lr <= 1 ? "" : schedule_rule_text("--lr must be in (0, 1] (got %g)", lr);
}
inline std::string min_lr_frac_error(double f) {
    return f >= 0 && f <= 1 ? "" : schedule_rule_text("--min-lr-frac must be in [0, 1] (got %g)", f);
}
inline std::string warmup_error(long long warmup) {
    return warmup >= 0 ? "" : schedule_rule_text("--warmup must be >= 0 (got %.0f)", (double)warmup);
}
