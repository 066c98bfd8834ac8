// The memory planner: from a backend's memory model (ModelBackend::memory_needs: the same
// function that lays out its activations, so the plan is the allocation) and the memory it has,
// it predicts the peak of a training step of (B, T) under each recompute policy
// (model/recompute.h), picks the fastest that fits, and says what would fit when none does.
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>
#include "model/backend.h"

struct PolicyPlan {
    Recompute policy;
    MemoryNeeds needs;
    bool fits;
    long long max_T, max_B;  // the longest window at this batch, the largest batch at this window (0: none)
};

struct MemoryPlan {
    std::vector<PolicyPlan> rows;  // kRecomputePolicies' order
    size_t available;              // bytes activations and extras may take
    int B, T;
    bool chosen_fits;
    Recompute chosen;
};

// "1.25 GiB", "3.4 MiB" or "12 KiB": plans span tiny CPU tests and GPUs.
inline std::string format_bytes(double b) {
    char buf[32];
    if (b >= 1073741824.0) snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
    else if (b >= 1048576.0) snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
    else snprintf(buf, sizeof buf, "%.0f KiB", b / 1024.0);
    return buf;
}

inline bool plan_fits(const MemoryNeeds& n, size_t available) { return n.activations + n.extra <= available; }

// B, T: this rank's part of a step. t_multiple: what the window must be a multiple of (the
// largest-T search stays on it). requested: the policy asked for; with is_auto the fastest that
// fits is chosen (none, selective, full), else `requested` whether it fits or not. cap > 0: plan
// within that many bytes for activations and extras even when more is free.
inline MemoryPlan plan_memory(const ModelBackend& m, int B, int T, int t_multiple, bool is_auto, Recompute requested,
                              size_t cap = 0) {
    MemoryPlan plan;
    plan.available = m.memory_available();
    if (cap > 0) plan.available = std::min(plan.available, cap);
    plan.B = B, plan.T = T;
    const long long step = std::max(1, t_multiple);
    for (Recompute r : kRecomputePolicies) {
        PolicyPlan row{r, m.memory_needs(B, T, r), false, 0, 0};
        row.fits = plan_fits(row.needs, plan.available);
        // The needs grow with T and B: bisect on the multiples of `step` and on B.
        auto fits_at = [&](long long b, long long t) { return plan_fits(m.memory_needs((int)b, (int)t, r), plan.available); };
        long long lo = 0, hi = kMaxSeqLen / step / std::max(1, B) + 1;  // in units of step
        while (hi - lo > 1) {
            const long long mid = (lo + hi) / 2;
            (fits_at(B, mid * step) ? lo : hi) = mid;
        }
        row.max_T = lo * step;
        lo = 0, hi = kMaxSeqLen / std::max(1, T) + 1;
        while (hi - lo > 1) {
            const long long mid = (lo + hi) / 2;
            (fits_at(mid, T) ? lo : hi) = mid;
        }
        row.max_B = lo;
        plan.rows.push_back(row);
    }
    plan.chosen = requested;
    if (is_auto) {
        plan.chosen = Recompute::Full;
        for (const PolicyPlan& row : plan.rows)
            if (row.fits) {
                plan.chosen = row.policy;
                break;
            }
    }
    plan.chosen_fits = plan.rows[(int)plan.chosen].fits;
    return plan;
}

inline std::string format_plan(const MemoryPlan& plan, const char* memory) {
    std::string out;
    char line[320];
    snprintf(line, sizeof line, "memory plan for B = %d x T = %d on this rank, %s of %s memory available:\n", plan.B, plan.T,
             format_bytes((double)plan.available).c_str(), memory);
    out += line;
    out += "  policy     KiB/token/layer  activations    peak           fits  longest T at this B  largest B at this T\n";
    for (const PolicyPlan& r : plan.rows) {
        snprintf(line, sizeof line, "  %-10s %15.2f  %-13s  %-13s  %-4s  %19lld  %19lld%s\n", recompute_name(r.policy),
                 r.needs.per_token_per_layer / 1024.0, format_bytes((double)r.needs.activations).c_str(),
                 format_bytes((double)r.needs.peak()).c_str(), r.fits ? "yes" : "no", r.max_T, r.max_B,
                 r.policy == plan.chosen ? "  <- chosen" : "");
        out += line;
    }
    return out;
}
