// The attention pattern of a layer, and the one plain function that says which keys a query
// attends. Every implementation (CPU reference, CUDA kernels, ring over GPUs) computes
//   O(p) = sum_k m(p,k) exp(s q_p.k_k - L(p)) v_k,   L(p) = log sum_k m(p,k) exp(s q_p.k_k)
// where m(p,k) = key_multiplicity(...) counts how often key k is in the multiset of keys of
// query p (see ../shared/attention-spec.md). Positions are GLOBAL sequence positions, so the
// same function stays right once a sequence is split across GPUs.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

enum class AttnKind { Dense, Dilated };

struct AttnPattern {
    AttnKind kind = AttnKind::Dense;
    bool causal = true;
    // Dilated (LongNet): branch i has segment length segments[i] and dilation dilations[i].
    std::vector<int> segments, dilations;
};

inline const char* attn_kind_name(AttnKind kind) {
    switch (kind) {
        case AttnKind::Dense: return "dense";
        case AttnKind::Dilated: return "dilated";
    }
    return "?";
}

// The offset class that head `head` keeps in a branch of dilation r.
inline int dilated_class(int head, int r) { return head % r; }

// How many times the query at global position qpos counts the key at global position kpos
// (0: masked out), for head `head` of a sequence of `seq_len` tokens.
inline int key_multiplicity(const AttnPattern& pattern, int head, int qpos, int kpos, int seq_len) {
    if (pattern.causal && kpos > qpos) return 0;
    switch (pattern.kind) {
        case AttnKind::Dense: return 1;
        case AttnKind::Dilated: {
            // One count per branch whose kept set holds both: the same segment (of the effective
            // length min(w, N)) and, inside it, both offsets in the head's class mod r.
            int m = 0;
            for (size_t i = 0; i < pattern.segments.size(); i++) {
                const int w = std::min(pattern.segments[i], seq_len), r = pattern.dilations[i];
                const int seg = qpos / w, start = seg * w, cls = dilated_class(head, r);
                if (kpos / w == seg && (qpos - start) % r == cls && (kpos - start) % r == cls) m++;
            }
            return m;
        }
    }
    return 0;
}

// "" when the pattern is well formed, else what is wrong with it (in terms of the flags).
inline std::string pattern_error(const AttnPattern& p) {
    if (p.kind == AttnKind::Dense) return "";
    if (p.segments.empty()) return "--segments is empty: give at least one segment length";
    if (p.segments.size() != p.dilations.size())
        return "--segments has " + std::to_string(p.segments.size()) + " entries but --dilations has " +
               std::to_string(p.dilations.size()) + ": give one dilation per segment";
    for (size_t i = 0; i < p.segments.size(); i++) {
        const int w = p.segments[i], r = p.dilations[i];
        if (w < 1 || r < 1) return "segment " + std::to_string(w) + " and dilation " + std::to_string(r) + " must be positive";
        if (r > w) return "dilation " + std::to_string(r) + " exceeds its segment " + std::to_string(w) + ": need r <= w";
    }
    return "";
}

// Query-key pairs the pattern keeps (a key counted as often as its multiplicity), summed over H
// heads of one sequence of N tokens: the FLOP count is 4 * D * pairs forward, 3.5x that for
// forward + backward (../shared/attention-spec.md).
inline double pairs_kept(const AttnPattern& p, int N, int H) {
    auto pairs = [&](double n) { return p.causal ? n * (n + 1) / 2 : n * n; };
    if (p.kind == AttnKind::Dense) return H * pairs(N);
    double total = 0;
    for (size_t i = 0; i < p.segments.size(); i++) {
        const int w = std::min(p.segments[i], N), r = p.dilations[i];
        for (long long start = 0; start < N; start += w) {  // 64-bit: start + w may pass INT_MAX
            const int len = (int)std::min<long long>(w, N - start);
            for (int h = 0; h < H; h++) {
                const int cls = dilated_class(h, r);
                total += pairs(cls < len ? (len - 1 - cls) / r + 1 : 0);
            }
        }
    }
    return total;
}
