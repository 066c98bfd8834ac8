// The attention pattern of a layer, and the one plain function that says which keys a query
// attends. Every implementation (CPU reference, CUDA kernels, ring over GPUs) computes
//   O(p) = sum_k m(p,k) exp(s q_p.k_k - L(p)) v_k,   L(p) = log sum_k m(p,k) exp(s q_p.k_k)
// where m(p,k) = key_multiplicity(...) counts how often key k is in the multiset of keys of
// query p (see ../shared/attention-spec.md). Positions are GLOBAL sequence positions, so the
// same function stays right once a sequence is split across GPUs.
// Later patterns (dilated, block-sparse) are new enum values and new cases here.
#pragma once
#include <string>

enum class AttnKind { Dense };

struct AttnPattern {
    AttnKind kind = AttnKind::Dense;
    bool causal = true;
};

inline const char* attn_kind_name(AttnKind kind) {
    switch (kind) {
        case AttnKind::Dense: return "dense";
    }
    return "?";
}

// How many times the query at global position qpos counts the key at global position kpos
// (0: masked out), for a head `head` of a sequence of `seq_len` tokens.
inline int key_multiplicity(const AttnPattern& pattern, int head, int qpos, int kpos, int seq_len) {
    (void)head;
    (void)seq_len;
    switch (pattern.kind) {
        case AttnKind::Dense: return (!pattern.causal || kpos <= qpos) ? 1 : 0;
    }
    return 0;
}
