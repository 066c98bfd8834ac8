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

// Split decoding (flash-decoding) for a dense layer: one query row against many cached rows is
// cut into S equal pieces of keys, computed as S batch rows of the two-sided kernel (every cached
// key precedes the query, so a dense causal mask keeps them all whatever positions a piece is
// given), and the S partial results merged by log-sum-exp here.
__global__ void kv_replicate_query_kernel(bf16* out, const bf16* q, int S, int width) {  // (S, width) <- (width)
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < S * width; i += gridDim.x * blockDim.x) out[i] = q[i % width];
}
// out (H, D) bf16 = sum_s exp(L_s - L) O_s with L = log sum_s exp(L_s): O (S, H, D) fp32, L (S, H).
__global__ void kv_merge_pieces_kernel(bf16* out, float* lse_out, const float* O, const float* L, int S, int H, int D) {
    const int h = blockIdx.x, d = threadIdx.x;
    float mx = -INFINITY;
    for (int s = 0; s < S; s++) mx = fmaxf(mx, L[(size_t)s * H + h]);
    float sum = 0, acc = 0;
    if (mx != -INFINITY)
        for (int s = 0; s < S; s++) {
            const float w = __expf(L[(size_t)s * H + h] - mx);
            sum += w;
            if (d < D) acc += w * O[((size_t)s * H + h) * D + d];
        }
    if (d < D) out[(size_t)h * D + d] = __float2bfloat16(sum > 0 ? acc / sum : 0.0f);
    if (d == 0) lse_out[h] = sum > 0 ? mx + logf(sum) : -INFINITY;
}

class KVCacheCuda : public IncrementalModel {
   public:
    // Keys per piece of split decoding (64 pieces at 262K, 12 heads each); the test lowers it so
    // that short sequences take that path.
    static inline int kSplitRows = 4096;

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
        for (Layer& c : layers_) cudaFree(c.kv);
        cudaFree(split_q_), cudaFree(split_o_), cudaFree(split_l_);
    }
    KVCacheCuda(const KVCacheCuda&) = delete;

    int max_chunk() const override { return max_chunk_; }
    long long position() const override { return next_pos_; }
    long long rows(int layer) const { return layers_[layer].rows; }
    size_t bytes() const override {  // the K/V rows allocated
        size_t n = 0;
        for (const Layer& c : layers_) n += (size_t)B_ * c.cap * 2 * cfg_.n_embd * sizeof(bf16);
        return n;
    }

    // Allocates the rows of each layer that keeps every row (dense, block-sparse) for a sequence
    // of `len` tokens up front, so its cache never grows by doubling past what it needs. A dilated
    // layer grows as it goes, to at most its bound (usually less: chunks that end on segment
    // borders never hold more than the longest segment). Optional: append grows what it must.
    void reserve(long long len) {
        const size_t row = (size_t)2 * cfg_.n_embd;
        for (int l = 0; l < cfg_.n_layer; l++) {
            Layer& c = layers_[l];
            if (kv_rows_bound(cfg_.attn(l), max_chunk_) >= 0) continue;
            const long long cap = len;
            if (cap <= c.cap) continue;
            bf16* kv = device_rows((size_t)B_ * cap * row, "its rows");
            if (c.rows > 0)
                CUDA_CHECK(cudaMemcpy2DAsync(kv, cap * row * sizeof(bf16), c.kv, c.cap * row * sizeof(bf16),
                                             c.rows * row * sizeof(bf16), B_, cudaMemcpyDeviceToDevice, m_.stream()));
            CUDA_CHECK(cudaStreamSynchronize(m_.stream()));
            cudaFree(c.kv);
            c.kv = kv, c.cap = cap;
        }
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
            // One token against a long dense cache: split over the keys (one thread block per head
            // would walk them all alone).
            const bool split = n == 1 && cfg_.attn(l).kind == AttnKind::Dense && c.rows > 2 * kSplitRows;
            for (int b = 0; b < B_; b++) {
                const bf16* q = qkv_ + (size_t)b * n * 3 * C;
                const bf16* kv = c.kv + (size_t)b * c.cap * 2 * C;
                if (split) {
                    attend_split(atty_ + (size_t)b * C, lse_ + (size_t)b * H, q, kv, c.rows, c.lo, pos, cfg_.attn(l), scale, st);
                    continue;
                }
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
            cudaFree(c.kv);
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
        bf16* kv = nullptr;  // (B, cap, 2, H, D)
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
    // Split decoding: replicated query rows (S, 3C), partial O (S, H, D) fp32 and L (S, H).
    bf16* split_q_ = nullptr;
    float *split_o_ = nullptr, *split_l_ = nullptr;
    int split_cap_ = 0;

    // One sequence's single query row (q: its (3C) row at position next_pos_) against a dense
    // layer's rows kv (rows, 2C) from lo: out (H, D) and lse (H).
    void attend_split(bf16* out, float* lse, const bf16* q, const bf16* kv, long long rows, long long lo, const int* pos,
                      const AttnPattern& pattern, float scale, cudaStream_t st) {
        const int C = cfg_.n_embd, H = cfg_.n_head, D = cfg_.head_dim();
        const int S = (int)((rows + kSplitRows - 1) / kSplitRows), full = (int)(rows / kSplitRows);
        if (S > split_cap_) {
            CUDA_CHECK(cudaStreamSynchronize(st));
            cudaFree(split_q_), cudaFree(split_o_), cudaFree(split_l_);
            split_cap_ = std::max(S, 2 * split_cap_);
            CUDA_CHECK(cudaMalloc(&split_q_, (size_t)split_cap_ * 3 * C * sizeof(bf16)));
            CUDA_CHECK(cudaMalloc(&split_o_, (size_t)split_cap_ * H * D * sizeof(float)));
            CUDA_CHECK(cudaMalloc(&split_l_, (size_t)split_cap_ * H * sizeof(float)));
        }
        kv_replicate_query_kernel<<<std::min(1024, (S * 3 * C + 255) / 256), 256, 0, st>>>(split_q_, q, S, 3 * C);
        CUDA_CHECK_LAST();
        const AttnDims dm_all{S, H, D, (int)(next_pos_ + 1)};
        attention_partial_init_cuda(split_o_, split_l_, dm_all, 1, st);
        if (full > 0) {  // pieces 0 .. full-1 as batch rows: piece s's keys are rows s P .. s P + P - 1
            const AttnDims dm{full, H, D, (int)(next_pos_ + 1)};
            const AttnQueries<bf16> qs{split_q_, 3 * C, 1, pos + next_pos_, nullptr, (int)next_pos_};
            const AttnKeys<bf16> ks{kv, kv + C, 2 * C, kSplitRows, pos + lo, (int)lo};
            attention_forward_merge_cuda(split_o_, split_l_, qs, ks, pattern, dm, scale, st);
        }
        if (full < S) {  // the last, shorter piece
            const AttnDims dm{1, H, D, (int)(next_pos_ + 1)};
            const long long first = (long long)full * kSplitRows;
            const AttnQueries<bf16> qs{split_q_ + (size_t)full * 3 * C, 3 * C, 1, pos + next_pos_, nullptr, (int)next_pos_};
            const bf16* k0 = kv + (size_t)first * 2 * C;
            const AttnKeys<bf16> ks{k0, k0 + C, 2 * C, (int)(rows - first), pos + lo + first, (int)(lo + first)};
            attention_forward_merge_cuda(split_o_ + (size_t)full * H * D, split_l_ + (size_t)full * H, qs, ks, pattern, dm,
                                         scale, st);
        }
        kv_merge_pieces_kernel<<<H, std::max(32, (D + 31) / 32 * 32), 0, st>>>(out, lse, split_o_, split_l_, S, H, D);
        CUDA_CHECK_LAST();
    }

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
        if (keep + n > c.cap) {  // grow: a new, larger buffer with the kept rows at its front
            const long long cap = std::max(keep + n, 2 * c.cap);
            bf16* dst = device_rows((size_t)B_ * cap * row, "its rows");
            if (keep > 0)
                CUDA_CHECK(cudaMemcpy2DAsync(dst, cap * row * sizeof(bf16), c.kv + drop * row, c.cap * row * sizeof(bf16),
                                             keep * row * sizeof(bf16), B_, cudaMemcpyDeviceToDevice, st));
            CUDA_CHECK(cudaStreamSynchronize(st));  // the old buffer may still be read by queued kernels
            cudaFree(c.kv);
            c.kv = dst, c.cap = cap;
        } else if (drop > 0 && keep > 0) {
            // In place, front to back in pieces of at most `drop` rows: a piece's source starts where
            // its destination ends, so no copy overlaps itself (cudaMemcpy has no memmove).
            for (long long at = 0; at < keep; at += drop) {
                const long long len = std::min(drop, keep - at);
                CUDA_CHECK(cudaMemcpy2DAsync(c.kv + at * row, c.cap * row * sizeof(bf16), c.kv + (drop + at) * row,
                                             c.cap * row * sizeof(bf16), len * row * sizeof(bf16), B_,
                                             cudaMemcpyDeviceToDevice, st));
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
