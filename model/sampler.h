// Picking the next token from logits: temperature, top-k, top-p (nucleus), from a seeded
// generator of our own so a seed gives the same text on every machine.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>
#include "core/rng.h"

struct SamplerConfig {
    float temperature = 0.8f;  // 0: greedy
    int top_k = 40;            // 0: off
    float top_p = 0.95f;       // 1: off
    uint64_t seed = 1;
};

class Sampler {
   public:
    explicit Sampler(const SamplerConfig& c) : cfg_(c), rng_(c.seed * 0x9E3779B97F4A7C15ull + 7) {}

    int sample(const float* logits, int V) {
        if (cfg_.temperature <= 0) return (int)(std::max_element(logits, logits + V) - logits);
        std::vector<int> idx(V);
        std::iota(idx.begin(), idx.end(), 0);
        // Highest logits first; ties broken by id so the order is the same everywhere.
        auto higher = [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
        int keep = (cfg_.top_k > 0 && cfg_.top_k < V) ? cfg_.top_k : V;
        std::partial_sort(idx.begin(), idx.begin() + keep, idx.end(), higher);
        idx.resize(keep);
        std::vector<double> prob(keep);
        double sum = 0;
        for (int i = 0; i < keep; i++) sum += prob[i] = std::exp((logits[idx[i]] - logits[idx[0]]) / cfg_.temperature);
        // Nucleus: the smallest prefix whose probability reaches top_p.
        double cum = 0;
        int n = keep;
        for (int i = 0; i < keep; i++) {
            cum += prob[i] / sum;
            if (cum >= cfg_.top_p) {
                n = i + 1;
                break;
            }
        }
        double total = 0;
        for (int i = 0; i < n; i++) total += prob[i];
        double r = uniform() * total;
        for (int i = 0; i < n; i++) {
            r -= prob[i];
            if (r <= 0) return idx[i];
        }
        return idx[n - 1];
    }

   private:
    SamplerConfig cfg_;
    SplitMix64 rng_;
    double uniform() { return (rng_.next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
};
