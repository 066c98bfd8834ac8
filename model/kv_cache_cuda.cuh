// Incremental inference with a KV cache on the GPU: the same as model/kv_cache.h (read that
// first), name for name, on the CUDA launchers and a CudaBackend's bf16 weights. A layer's cache
// is (B, cap, 2, H, D) bf16 holding positions lo .. lo + rows - 1 of each sequence; attention is
// the two-sided flash forward (layers/cuda/attention_flash_two_sided.h) of the chunk's queries
// against those rows, one sequence at a time.
#pragma once
#include <algorithm>
#include <vector>
#include "layers/cuda/attention_flash_two_sided.h"
#include "layers/cuda/ring_attention.cuh"
#include "model/gpt_cuda.cuh"
#include "model/kv_cache.h"

class KVCacheCuda : public IncrementalModel {
   public:
    KVCacheCuda(const CudaBackend& model, int B, int max_chunk)
        : m_(model), cfg_(model.config()), B_(B), max_chunk_(max_chunk), layers_(cfg_.n_layer) {
        for (int l = 0; l < cfg_.n_layer; l++)
            if (!cfg_.attn(l).causal) fatal("a KV cache needs causal attention (layer %d is not causal)", l);
        if (B < 1 || max_chunk < 1) fatal("KVCacheCuda: B %d and max_chunk %d must be >= 1", B, max_chunk);
        const size_t BN = (size_t)B * max_chunk, C = cfg_.n_embd, H = cfg_.n_head;
        const size_t o_tok = arena_.reserve(BN * 4), o_tgt = arena_.reserve(BN * 4), o_x = arena_.reserve(BN * C * 2),
                     o_ln = arena_.reserve(BN * C * 2), o_mean = arena_.reserve(BN * 4), o_rstd = arena_.reserve(BN * 4),
                     o_qkv_pre = arena_.reserve(BN * 3 * C * 2), o_qkv = arena_.reserve(BN * 3 * C * 2),
                     o_atty = arena_.reserve(BN * C * 2), o_lse = arena_.reserve(BN * H * 4), o_tmp = arena_.reserve(BN * C * 2),
                     o_fch = arena_.reserve(BN * 4 * C * 2), o_gelu = arena_.reserve(BN * 4 * C * 2),
                     o_lnf = arena_.reserve(BN * C * 2), o_losses = arena_.reserve(BN * 4),
                     o_logits = arena_.reserve((size_t)cfg_.vocab_size * 4),
                     o_cls = arena_.reserve(classifier_scratch_bytes((int)BN, cfg_.vocab_size));
        arena_.allocate("the KV cache's chunk buffers", "use a smaller --chunk or batch");
        tokens_ = arena_.at<int>(o_tok), targets_ = arena_.at<int>(o_tgt), x_ = arena_.at<bf16>(o_x), ln_ = arena_.at<bf16>(o_ln);
        mean_ = arena_.at<float>(o_mean), rstd_ = arena_.at<float>(o_rstd), qkv_pre_ = arena_.at<bf16>(o_qkv_pre);
        qkv_ = arena_.at<bf16>(o_qkv), atty_ = arena_.at<bf16>(o_atty), lse_ = arena_.at<float>(o_lse);
        tmp_ = arena_.at<bf16>(o_tmp), fch_ = arena_.at<bf16>(o_fch), fch_gelu_ = arena_.at<bf16>(o_gelu);
        lnf_ = arena_.at<bf16>(o_lnf), losses_ = arena_.at<float>(o_losses), logits_ = arena_.at<float>(o_logits);
        cls_scratch_ = arena_.at<void>(o_cls);
    }
    ~KVCacheCuda() {
        for (Layer& c : layers_) cudaFree(c.kv), cudaFree(c.spare);
    }
    KVCacheCuda(const KVCacheCuda&) = delete;

    int max_chunk() const override { return max_chunk_; }
    long long position() const override { return next_pos_; }
    long long rows(int layer) const { return layers_[layer].rows; }
    size_t bytes() const override {  // the K/V rows allocated (both buffers of a layer that evicts)
        size_t n = 0;
        for (const Layer& c : layers_) n += (size_t)B_ * c.cap * 2 * cfg_.n_embd * sizeof(bf16) * (c.spare ? 2 : 1);
        return n;
    }

    void append(const int* tokens, int n) override {
        if (n < 1 || n > max_chunk_) fatal("KVCacheCuda::append: %d tokens, the chunk is 1..%d", n, max_chunk_);
        const int C = cfg_.n_embd, H = cfg_.n_head, D = cfg_.head_dim(), BN = B_ * n;
        check_token_ids(tokens, nullptr, B_, n, cfg_.vocab_size);
        cudaStream_t st = m_.stream();
        n_ = n;
        CUDA_CHECK(cudaMemcpyAsync(tokens_, tokens, (size_t)BN * 4, cudaMemcpyHostToDevice, st));
        // Positions 0 .. N-1 on the device, with room to grow: queries and keys are slices of it.
        size_t want = 1;
        while (want < (size_t)(next_pos_ + n)) want *= 2;
        const int* pos = ring_gpu::ring_positions(std::max<size_t>(want, 1024), st);
        const int* qpos = pos + next_pos_;
        const ParamViews<bf16>& p = m_.weights();
        encoder_forward_cuda(x_, tokens_, p.wte, B_, n, C, st);
        const float scale = 1.0f / std::sqrt((float)D);
        for (int l = 0; l < cfg_.n_layer; l++) {
            const BlockParams<bf16>& w = p.blocks[l];
            layernorm_forward_cuda(ln_, mean_, rstd_, x_, w.ln1w, w.ln1b, BN, C, st);
            matmul_forward_cuda(qkv_pre_, ln_, w.qkvw, w.qkvb, BN, C, 3 * C, st);
            rope_forward_cuda(qkv_, qkv_pre_, qpos, B_, n, H, D, cfg_.rope_theta, st);  // (B, n, 3, H, D)
            Layer& c = layers_[l];
            keep_and_append(c, cfg_.attn(l), n, st);
            const AttnDims dm{1, H, D, (int)(next_pos_ + n)};  // the sequence so far (model/kv_cache.h)
            for (int b = 0; b < B_; b++) {
                const bf16* q = qkv_ + (size_t)b * n * 3 * C;
                const bf16* kv = c.kv + (size_t)b * c.cap * 2 * C;
                const AttnQueries<bf16> qs{q, 3 * C, n, qpos, nullptr, (int)next_pos_};
                const AttnKeys<bf16> ks{kv, kv + C, 2 * C, (int)c.rows, pos + c.lo, (int)c.lo};
                attention_forward_cuda(atty_ + (size_t)b * n * C, lse_ + (size_t)b * H * n, qs, ks, cfg_.attn(l), dm, scale, st);
            }
            matmul_forward_cuda(tmp_, atty_, w.projw, w.projb, BN, C, C, st);
            residual_forward_cuda(x_, x_, tmp_, (size_t)BN * C, st);
            layernorm_forward_cuda(ln_, mean_, rstd_, x_, w.ln2w, w.ln2b, BN, C, st);
            matmul_forward_cuda(fch_gelu_, ln_, w.fcw, w.fcb, BN, C, 4 * C, st, fch_);
            matmul_forward_cuda(tmp_, fch_gelu_, w.fcprojw, w.fcprojb, BN, 4 * C, C, st);
            residual_forward_cuda(x_, x_, tmp_, (size_t)BN * C, st);
        }
        layernorm_forward_cuda(lnf_, mean_, rstd_, x_, p.lnfw, p.lnfb, BN, C, st);
        next_pos_ += n;
    }

    void logits(float* out, int b, int i) override {
        cudaStream_t st = m_.stream();
        logits_cuda(logits_, lnf_ + ((size_t)b * n_ + i) * cfg_.n_embd, m_.weights().wte, cfg_.n_embd, cfg_.vocab_size, st);
        CUDA_CHECK(cudaMemcpyAsync(out, logits_, (size_t)cfg_.vocab_size * 4, cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
    }
    void losses(float* out, const int* targets) override {
        cudaStream_t st = m_.stream();
        const int BN = B_ * n_;
        for (int i = 0; i < BN; i++)
            if (targets[i] >= cfg_.vocab_size) fatal("target id %d is outside the vocabulary of %d", targets[i], cfg_.vocab_size);
        CUDA_CHECK(cudaMemcpyAsync(targets_, targets, (size_t)BN * 4, cudaMemcpyHostToDevice, st));
        classifier_forward_backward_cuda(losses_, nullptr, nullptr, lnf_, m_.weights().wte, targets_, BN, cfg_.n_embd,
                                         cfg_.vocab_size, 0.0f, cls_scratch_, st);
        CUDA_CHECK(cudaMemcpyAsync(out, losses_, (size_t)BN * 4, cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
    }

    State export_state() override {
        const size_t C = cfg_.n_embd, row = 2 * C;
        cudaStream_t st = m_.stream();
        CUDA_CHECK(cudaStreamSynchronize(st));
        State out;
        out.position = next_pos_;
        std::vector<bf16> h;
        for (const Layer& c : layers_) {
            out.rows.push_back(c.rows);
            h.resize((size_t)B_ * c.rows * row);
            if (c.rows)
                CUDA_CHECK(cudaMemcpy2D(h.data(), c.rows * row * sizeof(bf16), c.kv, c.cap * row * sizeof(bf16),
                                        c.rows * row * sizeof(bf16), B_, cudaMemcpyDeviceToHost));
            std::vector<float> kv(h.size());
            for (size_t i = 0; i < h.size(); i++) kv[i] = __bfloat162float(h[i]);
            out.kv.push_back(std::move(kv));
        }
        h.resize((size_t)B_ * C);
        out.last_hidden.assign((size_t)B_ * C, 0.0f);
        for (int b = 0; b < B_ && n_ > 0; b++) {
            CUDA_CHECK(cudaMemcpy(h.data() + b * C, lnf_ + ((size_t)b * n_ + n_ - 1) * C, C * sizeof(bf16), cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < C; i++) out.last_hidden[b * C + i] = __bfloat162float(h[b * C + i]);
        }
        return out;
    }
    void import_state(const State& in) override {
        const size_t C = cfg_.n_embd, row = 2 * C;
        std::vector<bf16> h;
        for (size_t l = 0; l < layers_.size(); l++) {
            Layer& c = layers_[l];
            cudaFree(c.kv), cudaFree(c.spare);
            c.spare = nullptr;
            c.rows = in.rows[l], c.lo = in.position - in.rows[l], c.cap = std::max<long long>(in.rows[l] + max_chunk_, 1);
            c.kv = device_rows((size_t)B_ * c.cap * row, "the loaded rows");
            h.resize(in.kv[l].size());
            for (size_t i = 0; i < h.size(); i++) h[i] = __float2bfloat16(in.kv[l][i]);
            if (c.rows)
                CUDA_CHECK(cudaMemcpy2D(c.kv, c.cap * row * sizeof(bf16), h.data(), c.rows * row * sizeof(bf16),
                                        c.rows * row * sizeof(bf16), B_, cudaMemcpyHostToDevice));
        }
        h.resize(in.last_hidden.size());
        for (size_t i = 0; i < h.size(); i++) h[i] = __float2bfloat16(in.last_hidden[i]);
        CUDA_CHECK(cudaMemcpy(lnf_, h.data(), h.size() * sizeof(bf16), cudaMemcpyHostToDevice));
        next_pos_ = in.position, n_ = 1;
    }

   private:
    struct Layer {
        bf16 *kv = nullptr, *spare = nullptr;  // (B, cap, 2, H, D); spare: where an eviction moves the kept rows
        long long lo = 0, rows = 0, cap = 0;
    };
    const CudaBackend& m_;
    GPTConfig cfg_;
    int B_, max_chunk_, n_ = 0;
    long long next_pos_ = 0;
    std::vector<Layer> layers_;
    DeviceArena arena_;
    int *tokens_, *targets_;
    bf16 *x_, *ln_, *qkv_pre_, *qkv_, *atty_, *tmp_, *fch_, *fch_gelu_, *lnf_;
    float *mean_, *rstd_, *lse_, *losses_, *logits_;
    void* cls_scratch_;

    static bf16* device_rows(size_t elements, const char* what) {
        size_t free_b = 0, total_b = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        if (elements * sizeof(bf16) > free_b)
            fatal("out of GPU memory: the KV cache needs %.2f GiB more for %s but %.2f GiB are free: use a shorter context",
                  elements * sizeof(bf16) / 1073741824.0, what, free_b / 1073741824.0);
        bf16* p = nullptr;
        CUDA_CHECK(cudaMalloc(&p, elements * sizeof(bf16)));
        return p;
    }

    // As KVCache::keep_and_append: drop what no later query attends, append the chunk's K and V.
    void keep_and_append(Layer& c, const AttnPattern& p, int n, cudaStream_t st) {
        const size_t row = (size_t)2 * cfg_.n_embd;  // elements of one position's K and V
        const long long lo = std::max(c.lo, std::min(kv_first_needed(p, next_pos_), c.lo + c.rows));
        const long long drop = lo - c.lo, keep = c.rows - drop;
        if (keep + n > c.cap || drop > 0) {  // move the kept rows to the front of a buffer (a new, larger one to grow)
            const long long cap = keep + n > c.cap ? std::max(keep + n, 2 * c.cap) : c.cap;
            bf16* dst = cap != c.cap ? device_rows((size_t)B_ * cap * row, "its rows") : c.spare;
            if (!dst) dst = c.spare = device_rows((size_t)B_ * cap * row, "the rows it keeps across a segment");
            if (keep > 0)
                CUDA_CHECK(cudaMemcpy2DAsync(dst, cap * row * sizeof(bf16), c.kv + drop * row, c.cap * row * sizeof(bf16),
                                             keep * row * sizeof(bf16), B_, cudaMemcpyDeviceToDevice, st));
            if (cap != c.cap) {
                CUDA_CHECK(cudaStreamSynchronize(st));  // the old buffers may still be read by queued kernels
                cudaFree(c.kv), cudaFree(c.spare);
                c.kv = dst, c.spare = nullptr, c.cap = cap;
            } else {
                std::swap(c.kv, c.spare);
            }
        }
        // The chunk's K and V (after q in each (3, H, D) row) at rows keep .. keep + n - 1 of each sequence.
        for (int b = 0; b < B_; b++)
            CUDA_CHECK(cudaMemcpy2DAsync(c.kv + ((size_t)b * c.cap + keep) * row, row * sizeof(bf16),
                                         qkv_ + (size_t)b * n * 3 * cfg_.n_embd + cfg_.n_embd, 3 * cfg_.n_embd * sizeof(bf16),
                                         row * sizeof(bf16), n, cudaMemcpyDeviceToDevice, st));
        c.lo = lo, c.rows = keep + n;
    }
};
