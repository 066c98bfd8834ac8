// Incremental inference with a KV cache on the CPU: the model runs on the next n tokens of a
// sequence (a prompt's chunk in prefill, one token in decoding) at their global positions, each
// layer's queries attending the keys and values its cache keeps from before plus the chunk's own
// (layers/attention.h's two-sided attention, the pattern's mask deciding which pairs count).
// What a layer keeps is what a later query can attend (kv_first_needed): every row for a dense
// or block-sparse layer; for a dilated layer only the rows of the current segment of its longest
// branch, so its cache never holds more than that segment plus one chunk, however long the
// sequence. The result equals a full forward over the whole sequence (tests/test_model_cpu.cpp).
#pragma once
#include <algorithm>
#include <cstring>
#include <vector>
#include "model/gpt.h"

// The smallest key position that a query at position >= next_pos can attend under p (causal).
// Dilated: a query's keys lie in its own segment of each branch, and segments are aligned to
// multiples of their length, so none reaches before the longest branch's current segment.
inline long long kv_first_needed(const AttnPattern& p, long long next_pos) {
    if (p.kind != AttnKind::Dilated) return 0;
    const long long w = *std::max_element(p.segments.begin(), p.segments.end());
    return next_pos / w * w;
}

// Rows a layer's cache holds at most with chunks of up to `chunk` tokens (-1: unbounded).
inline long long kv_rows_bound(const AttnPattern& p, int chunk) {
    if (p.kind != AttnKind::Dilated) return -1;
    return *std::max_element(p.segments.begin(), p.segments.end()) + chunk;
}

// What generation and scoring need from a cached model, whatever runs it (the CPU's KVCache
// below, the GPU's KVCacheCuda in model/kv_cache_cuda.cuh).
class IncrementalModel {
   public:
    virtual ~IncrementalModel() = default;
    // Runs tokens (B, n), the next n of each sequence (n <= max_chunk()).
    virtual void append(const int* tokens, int n) = 0;
    virtual void logits(float* out, int b, int i) = 0;        // (V) of row i of the last chunk
    virtual void losses(float* out, const int* targets) = 0;  // (B, n) of the last chunk; targets < 0: 0
    virtual long long position() const = 0;                   // tokens seen per sequence
    virtual size_t bytes() const = 0;                         // the cache's memory now
    virtual int max_chunk() const = 0;
    // The state as host floats, for a cache file (model/kv_cache_file.h): each layer's K/V rows
    // (B, rows, 2, H, D) ending at position(), and the final hidden state of each sequence's last
    // token (B, C), from which its logits come. import_state puts such a state in a fresh cache.
    struct State {
        long long position = 0;
        std::vector<long long> rows;
        std::vector<std::vector<float>> kv;
        std::vector<float> last_hidden;
    };
    virtual State export_state() = 0;
    virtual void import_state(const State& s) = 0;
};

// Bytes the caches of a model hold at `len` tokens of B sequences, elem bytes per value: what
// infer prints before a long prefill.
inline double kv_cache_bytes(const GPTConfig& cfg, long long len, int B, int chunk, size_t elem) {
    double total = 0;
    for (int l = 0; l < cfg.n_layer; l++) {
        const long long bound = kv_rows_bound(cfg.attn(l), chunk);
        total += (double)(bound < 0 ? len : std::min(bound, len)) * 2 * cfg.n_embd * elem * B;
    }
    return total;
}

template <typename T>
class KVCache {
   public:
    // B sequences decoded together, chunks of up to max_chunk tokens.
    KVCache(const GPT<T>& model, int B, int max_chunk) : m_(model), B_(B), max_chunk_(max_chunk), layers_(model.cfg.n_layer) {
        for (int l = 0; l < model.cfg.n_layer; l++)
            if (!model.cfg.attn(l).causal) fatal("a KV cache needs causal attention (layer %d is not causal)", l);
        if (B < 1 || max_chunk < 1) fatal("KVCache: B %d and max_chunk %d must be >= 1", B, max_chunk);
    }

    int max_chunk() const { return max_chunk_; }
    long long position() const { return next_pos_; }  // tokens seen so far per sequence
    long long rows(int layer) const { return layers_[layer].rows; }
    size_t bytes() const {
        size_t n = 0;
        for (const Layer& c : layers_) n += c.kv.size() * sizeof(T);
        return n;
    }

    // Runs tokens (B, n), the next n of each sequence; lnf() then holds their final hidden states.
    void append(const int* tokens, int n) {
        if (n < 1 || n > max_chunk_) fatal("KVCache::append: %d tokens, the chunk is 1..%d", n, max_chunk_);
        const GPTConfig& cfg = m_.cfg;
        const int C = cfg.n_embd, H = cfg.n_head, D = cfg.head_dim(), BN = B_ * n;
        check_token_ids(tokens, nullptr, B_, n, cfg.vocab_size);
        n_ = n;
        std::vector<int> pos(n);
        for (int i = 0; i < n; i++) pos[i] = (int)(next_pos_ + i);
        x_.assign((size_t)BN * C, 0), ln_.assign((size_t)BN * C, 0), mean_.assign(BN, 0), rstd_.assign(BN, 0);
        qkv_pre_.assign((size_t)BN * 3 * C, 0), qkv_.assign((size_t)BN * 3 * C, 0), atty_.assign((size_t)BN * C, 0);
        lse_.assign((size_t)BN * H, 0), tmp_.assign((size_t)BN * C, 0), fch_.assign((size_t)BN * 4 * C, 0);
        fch_gelu_.assign((size_t)BN * 4 * C, 0), lnf_.assign((size_t)BN * C, 0);
        encoder_forward(x_.data(), tokens, m_.p.wte, B_, n, C);
        const T scale = T(1) / std::sqrt((T)D);
        for (int l = 0; l < cfg.n_layer; l++) {
            const BlockParams<T>& w = m_.p.blocks[l];
            layernorm_forward(ln_.data(), mean_.data(), rstd_.data(), x_.data(), w.ln1w, w.ln1b, BN, C);
            matmul_forward(qkv_pre_.data(), ln_.data(), w.qkvw, w.qkvb, BN, C, 3 * C);
            rope_forward(qkv_.data(), qkv_pre_.data(), pos.data(), B_, n, H, D, cfg.rope_theta);  // (B, n, 3, H, D)
            Layer& c = layers_[l];
            keep_and_append(c, cfg.attn(l), n);
            // The sequence so far: a segment longer than it is cut to it, as a full forward over it would.
            const AttnDims dm{1, H, D, (int)(next_pos_ + n)};
            for (int b = 0; b < B_; b++) {           // one sequence at a time: its cache rows are contiguous
                const T* q = qkv_.data() + (size_t)b * n * 3 * C;
                const T* kv = c.kv.data() + (size_t)b * c.cap * 2 * C;
                const AttnQueries<T> qs{q, 3 * C, n, pos.data(), nullptr, pos[0]};
                const AttnKeys<T> ks{kv, kv + C, 2 * C, (int)c.rows, c.pos.data(), (int)c.lo};
                attention_forward(atty_.data() + (size_t)b * n * C, lse_.data() + (size_t)b * H * n, qs, ks, cfg.attn(l), dm,
                                  scale);  // (n, H, D)
            }
            matmul_forward(tmp_.data(), atty_.data(), w.projw, w.projb, BN, C, C);
            residual_forward(x_.data(), x_.data(), tmp_.data(), (size_t)BN * C);
            layernorm_forward(ln_.data(), mean_.data(), rstd_.data(), x_.data(), w.ln2w, w.ln2b, BN, C);
            matmul_forward(fch_.data(), ln_.data(), w.fcw, w.fcb, BN, C, 4 * C);
            gelu_forward(fch_gelu_.data(), fch_.data(), (size_t)BN * 4 * C);
            matmul_forward(tmp_.data(), fch_gelu_.data(), w.fcprojw, w.fcprojb, BN, 4 * C, C);
            residual_forward(x_.data(), x_.data(), tmp_.data(), (size_t)BN * C);
        }
        layernorm_forward(lnf_.data(), mean_.data(), rstd_.data(), x_.data(), m_.p.lnfw, m_.p.lnfb, BN, C);
        next_pos_ += n;
    }

    // Logits (V) of row i of the last chunk of sequence b.
    void logits(T* out, int b, int i) const {
        const int C = m_.cfg.n_embd;
        matmul_forward(out, lnf_.data() + ((size_t)b * n_ + i) * C, m_.p.wte, (const T*)nullptr, 1, C, m_.cfg.vocab_size);
    }
    // Cross-entropy losses (B, n) of the last chunk against targets (B, n) (< 0: ignored, 0).
    void losses(T* out, const int* targets) const {
        classifier_forward_backward(out, (T*)nullptr, (T*)nullptr, lnf_.data(), m_.p.wte, targets, B_ * n_, m_.cfg.n_embd,
                                    m_.cfg.vocab_size, T(0));
    }

    IncrementalModel::State export_state() const {
        const int C = m_.cfg.n_embd;
        IncrementalModel::State st;
        st.position = next_pos_;
        for (const Layer& c : layers_) {
            st.rows.push_back(c.rows);
            std::vector<float> kv((size_t)B_ * c.rows * 2 * C);
            for (int b = 0; b < B_; b++)
                for (size_t i = 0; i < (size_t)c.rows * 2 * C; i++) kv[(size_t)b * c.rows * 2 * C + i] = (float)c.kv[(size_t)b * c.cap * 2 * C + i];
            st.kv.push_back(std::move(kv));
        }
        st.last_hidden.assign((size_t)B_ * C, 0.0f);
        for (int b = 0; b < B_ && n_ > 0; b++)
            for (int i = 0; i < C; i++) st.last_hidden[(size_t)b * C + i] = (float)lnf_[((size_t)b * n_ + n_ - 1) * C + i];
        return st;
    }
    void import_state(const IncrementalModel::State& st) {
        next_pos_ = st.position, n_ = 1;
        for (size_t l = 0; l < layers_.size(); l++) {
            Layer& c = layers_[l];
            c.rows = c.cap = st.rows[l], c.lo = st.position - st.rows[l];
            c.kv.assign(st.kv[l].begin(), st.kv[l].end());
            c.pos.resize(c.rows);
            for (long long j = 0; j < c.rows; j++) c.pos[j] = (int)(c.lo + j);
        }
        lnf_.assign(st.last_hidden.begin(), st.last_hidden.end());
    }

   private:
    // One layer's cache: K and V rows (B, cap, 2, H, D) at positions lo .. lo + rows - 1.
    struct Layer {
        std::vector<T> kv;
        std::vector<int> pos;
        long long lo = 0, rows = 0, cap = 0;
    };
    const GPT<T>& m_;
    int B_, max_chunk_, n_ = 0;
    long long next_pos_ = 0;
    std::vector<Layer> layers_;
    std::vector<T> x_, ln_, mean_, rstd_, qkv_pre_, qkv_, atty_, lse_, tmp_, fch_, fch_gelu_, lnf_;

    // Drops the rows no query from next_pos_ on can attend, then appends the chunk's K and V.
    void keep_and_append(Layer& c, const AttnPattern& p, int n) {
        const int C = m_.cfg.n_embd;
        const long long lo = std::max(c.lo, std::min(kv_first_needed(p, next_pos_), c.lo + c.rows));
        const long long drop = lo - c.lo, keep = c.rows - drop;
        if (keep + n > c.cap) {  // grow: doubling, so a dense cache reallocates rarely
            const long long cap = std::max(keep + n, 2 * c.cap);
            std::vector<T> kv((size_t)B_ * cap * 2 * C);
            for (int b = 0; b < B_; b++)
                std::memcpy(kv.data() + (size_t)b * cap * 2 * C, c.kv.data() + ((size_t)b * c.cap + drop) * 2 * C,
                            (size_t)keep * 2 * C * sizeof(T));
            c.kv.swap(kv), c.cap = cap;
        } else if (drop > 0) {
            for (int b = 0; b < B_; b++) {
                T* row0 = c.kv.data() + (size_t)b * c.cap * 2 * C;
                std::memmove(row0, row0 + (size_t)drop * 2 * C, (size_t)keep * 2 * C * sizeof(T));
            }
        }
        for (int b = 0; b < B_; b++)
            for (int i = 0; i < n; i++) {
                const T* src = qkv_.data() + ((size_t)b * n + i) * 3 * C;  // k then v, after q
                std::memcpy(c.kv.data() + ((size_t)b * c.cap + keep + i) * 2 * C, src + C, (size_t)2 * C * sizeof(T));
            }
        c.lo = lo, c.rows = keep + n;
        c.pos.resize(c.rows);
        for (long long j = 0; j < c.rows; j++) c.pos[j] = (int)(c.lo + j);
    }
};

// The CPU's cached model behind the interface.
class CpuIncremental : public IncrementalModel {
   public:
    CpuIncremental(const GPT<float>& model, int B, int max_chunk) : c_(model, B, max_chunk) {}
    void append(const int* tokens, int n) override { c_.append(tokens, n); }
    void logits(float* out, int b, int i) override { c_.logits(out, b, i); }
    void losses(float* out, const int* targets) override { c_.losses(out, targets); }
    long long position() const override { return c_.position(); }
    size_t bytes() const override { return c_.bytes(); }
    int max_chunk() const override { return c_.max_chunk(); }
    State export_state() override { return c_.export_state(); }
    void import_state(const State& s) override { c_.import_state(s); }

   private:
    KVCache<float> c_;
};
