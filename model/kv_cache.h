// Incremental inference with a KV cache on the CPU: the model runs on the next n tokens of a
// sequence (a prompt's chunk in prefill, one token in decoding) at their global positions, each
// layer's queries attending the keys and values its cache keeps from before plus the chunk's own.
// A layer's cache is a list of branches (layers/attention_decode.h): a dense or block-sparse
// layer keeps every row; a dilated layer keeps, per branch (w_i, r_i) and head, only the rows of
// the current segment of the head's offset class, packed, so its cache is sum_i ceil(w_i / r_i)
// rows per head however long the sequence (the spec's bound). One token is decoded against the
// branches directly (attention_decode); a chunk of queries unpacks the rows it needs into
// ordinary rows first and runs layers/attention.h's two-sided attention, the pattern's mask
// deciding which pairs count. The result equals a full forward over the whole sequence
// (tests/test_model_cpu.cpp). A model with a pointer keeps its keys and tokens beside the layers'
// rows (model/pointer_cache.h), and its logits and losses are the mixture's.
#pragma once
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>
#include "layers/attention_decode.h"
#include "layers/attn_sink.h"
#include "layers/qk_conv.h"
#include "model/attention_probe.h"
#include "model/gpt.h"
#include "model/pointer_cache.h"

// The smallest key position that a query at position >= next_pos can attend under p (causal):
// the pattern module's cache_first_key (0 unless its branches restart, as dilated segments do).
inline long long kv_first_needed(const AttnPattern& p, long long next_pos) { return pattern_cache_first_key(p, next_pos); }

// Packed rows per head of a layer's cache: the sum of its branches' rows (sum_i ceil(w_i / r_i)
// for a dilated layer), whatever the context; -1 for a layer that keeps every row.
inline long long kv_cache_rows(const AttnPattern& p) {
    if (pattern_cache_keeps_every_row(p)) return -1;
    long long rows = 0;
    for (const CacheBranchShape& s : pattern_cache_branches(p)) rows += s.rows;
    return rows;
}

// Rows of a layer's cache once `len` tokens are in it: every row, or the dilated bound.
inline long long kv_cache_rows_at(const AttnPattern& p, long long len) {
    const long long bound = kv_cache_rows(p);
    return bound < 0 ? len : bound;
}

// Ordinary rows a chunk of up to `chunk` queries unpacks a layer's packed rows into (one buffer
// for all layers): the most any layer's module asks (a dilated one: its longest segment plus the
// chunk); 0 when every layer keeps every row.
inline long long kv_unpack_rows(const GPTConfig& cfg, int chunk) {
    long long rows = 0;
    for (int l = 0; l < cfg.n_layer; l++) rows = std::max(rows, pattern_cache_unpack_rows(cfg.attn(l), chunk));
    return rows;
}

// A cache file (model/kv_cache_file.h) holds the layers' rows, not a pointer's keys.
constexpr const char* kPointerCacheFileError =
    "a KV cache file does not hold a pointer's keys (a model trained with --pointer): run without --save-cache and --load-cache";

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
    // (B, rows, 2, H, D) (every position so far, or a dilated layer's packed branches one after
    // the other: kv_cache_rows), and the final hidden state of each sequence's last token (B, C),
    // from which its logits come; in a layer with a q/k convolution (W wide), its last W - 1 raw
    // q and k rows (B, W - 1, 2C), which the next token's convolution reads (empty elsewhere).
    // import_state puts such a state in a fresh cache.
    struct State {
        long long position = 0;
        std::vector<long long> rows;
        std::vector<std::vector<float>> kv;
        std::vector<float> last_hidden;
        std::vector<std::vector<float>> qk_tail;
    };
    virtual State export_state() = 0;
    virtual void import_state(const State& s) = 0;
    // Sequence b of this (fresh) cache becomes a copy of sequence from[b] of `src`, a cache of the
    // same model and kind at a token or more: contexts prefilled once, then continued by several
    // prompts each (from.size() == this cache's B).
    virtual void gather(const IncrementalModel& src, const std::vector<int>& from) = 0;
    // Every sequence becomes a copy of `one`'s single sequence.
    void replicate(const IncrementalModel& one) { gather(one, std::vector<int>(batch(), 0)); }
    virtual int batch() const = 0;  // sequences B
    // Room for len tokens per sequence now (the GPU's dense layers then never move their rows).
    virtual void reserve(long long len) { (void)len; }
    // From now on every chunk of two or more tokens fills probe's weights for the pairs whose query
    // it reads (model/attention_probe.h; sequence 0); nullptr stops it. A step of one token may not be.
    virtual void set_probe(AttnProbe* probe) {
        if (probe) fatal("internal: this model cannot probe its attention (the CPU and GPU caches can)");
    }
};

// Bytes the caches of a model hold at `len` tokens of B sequences, elem bytes per value: what
// infer prints before a long prefill. kv_unpack_bytes: the one buffer that chunks of a dilated
// layer unpack into, beside it.
inline double kv_cache_bytes(const GPTConfig& cfg, long long len, int B, size_t elem) {
    double total = 0;
    for (int l = 0; l < cfg.n_layer; l++) {
        total += (double)kv_cache_rows_at(cfg.attn(l), len) * 2 * cfg.n_embd * elem * B;
        total += (double)std::max(cfg.layer_qk_conv(l) - 1, 0) * 2 * cfg.n_embd * elem * B;  // the q/k convolution's rows
    }
    if (cfg.pointer) total += (double)len * (cfg.head_dim() * elem + 2 * sizeof(int)) * B;  // its keys, tokens and links
    return total;
}
inline double kv_unpack_bytes(const GPTConfig& cfg, int B, int chunk, size_t elem) {
    return (double)kv_unpack_rows(cfg, chunk) * 2 * cfg.n_embd * elem * B;
}

template <typename T>
class KVCache {
   public:
    // B sequences decoded together, chunks of up to max_chunk tokens.
    KVCache(const GPT<T>& model, int B, int max_chunk) : m_(model), B_(B), max_chunk_(max_chunk), layers_(model.cfg.n_layer) {
        for (int l = 0; l < model.cfg.n_layer; l++)
            if (!model.cfg.attn(l).causal) fatal("a KV cache needs causal attention (layer %d is not causal)", l);
        if (B < 1 || max_chunk < 1) fatal("KVCache: B %d and max_chunk %d must be >= 1", B, max_chunk);
        const size_t row = (size_t)2 * model.cfg.n_embd;
        for (int l = 0; l < model.cfg.n_layer; l++)
            for (const CacheBranchShape& s : pattern_cache_branches(model.cfg.attn(l))) {
                layers_[l].branches.push_back({s.w, s.r, nullptr, std::max(s.rows, 0LL)});
                layers_[l].store.emplace_back((size_t)B * std::max(s.rows, 0LL) * row);
                layers_[l].branches.back().kv = layers_[l].store.back().data();
            }
        for (int l = 0; l < model.cfg.n_layer; l++)  // zeros: what training's windows read before their first token
            layers_[l].qk_tail.assign((size_t)B * std::max(model.cfg.layer_qk_conv(l) - 1, 0) * row, T(0));
        if (model.cfg.pointer) ptr_ = std::make_unique<PointerCache<T>>(model, B);
    }

    int max_chunk() const { return max_chunk_; }
    long long position() const { return next_pos_; }  // tokens seen so far per sequence
    void set_probe(AttnProbe* probe) { probe_ = probe; }  // IncrementalModel::set_probe
    // Rows per sequence that layer l holds: every position so far, or its packed bound.
    long long rows(int layer) const { return kv_cache_rows_at(m_.cfg.attn(layer), next_pos_); }
    size_t layer_bytes(int layer) const {
        size_t n = layers_[layer].qk_tail.size() * sizeof(T);
        for (const std::vector<T>& s : layers_[layer].store) n += s.size() * sizeof(T);
        return n;
    }
    size_t bytes() const {  // every layer's, the rows that chunks unpack into, the pointer's
        size_t n = scratch_.size() * sizeof(T) + (ptr_ ? ptr_->bytes() : 0);
        for (int l = 0; l < (int)layers_.size(); l++) n += layer_bytes(l);
        return n;
    }

    // Runs tokens (B, n), the next n of each sequence; lnf() then holds their final hidden states.
    void append(const int* tokens, int n) {
        if (n < 1 || n > max_chunk_) fatal("KVCache::append: %d tokens, the chunk is 1..%d", n, max_chunk_);
        const GPTConfig& cfg = m_.cfg;
        const int C = cfg.n_embd, H = cfg.n_head, D = cfg.head_dim(), BN = B_ * n;
        check_token_ids(tokens, nullptr, B_, n, cfg.vocab_size);
        n_ = n;
        if ((long long)pos_.size() < next_pos_ + n) {  // only the new positions: a token at a time stays linear
            const size_t had = pos_.size();
            pos_.resize(next_pos_ + n);
            for (size_t i = had; i < pos_.size(); i++) pos_[i] = (int)i;
        }
        const int* qpos = pos_.data() + next_pos_;
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
            Layer& c = layers_[l];
            if (const int W = cfg.layer_qk_conv(l)) {  // from here on qkv_pre_ holds the convolved q and k
                conv_.resize(qkv_pre_.size());
                qk_conv_forward(conv_.data(), (T*)nullptr, qkv_pre_.data(), c.qk_tail.data(), w.qkconv, qpos, nullptr, B_, n, C, W);
                qk_conv_keep_tail(c.qk_tail.data(), qkv_pre_.data(), B_, n, C, W);
                qkv_pre_.swap(conv_);
            }
            const AttnPattern& pat = cfg.attn(l);
            if (n == 1 && pattern_decodes_one_token(pat)) {  // one token: rope, append and attend against the branches
                grow(c, next_pos_ + 1);
                attention_decode_step(atty_.data(), lse_.data(), qkv_pre_.data(), c.branches, next_pos_, B_, H, D, scale,
                                      cfg.layer_rope_theta(l), cfg.layer_logn_base(l), w.sink, (const T*)w.logn_slope);
            } else {
                rope_forward(qkv_.data(), qkv_pre_.data(), qpos, B_, n, H, D, cfg.layer_rope_theta(l));  // (B, n, 3, H, D)
                logn_scale_queries(qkv_.data(), qpos, B_, n, H, D, cfg.layer_logn_base(l), (const T*)w.logn_slope);
                attend_chunk(c, pat, l, n, scale);
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
        if (ptr_) ptr_->append(lnf_.data(), tokens, n, next_pos_);
        next_pos_ += n;
    }

    // Logits (V) of row i of the last chunk of sequence b.
    void logits(T* out, int b, int i) const {
        const int C = m_.cfg.n_embd;
        if (ptr_) return ptr_->logits(out, lnf_.data() + ((size_t)b * n_ + i) * C, b, next_pos_ - n_ + i);
        matmul_forward(out, lnf_.data() + ((size_t)b * n_ + i) * C, m_.p.wte, (const T*)nullptr, 1, C, m_.cfg.vocab_size);
    }
    // Cross-entropy losses (B, n) of the last chunk against targets (B, n) (< 0: ignored, 0).
    void losses(T* out, const int* targets) const {
        if (ptr_) return ptr_->losses(out, lnf_.data(), targets, n_, next_pos_ - n_);
        classifier_forward_backward(out, (T*)nullptr, (T*)nullptr, lnf_.data(), m_.p.wte, targets, B_ * n_, m_.cfg.n_embd,
                                    m_.cfg.vocab_size, T(0));
    }

    // Each layer's rows (B, rows, 2C): its branches' rows one after the other (a dense layer's
    // one branch: the positions so far).
    IncrementalModel::State export_state() const {
        if (ptr_) fatal("%s", kPointerCacheFileError);
        const size_t C = m_.cfg.n_embd, row = 2 * C;
        IncrementalModel::State st;
        st.position = next_pos_;
        for (int l = 0; l < (int)layers_.size(); l++) {
            const Layer& c = layers_[l];
            const long long rows = this->rows(l);
            std::vector<float> kv((size_t)B_ * rows * row);
            size_t at = 0;
            for (int b = 0; b < B_; b++)
                for (const CacheBranch<T>& br : c.branches) {
                    const long long n = br.w == kWholeSequence ? next_pos_ : br.rows;
                    for (size_t i = 0; i < (size_t)n * row; i++) kv[at++] = (float)br.kv[(size_t)b * br.rows * row + i];
                }
            st.rows.push_back(rows);
            st.kv.push_back(std::move(kv));
            st.qk_tail.emplace_back(c.qk_tail.begin(), c.qk_tail.end());
        }
        st.last_hidden.assign((size_t)B_ * C, 0.0f);
        for (int b = 0; b < B_ && n_ > 0; b++)
            for (size_t i = 0; i < C; i++) st.last_hidden[(size_t)b * C + i] = (float)lnf_[((size_t)b * n_ + n_ - 1) * C + i];
        return st;
    }
    void import_state(const IncrementalModel::State& st) {
        if (ptr_) fatal("%s", kPointerCacheFileError);
        const size_t row = (size_t)2 * m_.cfg.n_embd;
        next_pos_ = st.position, n_ = 1;
        for (size_t l = 0; l < layers_.size(); l++) {
            Layer& c = layers_[l];
            grow(c, st.position);
            size_t at = 0;
            for (int b = 0; b < B_; b++)
                for (CacheBranch<T>& br : c.branches) {
                    const long long n = br.w == kWholeSequence ? st.position : br.rows;
                    for (size_t i = 0; i < (size_t)n * row; i++) br.kv[(size_t)b * br.rows * row + i] = (T)st.kv[l][at++];
                }
            const std::vector<float> none;
            const std::vector<float>& tail = l < st.qk_tail.size() ? st.qk_tail[l] : none;
            if (tail.size() != c.qk_tail.size()) fatal("internal: a cache state whose q/k convolution rows do not fit layer %zu", l);
            std::copy(tail.begin(), tail.end(), c.qk_tail.begin());
        }
        lnf_.assign(st.last_hidden.begin(), st.last_hidden.end());
    }

    int batch() const { return B_; }
    void gather(const KVCache& src, const std::vector<int>& from) {
        if ((int)from.size() != B_ || src.n_ < 1) fatal("KVCache::gather: %zu sources for %d sequences, or an empty source", from.size(), B_);
        for (int f : from)
            if (f < 0 || f >= src.B_) fatal("KVCache::gather: sequence %d of a cache of %d", f, src.B_);
        const size_t C = m_.cfg.n_embd, row = 2 * C;
        next_pos_ = src.next_pos_, n_ = 1;
        for (size_t l = 0; l < layers_.size(); l++) {
            grow(layers_[l], next_pos_);  // copies the rows allocated (none in a fresh cache)
            for (size_t i = 0; i < layers_[l].branches.size(); i++) {
                const CacheBranch<T>& sb = src.layers_[l].branches[i];
                CacheBranch<T>& dst = layers_[l].branches[i];
                const size_t n = (size_t)(sb.w == kWholeSequence ? next_pos_ : sb.rows) * row;
                for (int b = 0; b < B_; b++)
                    std::memcpy(dst.kv + (size_t)b * dst.rows * row, sb.kv + (size_t)from[b] * sb.rows * row, n * sizeof(T));
            }
            const size_t tail = src.layers_[l].qk_tail.size() / src.B_;  // one sequence's
            for (int b = 0; b < B_; b++)
                std::copy_n(src.layers_[l].qk_tail.begin() + from[b] * tail, tail, layers_[l].qk_tail.begin() + b * tail);
        }
        lnf_.resize((size_t)B_ * C);
        for (int b = 0; b < B_; b++)
            std::memcpy(lnf_.data() + b * C, src.lnf_.data() + ((size_t)from[b] * src.n_ + src.n_ - 1) * C, C * sizeof(T));
        if (ptr_) ptr_->gather(*src.ptr_, from, next_pos_);
    }

   private:
    // One layer's cache: its branches (views of store's buffers, (B, rows, 2, H, D) each), and
    // with a q/k convolution the last W - 1 raw q and k rows (B, W - 1, 2C).
    struct Layer {
        std::vector<CacheBranch<T>> branches;
        std::vector<std::vector<T>> store;
        std::vector<T> qk_tail;
    };
    const GPT<T>& m_;
    int B_, max_chunk_, n_ = 0;
    long long next_pos_ = 0;
    std::vector<Layer> layers_;
    std::vector<int> pos_;  // 0, 1, 2, ...: positions of queries and keys are slices of it
    AttnProbe* probe_ = nullptr;
    std::unique_ptr<PointerCache<T>> ptr_;  // a model with a pointer: its keys and tokens
    std::vector<T> x_, ln_, mean_, rstd_, qkv_pre_, qkv_, atty_, lse_, tmp_, fch_, fch_gelu_, lnf_, scratch_, conv_;

    // A layer that keeps every row: room for `len` rows per sequence (doubling, so it rarely moves).
    void grow(Layer& c, long long len) {
        CacheBranch<T>& br = c.branches[0];
        if (br.w != kWholeSequence || len <= br.rows) return;
        const size_t row = (size_t)2 * m_.cfg.n_embd;
        const long long cap = std::max(len, 2 * br.rows);
        std::vector<T> kv((size_t)B_ * cap * row);
        for (int b = 0; b < B_ && br.rows > 0; b++)  // an empty branch may have no buffer yet: memcpy from null is UB
            std::memcpy(kv.data() + (size_t)b * cap * row, br.kv + (size_t)b * br.rows * row, (size_t)br.rows * row * sizeof(T));
        c.store[0].swap(kv);
        br.kv = c.store[0].data(), br.rows = cap;
    }

    // A chunk of n queries against the rows before them and their own, through the flash-style
    // two-sided attention (layers/attention.h) on ordinary rows; the chunk's K and V then go into
    // the cache.
    void attend_chunk(Layer& c, const AttnPattern& pat, int layer, int n, T scale) {
        const int C = m_.cfg.n_embd, H = m_.cfg.n_head, D = m_.cfg.head_dim();
        const AttnDims dm{1, H, D, (int)(next_pos_ + n)};  // the sequence so far: longer segments are cut to it
        const AttnQueries<T> qs0{nullptr, 3 * C, n, pos_.data() + next_pos_, nullptr, (int)next_pos_};
        if (pattern_cache_keeps_every_row(pat)) {  // every row: the cache itself, with the chunk appended
            grow(c, next_pos_ + n);
            cache_append(c.branches, qkv_.data(), next_pos_, n, B_, H, D);
            const CacheBranch<T>& br = c.branches[0];
            for (int b = 0; b < B_; b++) {
                AttnQueries<T> qs = qs0;
                qs.q = qkv_.data() + (size_t)b * n * 3 * C;
                const T* kv = br.kv + (size_t)b * br.rows * 2 * C;
                const AttnKeys<T> ks{kv, kv + C, 2 * C, (int)(next_pos_ + n), pos_.data(), 0};
                attention_forward(atty_.data() + (size_t)b * n * C, lse_.data() + (size_t)b * H * n, qs, ks, pat, dm, scale);
            }
            add_sink(layer, n);
            if (probe_)
                probe_chunk_layer<T>(*probe_, layer, next_pos_, n, qkv_.data(), 3 * C, 0,
                                     [&](long long j) { return (const T*)br.kv + (size_t)j * 2 * C; }, lse_.data(), pat, H, D,
                                     (float)scale, (int)(next_pos_ + n));
            return;
        }
        // Dilated: the rows from the branches' earliest current segment on, unpacked, then the chunk's.
        const long long lo = kv_first_needed(pat, next_pos_), prior = next_pos_ - lo;
        for (int b = 0; b < B_; b++) {
            AttnQueries<T> qs = qs0;
            qs.q = qkv_.data() + (size_t)b * n * 3 * C;
            AttnKeys<T> ks{qs.q + C, qs.q + 2 * C, 3 * C, n, pos_.data() + next_pos_, (int)next_pos_};  // no earlier rows
            if (prior > 0) {
                scratch_.resize((size_t)(prior + n) * 2 * C);
                cache_unpack(scratch_.data(), c.branches, lo, next_pos_, b, H, D);
                for (int i = 0; i < n; i++)
                    std::memcpy(scratch_.data() + (size_t)(prior + i) * 2 * C, qs.q + (size_t)i * 3 * C + C, (size_t)2 * C * sizeof(T));
                ks = AttnKeys<T>{scratch_.data(), scratch_.data() + C, 2 * C, (int)(prior + n), pos_.data() + lo, (int)lo};
            }
            attention_forward(atty_.data() + (size_t)b * n * C, lse_.data() + (size_t)b * H * n, qs, ks, pat, dm, scale);
        }
        add_sink(layer, n);
        cache_append(c.branches, qkv_.data(), next_pos_, n, B_, H, D);
    }

    // The chunk's attention output and log-sum-exp made those of the softmax with the layer's
    // sink, where the model has sinks (layers/attn_sink.h).
    void add_sink(int layer, int n) {
        if (const T* sink = m_.p.blocks[layer].sink) attn_sink_forward(atty_.data(), lse_.data(), sink, B_, n, m_.cfg.n_head, m_.cfg.head_dim());
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
    int batch() const override { return c_.batch(); }
    void set_probe(AttnProbe* probe) override { c_.set_probe(probe); }
    void gather(const IncrementalModel& src, const std::vector<int>& from) override {
        const CpuIncremental* c = dynamic_cast<const CpuIncremental*>(&src);
        if (!c) fatal("CpuIncremental::gather: the source is not a CPU cache");
        c_.gather(c->c_, from);
    }

   private:
    KVCache<float> c_;
};
