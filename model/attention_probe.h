// The attention probe: the weight each head of each layer gives chosen keys, read from a cached
// model as it reads a sequence. For a query row i and a key at position j the weight is
//   w = m * exp(scale * q_i . k_j - L_i)
// with q_i the query after rotation and log-n scaling, k_j the key as the cache keeps it, L_i the
// attention's log-sum-exp of that row and m the pattern's multiplicity of the pair (0 where the
// mask hides the key). The weights of all keys of a row sum to 1 (with attention sinks, to 1 less
// the sink's share: L_i is then the sink's, layers/attn_sink.h), so a probe needs no second
// attention pass: a few dot products per pair. Measured only in layers that keep every row
// (dense, block-sparse, fixed); a dilated layer's rows are packed by branch and stay NaN.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>
#include <vector>
#include "layers/attention.h"

struct ProbePair {
    long long query, key;  // positions in the sequence the cache reads (key <= query)
};

struct AttnProbe {
    std::vector<ProbePair> pairs;
    // (pairs, n_layer, H) after the sequence is read; NaN where not measured (a dilated layer, or a
    // pair whose query has not been read).
    std::vector<float> weights;
    int n_layer = 0, n_head = 0;

    void reset(std::vector<ProbePair> p, int layers, int heads) {
        pairs = std::move(p), n_layer = layers, n_head = heads;
        weights.assign(pairs.size() * layers * heads, std::nanf(""));
    }
    float at(size_t pair, int layer, int head) const { return weights[(pair * n_layer + layer) * n_head + head]; }
};

// One layer's weights for the pairs whose query lies in the chunk just read (positions first ..
// first + n - 1). q: the chunk's queries from row q_row0 on, row i at q + (i - q_row0) * q_stride
// (head h at h * D); key_row(j): the key row (C values) of position j; lse: (H, n) of the chunk
// (sequence 0 of the cache). A row without keys (L = -inf) weighs nothing; a NaN stays NaN.
template <typename T>
void probe_chunk_layer(AttnProbe& probe, int layer, long long first, int n, const T* q, int q_stride, int q_row0,
                       const std::function<const T*(long long)>& key_row, const T* lse, const AttnPattern& pat,
                       int H, int D, float scale, int seq_len) {
    for (size_t p = 0; p < probe.pairs.size(); p++) {
        const ProbePair pr = probe.pairs[p];
        if (pr.query < first || pr.query >= first + n || pr.key < 0 || pr.key > pr.query) continue;
        const int i = (int)(pr.query - first);
        const T* qi = q + (size_t)(i - q_row0) * q_stride;
        const T* k = key_row(pr.key);
        for (int h = 0; h < H; h++) {
            const int m = key_multiplicity(pat, h, (int)pr.query, (int)pr.key, seq_len);
            const double L = (double)lse[(size_t)h * n + i];
            float w = 0;
            if (m && L != -INFINITY) {
                double dot = 0;
                for (int d = 0; d < D; d++) dot += (double)qi[h * D + d] * (double)k[h * D + d];
                w = m * (float)std::exp(scale * dot - L);
            }
            probe.weights[(p * probe.n_layer + layer) * probe.n_head + h] = w;
        }
    }
}

// The chunk's rows that hold a probed query: [lo, hi] of 0 .. n - 1, or lo > hi when none does.
inline std::pair<int, int> probe_rows(const AttnProbe* probe, long long first, int n) {
    int lo = n, hi = -1;
    if (probe)
        for (const ProbePair& pr : probe->pairs)
            if (pr.query >= first && pr.query < first + n) {
                const int i = (int)(pr.query - first);
                lo = std::min(lo, i), hi = std::max(hi, i);
            }
    return {lo, hi};
}

// The shortest chunk perplexity_cached may read with a probe: it then never reads one token alone
// (a cache's one-token step may decode without the probe).
constexpr int kProbeMinChunk = 3;

