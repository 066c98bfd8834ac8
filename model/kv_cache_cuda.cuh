// Incremental inference with a KV cache on the GPU: the same as model/kv_cache.h (read that
// first), name for name, on the CUDA launchers and a CudaBackend's bf16 weights. A layer's cache
// is its branches' packed rows (layers/attention_decode.h), bf16: a dense or block-sparse layer
// keeps every row (B, cap, 2, H, D); a dilated layer sum_i ceil(w_i / r_i) packed rows per head.
//   - a chunk of queries: the two-sided flash forward (layers/cuda/attention_flash_two_sided.h)
//     against ordinary rows, one sequence at a time: a dense layer's own rows, or a dilated
//     layer's earlier rows unpacked into one buffer shared by all layers, then the chunk's;
//   - one token (dense and dilated layers): layers/cuda/attention_decode.cuh, split over pieces
//     of packed rows and merged by log-sum-exp. Its position is read from device memory, so the
//     whole step (every layer, ~10 launches each) is captured once as a CUDA graph and replayed
//     while the caches stay where they are; a launch per kernel cost more than the work.
// A model with a pointer keeps its keys and tokens beside the layers' rows
// (model/pointer_cache_cuda.cuh), and its logits and losses are the mixture's.
#pragma once
#include <algorithm>
#include <memory>
#include <vector>
#include "layers/cuda/attention_decode.cuh"
#include "layers/cuda/attn_sink.cuh"
#include "layers/cuda/attention_flash_two_sided.h"
#include "layers/cuda/qk_conv.cuh"
#include "layers/cuda/ring_attention.cuh"
#include "model/gpt_cuda.cuh"
#include "model/kv_cache.h"
#include "model/pointer_cache_cuda.cuh"

class KVCacheCuda : public IncrementalModel {
   public:
    // How decoding cuts each layer's rows into blocks (layers/cuda/attention_decode.cuh); the test
    // makes the pieces short so that short sequences take many of them.
    // kUseGraphs: false decodes with a launch per kernel (the test checks both give the same bits).
    static inline DecodePieces kDecodePieces{};
    static inline bool kUseGraphs = true;
    // kDecodeOneLaunch: false runs a decoded token's attention as its four launches (rope, log-n,
    // cache append, attention_decode_cuda) instead of attention_decode_step_cuda: the same bits
    // (the test checks it; bench_kv_cache --unfused times it).
    static inline bool kDecodeOneLaunch = true;
    // ... up to this many sequences: with more, the four launches decode faster (each block rotates
    // its own q), with fewer slower; see notes/kv-cache.md, the decode step.
    static constexpr int kDecodeOneLaunchMaxBatch = 4;

    KVCacheCuda(const CudaBackend& model, int B, int max_chunk)
        : m_(model), cfg_(model.config()), B_(B), max_chunk_(max_chunk), layers_(cfg_.n_layer) {
        for (int l = 0; l < cfg_.n_layer; l++)
            if (!cfg_.attn(l).causal) fatal("a KV cache needs causal attention (layer %d is not causal)", l);
        if (B < 1 || max_chunk < 1) fatal("KVCacheCuda: B %d and max_chunk %d must be >= 1", B, max_chunk);
        if (B > 65535)  // a grid dimension of the decode kernels
            fatal("KVCacheCuda: %d sequences, at most 65535 decode at once on the GPU: give fewer prompts", B);
        const size_t BN = (size_t)B * max_chunk, C = cfg_.n_embd, H = cfg_.n_head;
        const size_t o_tok = arena_.reserve(BN * 4), o_tgt = arena_.reserve(BN * 4), o_x = arena_.reserve(BN * C * 2),
                     o_ln = arena_.reserve(BN * C * 2), o_mean = arena_.reserve(BN * 4), o_rstd = arena_.reserve(BN * 4),
                     o_qkv_pre = arena_.reserve(BN * 3 * C * 2), o_qkv = arena_.reserve(BN * 3 * C * 2),
                     o_atty = arena_.reserve(BN * C * 2), o_lse = arena_.reserve(BN * H * 4), o_tmp = arena_.reserve(BN * C * 2),
                     o_fch = arena_.reserve(BN * 4 * C * 2), o_gelu = arena_.reserve(BN * 4 * C * 2),
                     o_lnf = arena_.reserve(BN * C * 2), o_losses = arena_.reserve(BN * 4),
                     o_logits = arena_.reserve((size_t)cfg_.vocab_size * 4), o_pos = arena_.reserve(4),
                     o_tickets = arena_.reserve((size_t)B * H * 4),
                     o_cls = arena_.reserve(classifier_scratch_bytes((int)BN, cfg_.vocab_size));
        arena_.allocate("the KV cache's chunk buffers", "use a smaller --chunk or batch");
        tokens_ = arena_.at<int>(o_tok), targets_ = arena_.at<int>(o_tgt), x_ = arena_.at<bf16>(o_x), ln_ = arena_.at<bf16>(o_ln);
        mean_ = arena_.at<float>(o_mean), rstd_ = arena_.at<float>(o_rstd), qkv_pre_ = arena_.at<bf16>(o_qkv_pre);
        qkv_ = arena_.at<bf16>(o_qkv), atty_ = arena_.at<bf16>(o_atty), lse_ = arena_.at<float>(o_lse);
        tmp_ = arena_.at<bf16>(o_tmp), fch_ = arena_.at<bf16>(o_fch), fch_gelu_ = arena_.at<bf16>(o_gelu);
        lnf_ = arena_.at<bf16>(o_lnf), losses_ = arena_.at<float>(o_losses), logits_ = arena_.at<float>(o_logits);
        decode_pos_ = arena_.at<int>(o_pos), cls_scratch_ = arena_.at<void>(o_cls), tickets_ = arena_.at<int>(o_tickets);
        CUDA_CHECK(cudaMemset(tickets_, 0, (size_t)B * H * 4));  // attention_decode_step_cuda leaves them zero
        decode_direct_ = true;
        const size_t row = 2 * C;
        for (int l = 0; l < cfg_.n_layer; l++) {
            decode_direct_ = decode_direct_ && pattern_decodes_one_token(cfg_.attn(l));
            for (const CacheBranchShape& sh : pattern_cache_branches(cfg_.attn(l))) {
                const long long rows = std::max(sh.rows, 0LL);  // a dense branch grows from 0
                layers_[l].push_back({sh.w, sh.r, rows ? device_rows((size_t)B * rows * row, "its packed rows") : nullptr, rows});
                if (rows) CUDA_CHECK(cudaMemset(layers_[l].back().kv, 0, (size_t)B * rows * row * sizeof(bf16)));
            }
        }
        // A layer with a q/k convolution keeps its last W - 1 raw q and k rows (zeros: what
        // training's windows read before their first token), and a chunk's convolved qkv goes to qk_conv_.
        qk_tail_.assign(cfg_.n_layer, nullptr);
        for (int l = 0; l < cfg_.n_layer; l++)
            if (const size_t n = tail_elements(l)) {
                qk_tail_[l] = device_rows(n, "its q/k convolution's rows");
                CUDA_CHECK(cudaMemset(qk_tail_[l], 0, n * sizeof(bf16)));
            }
        if (cfg_.qk_conv) qk_conv_ = device_rows(BN * 3 * C, "the convolved queries and keys");
        if (cfg_.pointer) ptr_ = std::make_unique<PointerCacheCuda>(model, B, max_chunk);
    }
    ~KVCacheCuda() {
        if (graph_) cudaGraphExecDestroy(graph_);
        for (Layer& c : layers_)
            for (CacheBranch<bf16>& br : c) cudaFree(br.kv);
        cudaFree(unpack_), cudaFree(part_o_), cudaFree(part_l_), cudaFree(qk_conv_);
        for (bf16* t : qk_tail_) cudaFree(t);
    }
    KVCacheCuda(const KVCacheCuda&) = delete;

    int max_chunk() const override { return max_chunk_; }
    int batch() const override { return B_; }
    void set_probe(AttnProbe* probe) override { probe_ = probe; }
    long long position() const override { return next_pos_; }
    long long rows(int layer) const { return kv_cache_rows_at(cfg_.attn(layer), next_pos_); }
    size_t layer_bytes(int layer) const {  // the K/V rows allocated, and the q/k convolution's
        size_t n = tail_elements(layer) * sizeof(bf16);
        for (const CacheBranch<bf16>& br : layers_[layer]) n += (size_t)B_ * br.rows * 2 * cfg_.n_embd * sizeof(bf16);
        return n;
    }
    size_t bytes() const override {
        size_t n = ptr_ ? ptr_->bytes() : 0;
        for (int l = 0; l < cfg_.n_layer; l++) n += layer_bytes(l);
        return n;
    }
    // The rows that chunks of dilated layers unpack into (0 until a chunk needed them).
    size_t unpack_bytes() const { return (size_t)B_ * unpack_rows_ * 2 * cfg_.n_embd * sizeof(bf16); }

    // Allocates the rows of each layer that keeps every row (dense, block-sparse) for a sequence
    // of `len` tokens up front, so its cache never grows by doubling past what it needs (nor moves
    // while a decode graph uses it). Optional: append grows what it must.
    void reserve(long long len) override {
        for (Layer& c : layers_) grow(c, len, /*exact=*/true);
    }

    void append(const int* tokens, int n) override {
        if (n < 1 || n > max_chunk_) fatal("KVCacheCuda::append: %d tokens, the chunk is 1..%d", n, max_chunk_);
        check_token_ids(tokens, nullptr, B_, n, cfg_.vocab_size);
        cudaStream_t st = m_.stream();
        n_ = n;
        CUDA_CHECK(cudaMemcpyAsync(tokens_, tokens, (size_t)B_ * n * 4, cudaMemcpyHostToDevice, st));
        if (n == 1 && decode_direct_) {
            decode_token(st);
        } else {
            // Positions 0 .. N-1 on the device, with room to grow: queries and keys are slices of it.
            size_t want = 1;
            while (want < (size_t)(next_pos_ + n)) want *= 2;
            const int* pos = ring_gpu::ring_positions(std::max<size_t>(want, 1024), st);
            run_layers(n, pos, st);
        }
        if (ptr_) ptr_->append(lnf_, tokens, n, next_pos_, st);
        next_pos_ += n;
    }

    void logits(float* out, int b, int i) override {
        cudaStream_t st = m_.stream();
        if (ptr_) ptr_->logits(logits_, lnf_ + ((size_t)b * n_ + i) * cfg_.n_embd, b, next_pos_ - n_ + i, st);
        else logits_cuda(logits_, lnf_ + ((size_t)b * n_ + i) * cfg_.n_embd, m_.weights().wte, cfg_.n_embd, cfg_.vocab_size, st);
        CUDA_CHECK(cudaMemcpyAsync(out, logits_, (size_t)cfg_.vocab_size * 4, cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
    }
    void losses(float* out, const int* targets) override {
        cudaStream_t st = m_.stream();
        const int BN = B_ * n_;
        for (int i = 0; i < BN; i++)
            if (targets[i] >= cfg_.vocab_size) fatal("target id %d is outside the vocabulary of %d", targets[i], cfg_.vocab_size);
        CUDA_CHECK(cudaMemcpyAsync(targets_, targets, (size_t)BN * 4, cudaMemcpyHostToDevice, st));
        if (ptr_)
            ptr_->losses(losses_, lnf_, targets, targets_, n_, next_pos_ - n_, cls_scratch_, st);
        else
            classifier_forward_backward_cuda(losses_, nullptr, nullptr, lnf_, m_.weights().wte, targets_, BN, cfg_.n_embd,
                                             cfg_.vocab_size, 0.0f, cls_scratch_, st);
        CUDA_CHECK(cudaMemcpyAsync(out, losses_, (size_t)BN * 4, cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
    }

    // As KVCache::export_state: each layer's branches one after the other (a dense one: the
    // positions so far).
    State export_state() override {
        if (ptr_) fatal("%s", kPointerCacheFileError);
        const size_t C = cfg_.n_embd, row = 2 * C;
        CUDA_CHECK(cudaStreamSynchronize(m_.stream()));
        State out;
        out.position = next_pos_;
        std::vector<bf16> h;
        for (int l = 0; l < cfg_.n_layer; l++) {
            const long long rows = this->rows(l);
            std::vector<float> kv((size_t)B_ * rows * row);
            size_t at = 0;
            for (int b = 0; b < B_; b++)
                for (const CacheBranch<bf16>& br : layers_[l]) {
                    const size_t n = (size_t)(br.w == kWholeSequence ? next_pos_ : br.rows) * row;
                    h.resize(n);
                    if (n) CUDA_CHECK(cudaMemcpy(h.data(), br.kv + (size_t)b * br.rows * row, n * sizeof(bf16), cudaMemcpyDeviceToHost));
                    for (size_t i = 0; i < n; i++) kv[at++] = __bfloat162float(h[i]);
                }
            out.rows.push_back(rows);
            out.kv.push_back(std::move(kv));
            h.resize(tail_elements(l));
            if (!h.empty()) CUDA_CHECK(cudaMemcpy(h.data(), qk_tail_[l], h.size() * sizeof(bf16), cudaMemcpyDeviceToHost));
            out.qk_tail.emplace_back(h.size());
            for (size_t i = 0; i < h.size(); i++) out.qk_tail.back()[i] = __bfloat162float(h[i]);
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
        if (ptr_) fatal("%s", kPointerCacheFileError);
        const size_t C = cfg_.n_embd, row = 2 * C;
        std::vector<bf16> h;
        for (int l = 0; l < cfg_.n_layer; l++) {
            grow(layers_[l], in.position + max_chunk_, /*exact=*/true);
            size_t at = 0;
            for (int b = 0; b < B_; b++)
                for (CacheBranch<bf16>& br : layers_[l]) {
                    const size_t n = (size_t)(br.w == kWholeSequence ? in.position : br.rows) * row;
                    h.resize(n);
                    for (size_t i = 0; i < n; i++) h[i] = __float2bfloat16(in.kv[l][at++]);
                    if (n) CUDA_CHECK(cudaMemcpy(br.kv + (size_t)b * br.rows * row, h.data(), n * sizeof(bf16), cudaMemcpyHostToDevice));
                }
            const std::vector<float> none;
            const std::vector<float>& tail = (size_t)l < in.qk_tail.size() ? in.qk_tail[l] : none;
            if (tail.size() != tail_elements(l)) fatal("internal: a cache state whose q/k convolution rows do not fit layer %d", l);
            h.resize(tail.size());
            for (size_t i = 0; i < h.size(); i++) h[i] = __float2bfloat16(tail[i]);
            if (!h.empty()) CUDA_CHECK(cudaMemcpy(qk_tail_[l], h.data(), h.size() * sizeof(bf16), cudaMemcpyHostToDevice));
        }
        h.resize(in.last_hidden.size());
        for (size_t i = 0; i < h.size(); i++) h[i] = __float2bfloat16(in.last_hidden[i]);
        CUDA_CHECK(cudaMemcpy(lnf_, h.data(), h.size() * sizeof(bf16), cudaMemcpyHostToDevice));
        next_pos_ = in.position, n_ = 1;
    }

    // As KVCache::gather, on the device.
    void gather(const IncrementalModel& src_model, const std::vector<int>& from) override {
        const KVCacheCuda* src = dynamic_cast<const KVCacheCuda*>(&src_model);
        if (!src || src->n_ < 1 || (int)from.size() != B_)
            fatal("KVCacheCuda::gather: the source must be a GPU cache with a token in it, and one source per sequence");
        for (int f : from)
            if (f < 0 || f >= src->B_) fatal("KVCacheCuda::gather: sequence %d of a cache of %d", f, src->B_);
        const size_t C = cfg_.n_embd, row = 2 * C;
        cudaStream_t st = m_.stream();
        for (Layer& c : layers_) grow(c, src->next_pos_);  // before next_pos_ moves: grow copies the rows held
        next_pos_ = src->next_pos_, n_ = 1;
        for (int l = 0; l < cfg_.n_layer; l++) {
            for (size_t i = 0; i < layers_[l].size(); i++) {
                const CacheBranch<bf16>& sb = src->layers_[l][i];
                const CacheBranch<bf16>& dst = layers_[l][i];
                const size_t n = (size_t)(sb.w == kWholeSequence ? next_pos_ : sb.rows) * row;
                for (int b = 0; b < B_ && n > 0; b++)
                    CUDA_CHECK(cudaMemcpyAsync(dst.kv + (size_t)b * dst.rows * row, sb.kv + (size_t)from[b] * sb.rows * row,
                                               n * sizeof(bf16), cudaMemcpyDeviceToDevice, st));
            }
            const size_t tail = tail_elements(l) / B_;  // one sequence's
            for (int b = 0; b < B_ && tail > 0; b++)
                CUDA_CHECK(cudaMemcpyAsync(qk_tail_[l] + b * tail, src->qk_tail_[l] + from[b] * tail, tail * sizeof(bf16),
                                           cudaMemcpyDeviceToDevice, st));
        }
        for (int b = 0; b < B_; b++)
            CUDA_CHECK(cudaMemcpyAsync(lnf_ + b * C, src->lnf_ + ((size_t)from[b] * src->n_ + src->n_ - 1) * C, C * sizeof(bf16),
                                       cudaMemcpyDeviceToDevice, st));
        if (ptr_) ptr_->gather(*src->ptr_, from, next_pos_, st);
        CUDA_CHECK(cudaStreamSynchronize(st));
    }

   private:
    using Layer = std::vector<CacheBranch<bf16>>;  // its branches: one for a dense layer
    const CudaBackend& m_;
    GPTConfig cfg_;
    int B_, max_chunk_, n_ = 0;
    long long next_pos_ = 0;
    std::vector<Layer> layers_;
    DeviceArena arena_;
    int *tokens_, *targets_, *decode_pos_, *tickets_;  // decode_pos_: the position of the token being decoded
    bf16 *x_, *ln_, *qkv_pre_, *qkv_, *atty_, *tmp_, *fch_, *fch_gelu_, *lnf_;
    float *mean_, *rstd_, *lse_, *losses_, *logits_;
    void* cls_scratch_;
    bool decode_direct_;  // every layer dense or dilated: one token goes through attention_decode_cuda
    // Decoding's partials (B, pieces, H, D) and (B, pieces, H) fp32, for the layer with most pieces.
    float *part_o_ = nullptr, *part_l_ = nullptr;
    int part_pieces_ = 0;
    // Per layer, its q/k convolution's last W - 1 raw q and k rows (B, W - 1, 2C), or nullptr; and
    // a chunk's rows (B, n, 3C) after the convolution.
    std::vector<bf16*> qk_tail_;
    bf16* qk_conv_ = nullptr;
    size_t tail_elements(int l) const { return (size_t)B_ * std::max(cfg_.layer_qk_conv(l) - 1, 0) * 2 * cfg_.n_embd; }
    // Ordinary rows (B, unpack_rows_, 2, H, D) that a dilated layer's chunk attends.
    bf16* unpack_ = nullptr;
    long long unpack_rows_ = 0;
    AttnProbe* probe_ = nullptr;
    std::unique_ptr<PointerCacheCuda> ptr_;  // a model with a pointer: its keys and tokens
    // The decode step as a graph, and the allocations it was captured with.
    cudaGraphExec_t graph_ = nullptr;
    std::vector<const void*> graph_key_;
    int eager_steps_ = 0;

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

    // A layer that keeps every row: room for `len` rows per sequence (doubling unless exact).
    void grow(Layer& c, long long len, bool exact = false) {
        CacheBranch<bf16>& br = c[0];
        if (br.w != kWholeSequence || len <= br.rows) return;
        const size_t row = (size_t)2 * cfg_.n_embd;
        const long long cap = exact ? len : std::max(len, 2 * br.rows);
        bf16* kv = device_rows((size_t)B_ * cap * row, "its rows");
        cudaStream_t st = m_.stream();
        const long long held = std::min(next_pos_, br.rows);  // rows written so far
        if (held > 0)
            CUDA_CHECK(cudaMemcpy2DAsync(kv, cap * row * sizeof(bf16), br.kv, br.rows * row * sizeof(bf16),
                                         held * row * sizeof(bf16), B_, cudaMemcpyDeviceToDevice, st));
        CUDA_CHECK(cudaStreamSynchronize(st));  // the old buffer may still be read by queued kernels
        cudaFree(br.kv);
        br.kv = kv, br.rows = cap;
    }

    // Every layer on the n tokens in tokens_ from position next_pos_; lnf_ their final hidden
    // states. pos: positions 0, 1, ... on the device for a chunk; nullptr to decode one token
    // (decode_direct_) at the position in decode_pos_, with nothing but launches (so that it can
    // be captured as a graph).
    void run_layers(int n, const int* pos, cudaStream_t st) {
        const int C = cfg_.n_embd, H = cfg_.n_head, D = cfg_.head_dim(), BN = B_ * n;
        const bool decoding = pos == nullptr;
        const int* qpos = decoding ? decode_pos_ : pos + next_pos_;
        const ParamViews<bf16>& p = m_.weights();
        encoder_forward_cuda(x_, tokens_, p.wte, B_, n, C, st);
        const float scale = 1.0f / std::sqrt((float)D);
        for (int l = 0; l < cfg_.n_layer; l++) {
            const BlockParams<bf16>& w = p.blocks[l];
            // Decoding 1-2 sequences fuses each LayerNorm into the product after it and each
            // residual add into the product before it (matmul.cuh: matmul_rows_kernel,
            // kMatmulFuseRowsMax); more sequences and a chunk run them apart.
            layernorm_matmul_forward_cuda(qkv_pre_, ln_, mean_, rstd_, x_, w.ln1w, w.ln1b, w.qkvw, w.qkvb, BN, C, 3 * C, st);
            const bf16* qkv_pre = qkv_pre_;  // from here on, with a q/k convolution, the convolved rows
            if (const int W = cfg_.layer_qk_conv(l)) {
                qk_conv_forward_cuda(qk_conv_, nullptr, qkv_pre_, qk_tail_[l], w.qkconv, qpos, nullptr, B_, n, C, W, st);
                qk_conv_keep_tail_cuda(qk_tail_[l], qkv_pre_, B_, n, C, W, st);
                qkv_pre = qk_conv_;
            }
            const float theta = cfg_.layer_rope_theta(l);
            const int logn = cfg_.layer_logn_base(l);
            if (decoding && kDecodeOneLaunch && B_ <= kDecodeOneLaunchMaxBatch) {  // rope, log-n, append, attention and merge: one launch
                attention_decode_step_cuda(atty_, lse_, qkv_pre, layers_[l], decode_pos_, B_, H, D, scale, theta, logn,
                                           kDecodePieces, part_o_, part_l_, tickets_, st, w.sink, w.logn_slope);
            } else {
                rope_forward_cuda(qkv_, qkv_pre, qpos, B_, n, H, D, theta, st);  // (B, n, 3, H, D)
                logn_scale_queries_cuda(qkv_, qpos, B_, n, H, D, logn, st, w.logn_slope);
                if (decoding) {
                    cache_append_cuda(layers_[l], qkv_, decode_pos_, 1, B_, H, D, st);
                    attention_decode_cuda(atty_, lse_, qkv_, 3 * C, layers_[l], decode_pos_, B_, H, D, scale, kDecodePieces,
                                          part_o_, part_l_, st, w.sink);
                } else {
                    attend_chunk(layers_[l], cfg_.attn(l), l, n, pos, scale, st);
                }
            }
            matmul_residual_forward_cuda(x_, tmp_, atty_, w.projw, w.projb, BN, C, C, st);
            layernorm_matmul_forward_cuda(fch_gelu_, ln_, mean_, rstd_, x_, w.ln2w, w.ln2b, w.fcw, w.fcb, BN, C, 4 * C, st, fch_);
            matmul_residual_forward_cuda(x_, tmp_, fch_gelu_, w.fcprojw, w.fcprojb, BN, 4 * C, C, st);
        }
        layernorm_forward_cuda(lnf_, mean_, rstd_, x_, p.lnfw, p.lnfb, BN, C, st);
    }

    // One token per sequence: room for it, its position on the device, then the step (replaying
    // the graph, captured again whenever an allocation it uses has moved). The first step runs
    // eagerly, so that the libraries' lazy set-up (cuBLASLt's workspace, its heuristics) is done
    // before a capture, where it could not run.
    void decode_token(cudaStream_t st) {
        int pieces = 0;
        std::vector<const void*> key;
        for (Layer& c : layers_) {
            grow(c, next_pos_ + 1);
            pieces = std::max(pieces, attention_decode_pieces(c, kDecodePieces));
            for (const CacheBranch<bf16>& br : c) key.push_back(br.kv);
        }
        if (pieces > part_pieces_) {
            CUDA_CHECK(cudaStreamSynchronize(st));
            cudaFree(part_o_), cudaFree(part_l_);
            part_pieces_ = pieces;
            CUDA_CHECK(cudaMalloc(&part_o_, (size_t)B_ * pieces * cfg_.n_embd * sizeof(float)));
            CUDA_CHECK(cudaMalloc(&part_l_, (size_t)B_ * pieces * cfg_.n_head * sizeof(float)));
        }
        key.push_back(part_o_);
        for (int v : {kDecodePieces.dense_rows, kDecodePieces.dense_max, kDecodePieces.segment_rows}) key.push_back((const void*)(size_t)v);
        const int p = (int)next_pos_;
        CUDA_CHECK(cudaMemcpyAsync(decode_pos_, &p, sizeof(int), cudaMemcpyHostToDevice, st));
        if (!kUseGraphs || eager_steps_ == 0) {
            run_layers(1, nullptr, st);
            eager_steps_++;
            return;
        }
        if (!graph_ || key != graph_key_) {
            if (graph_) CUDA_CHECK(cudaGraphExecDestroy(graph_));
            graph_ = nullptr;
            cudaGraph_t g;
            CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
            run_layers(1, nullptr, st);
            CUDA_CHECK(cudaStreamEndCapture(st, &g));
            CUDA_CHECK(cudaGraphInstantiate(&graph_, g, 0));
            CUDA_CHECK(cudaGraphDestroy(g));
            graph_key_ = key;
        }
        CUDA_CHECK(cudaGraphLaunch(graph_, st));
    }

    // The probe's weights of this layer for the chunk just attended (sequence 0): the queries of
    // the rows it probes (rows lo..hi, the q third of each), the log-sum-exp and the probed keys
    // copied to the host and weighed there (model/attention_probe.h).
    void probe_layer(const CacheBranch<bf16>& br, const AttnPattern& pat, int layer, int n, int lo, int hi, float scale,
                     cudaStream_t st) {
        const int C = cfg_.n_embd, H = cfg_.n_head, D = cfg_.head_dim(), rows = hi - lo + 1;
        std::vector<bf16> hq((size_t)rows * C), hk(C);
        std::vector<float> q(hq.size()), lse((size_t)H * n), k(C);
        CUDA_CHECK(cudaMemcpy2DAsync(hq.data(), C * sizeof(bf16), qkv_ + (size_t)lo * 3 * C, 3 * C * sizeof(bf16), C * sizeof(bf16),
                                     rows, cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaMemcpyAsync(lse.data(), lse_, lse.size() * sizeof(float), cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
        for (size_t i = 0; i < hq.size(); i++) q[i] = __bfloat162float(hq[i]);
        const std::function<const float*(long long)> key_row = [&](long long j) {
            CUDA_CHECK(cudaMemcpy(hk.data(), br.kv + (size_t)j * 2 * C, C * sizeof(bf16), cudaMemcpyDeviceToHost));
            for (int c = 0; c < C; c++) k[c] = __bfloat162float(hk[c]);
            return (const float*)k.data();
        };
        probe_chunk_layer<float>(*probe_, layer, next_pos_, n, q.data(), C, lo, key_row, lse.data(), pat, H, D, scale,
                                 (int)(next_pos_ + n));
    }

    // A chunk of n queries (pos: positions 0, 1, ... on the device) against the rows before them
    // and their own, as KVCache::attend_chunk; the chunk's K and V then go into the cache.
    void attend_chunk(Layer& c, const AttnPattern& pat, int layer, int n, const int* pos, float scale, cudaStream_t st) {
        const int C = cfg_.n_embd, H = cfg_.n_head, D = cfg_.head_dim();
        const size_t row = (size_t)2 * C;
        const AttnDims dm{1, H, D, (int)(next_pos_ + n)};  // the sequence so far (model/kv_cache.h)
        const AttnQueries<bf16> qs0{nullptr, 3 * C, n, pos + next_pos_, nullptr, (int)next_pos_};
        if (pattern_cache_keeps_every_row(pat)) {  // every row: the cache itself, with the chunk appended
            grow(c, next_pos_ + n);
            cache_append_cuda(c, qkv_, pos + next_pos_, n, B_, H, D, st);
            for (int b = 0; b < B_; b++) {
                AttnQueries<bf16> qs = qs0;
                qs.q = qkv_ + (size_t)b * n * 3 * C;
                const bf16* kv = c[0].kv + (size_t)b * c[0].rows * row;
                const AttnKeys<bf16> ks{kv, kv + C, 2 * C, (int)(next_pos_ + n), pos, 0};
                attention_forward_cuda(atty_ + (size_t)b * n * C, lse_ + (size_t)b * H * n, qs, ks, pat, dm, scale, st);
            }
            add_sink(layer, n, st);
            const std::pair<int, int> probed = probe_rows(probe_, next_pos_, n);
            if (probed.first <= probed.second) probe_layer(c[0], pat, layer, n, probed.first, probed.second, scale, st);
            return;
        }
        // Dilated: the rows from the branches' earliest current segment on, unpacked, then the chunk's.
        const long long lo = kv_first_needed(pat, next_pos_), prior = next_pos_ - lo;
        if (prior > 0) {
            const long long need = kv_unpack_rows(cfg_, max_chunk_);
            if (need > unpack_rows_) {
                CUDA_CHECK(cudaStreamSynchronize(st));
                cudaFree(unpack_);
                unpack_ = device_rows((size_t)B_ * need * row, "the rows that chunks unpack into");
                CUDA_CHECK(cudaMemset(unpack_, 0, (size_t)B_ * need * row * sizeof(bf16)));  // never read, but finite
                unpack_rows_ = need;
            }
            cache_unpack_cuda(unpack_, unpack_rows_, c, lo, next_pos_, B_, H, D, st);
            for (int b = 0; b < B_; b++)  // the chunk's K and V (after q in each (3, H, D) row) after them
                CUDA_CHECK(cudaMemcpy2DAsync(unpack_ + ((size_t)b * unpack_rows_ + prior) * row, row * sizeof(bf16),
                                             qkv_ + (size_t)b * n * 3 * C + C, 3 * C * sizeof(bf16), row * sizeof(bf16), n,
                                             cudaMemcpyDeviceToDevice, st));
        }
        for (int b = 0; b < B_; b++) {
            AttnQueries<bf16> qs = qs0;
            qs.q = qkv_ + (size_t)b * n * 3 * C;
            AttnKeys<bf16> ks{qs.q + C, qs.q + 2 * C, 3 * C, n, pos + next_pos_, (int)next_pos_};  // no earlier rows
            if (prior > 0) {
                const bf16* kv = unpack_ + (size_t)b * unpack_rows_ * row;
                ks = AttnKeys<bf16>{kv, kv + C, 2 * C, (int)(prior + n), pos + lo, (int)lo};
            }
            attention_forward_cuda(atty_ + (size_t)b * n * C, lse_ + (size_t)b * H * n, qs, ks, pat, dm, scale, st);
        }
        add_sink(layer, n, st);
        cache_append_cuda(c, qkv_, pos + next_pos_, n, B_, H, D, st);
    }

    // The chunk's attention output and log-sum-exp made those of the softmax with the layer's
    // sink, where the model has sinks (KVCache::add_sink).
    void add_sink(int layer, int n, cudaStream_t st) {
        if (const bf16* sink = m_.weights().blocks[layer].sink)
            attn_sink_forward_cuda(atty_, lse_, sink, B_, n, cfg_.n_head, cfg_.head_dim(), st);
    }
};
