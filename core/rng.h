// A tiny deterministic PRNG and shuffle. std::shuffle and the std distributions are
// implementation-defined, so the same seed would give different batch orders with different
// standard libraries; these give bit-identical results everywhere, which exact resume and
// cross-machine reproducibility depend on.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

// SplitMix64 (Steele, Lea, Flood 2014): one 64-bit state, full period, good enough mixing for
// shuffling data; also used to derive independent seeds from (seed, epoch).
struct SplitMix64 {
    uint64_t state;
    explicit SplitMix64(uint64_t seed) : state(seed) {}
    uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    // Uniform in [0, n), n > 0. Rejection sampling removes the modulo bias that a plain
    // `next() % n` has when n does not divide 2^64.
    uint64_t below(uint64_t n) {
        const uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // multiple of n
        uint64_t r;
        do r = next(); while (r >= limit);
        return r % n;
    }
};

// Fisher-Yates: every permutation equally likely given a uniform `below`.
template <typename T>
void fisher_yates(std::vector<T>& v, SplitMix64& rng) {
    for (size_t i = v.size(); i > 1; i--) {
        const size_t j = size_t(rng.below(i));
        std::swap(v[i - 1], v[j]);
    }
}
