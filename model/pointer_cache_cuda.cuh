// The pointer's part of the GPU's KV cache: model/pointer_cache.h on the CUDA launchers (read
// that first). It keeps the shifted keys K' (B, cap, D) bf16 (K'_0 = 0, K'_s = kp_(s-1)), the
// tokens and each position's previous occurrence of its token (B, cap) on the device, and on the
// host the tokens, those links and each token's last position (B, V), from which a chunk's rows
// find the first key holding their target.
//   losses  a chunk's queries against keys 0..t by the two-sided flash forward (for L), a warp per
//           row walking the keys that hold its target (p_copy), the mixture in the classifier
//   logits  one row: every key's score, their softmax, scattered by token into the vocabulary
//           (float atomics: the order of a sum may differ from run to run in its last bits), mixed
//           with the language model's softmax into log-probabilities
#pragma once
#include <algorithm>
#include <vector>
#include "layers/cuda/attention_flash_two_sided.h"
#include "layers/cuda/classifier.cuh"
#include "layers/cuda/matmul.cuh"
#include "layers/cuda/pointer.cuh"
#include "layers/cuda/ring_attention.cuh"
#include "model/gpt_cuda.cuh"

class PointerCacheCuda {
   public:
    PointerCacheCuda(const CudaBackend& model, int B, int max_chunk)
        : m_(model), cfg_(model.config()), B_(B), D_(cfg_.head_dim()), last_((size_t)B * cfg_.vocab_size, -1) {
        const size_t BN = (size_t)B * max_chunk, V = cfg_.vocab_size;
        CUDA_CHECK(cudaMalloc(&kp_, BN * D_ * sizeof(bf16)));
        CUDA_CHECK(cudaMalloc(&o_, (size_t)max_chunk * D_ * sizeof(bf16)));
        CUDA_CHECK(cudaMalloc(&row_f_, BN * 3 * sizeof(float)));  // gate, L, p_copy
        CUDA_CHECK(cudaMalloc(&first_key_, BN * sizeof(int)));
        CUDA_CHECK(cudaMalloc(&vocab_f_, 2 * V * sizeof(float) + 4 * sizeof(float)));  // copy, lm, two (max, sum)
    }
    ~PointerCacheCuda() {
        for (void* p : {(void*)kp_, (void*)o_, (void*)row_f_, (void*)first_key_, (void*)vocab_f_, (void*)keys_, (void*)tok_, (void*)prev_,
                        (void*)scores_})
            cudaFree(p);
    }
    PointerCacheCuda(const PointerCacheCuda&) = delete;

    // The chunk's keys (from its final states lnf (B, n, C)) and tokens (B, n, host), at positions
    // pos..pos + n - 1 of every sequence.
    void append(const bf16* lnf, const int* tokens, int n, long long pos, cudaStream_t st) {
        grow(pos + n + 1, st);
        for (int b = 0; b < B_; b++)
            for (int i = 0; i < n; i++) {
                const long long s = pos + i;
                const int v = tokens[(size_t)b * n + i];
                tok_h_[(size_t)b * cap_ + s] = v;
                int& last = last_[(size_t)b * cfg_.vocab_size + v];
                prev_h_[(size_t)b * cap_ + s] = s >= 1 ? last : -1;
                if (s >= 1) last = (int)s;
            }
        CUDA_CHECK(cudaMemcpy2DAsync(tok_ + pos, cap_ * sizeof(int), tok_h_.data() + pos, cap_ * sizeof(int), n * sizeof(int), B_,
                                     cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaMemcpy2DAsync(prev_ + pos, cap_ * sizeof(int), prev_h_.data() + pos, cap_ * sizeof(int), n * sizeof(int), B_,
                                     cudaMemcpyHostToDevice, st));
        matmul_forward_cuda(kp_, lnf, m_.weights().ptrk, nullptr, B_ * n, cfg_.n_embd, D_, st);
        pointer_cache_keys_kernel<<<ceil_div((long long)B_ * n * D_, 256), 256, 0, st>>>(keys_, kp_, B_, n, pos, cap_, D_);
        CUDA_CHECK_LAST();
        CUDA_CHECK(cudaStreamSynchronize(st));  // the host's rows may change once we return
    }

    // The mixture's losses (B, n, device) of the chunk whose final states are lnf (B, n, C), its
    // first row at position pos, against targets (B, n) on the host and the device.
    void losses(float* out, const bf16* lnf, const int* targets, const int* targets_d, int n, long long pos, void* cls_scratch,
                cudaStream_t st) {
        const int BN = B_ * n, C = cfg_.n_embd;
        float *gate = row_f_, *lse = row_f_ + BN, *pcopy = row_f_ + 2 * BN;
        head(lnf, BN, gate, st);
        const int* positions = ring_gpu::ring_positions(position_room(pos + n), st);
        const float scale = 1.0f / std::sqrt((float)D_);
        for (int b = 0; b < B_; b++) {
            const AttnQueries<bf16> qs{kp_ + (size_t)b * n * D_, D_, n, positions + pos, nullptr, (int)pos};
            const bf16* k = keys_ + (size_t)b * cap_ * D_;
            const AttnKeys<bf16> ks{k, k, D_, (int)(pos + n), positions, 0};
            attention_forward_cuda(o_, lse + (size_t)b * n, qs, ks, AttnPattern{}, AttnDims{1, 1, D_, (int)(pos + n)}, scale, st);
        }
        std::vector<int> first(BN, -1);
        for (int b = 0; b < B_; b++)
            for (int i = 0; i < n; i++) {
                const int y = targets[(size_t)b * n + i];
                if (y < 0) continue;
                int s = last_[(size_t)b * cfg_.vocab_size + y];
                while (s > pos + i) s = prev_h_[(size_t)b * cap_ + s];
                first[(size_t)b * n + i] = s;
            }
        CUDA_CHECK(cudaMemcpyAsync(first_key_, first.data(), BN * sizeof(int), cudaMemcpyHostToDevice, st));
        const int blocks = ceil_div(BN, kPointerWarps);
        if (D_ == 64)
            pointer_cache_gather_kernel<64><<<blocks, 32 * kPointerWarps, 0, st>>>(pcopy, kp_, keys_, lse, first_key_, prev_, B_, n, cap_, scale);
        else
            pointer_cache_gather_kernel<128><<<blocks, 32 * kPointerWarps, 0, st>>>(pcopy, kp_, keys_, lse, first_key_, prev_, B_, n, cap_, scale);
        CUDA_CHECK_LAST();
        classifier_forward_backward_cuda(out, nullptr, nullptr, lnf, m_.weights().wte, targets_d, BN, C, cfg_.vocab_size, 0.0f,
                                         cls_scratch, st, PointerMixCuda{gate, pcopy, nullptr});
        CUDA_CHECK(cudaStreamSynchronize(st));  // `first` is freed on return
    }

    // log p (V, device) of the mixture at the row whose final state is lnf_row (C), at position t of sequence b.
    void logits(float* out, const bf16* lnf_row, int b, long long t, cudaStream_t st) {
        const int V = cfg_.vocab_size;
        float *copy = vocab_f_, *lm = vocab_f_ + V, *stats = vocab_f_ + 2 * V;
        head(lnf_row, 1, row_f_, st);
        const float scale = 1.0f / std::sqrt((float)D_);
        const bf16* k = keys_ + (size_t)b * cap_ * D_;
        const int blocks = ceil_div(t + 1, kPointerWarps);
        if (D_ == 64) pointer_cache_scores_kernel<64><<<blocks, 32 * kPointerWarps, 0, st>>>(scores_, kp_, k, t, scale);
        else pointer_cache_scores_kernel<128><<<blocks, 32 * kPointerWarps, 0, st>>>(scores_, kp_, k, t, scale);
        CUDA_CHECK_LAST();
        pointer_softmax_stats_kernel<<<1, 1024, 0, st>>>(stats, scores_, t + 1);
        CUDA_CHECK(cudaMemsetAsync(copy, 0, (size_t)V * sizeof(float), st));
        if (t >= 1) pointer_cache_scatter_kernel<<<ceil_div(t, 256), 256, 0, st>>>(copy, scores_, tok_ + (size_t)b * cap_, stats, t);
        logits_cuda(lm, lnf_row, m_.weights().wte, cfg_.n_embd, V, st);
        pointer_softmax_stats_kernel<<<1, 1024, 0, st>>>(stats + 2, lm, V);
        pointer_cache_mix_kernel<<<ceil_div(V, 256), 256, 0, st>>>(out, lm, copy, stats + 2, row_f_, V);
        CUDA_CHECK_LAST();
    }

    // Sequence b becomes a copy of sequence from[b] of src (len positions each).
    void gather(const PointerCacheCuda& src, const std::vector<int>& from, long long len, cudaStream_t st) {
        grow(len + 1, st);
        const size_t V = cfg_.vocab_size;
        for (int b = 0; b < B_; b++) {
            const size_t f = from[b];
            CUDA_CHECK(cudaMemcpyAsync(keys_ + (size_t)b * cap_ * D_, src.keys_ + f * src.cap_ * D_, (size_t)(len + 1) * D_ * sizeof(bf16),
                                       cudaMemcpyDeviceToDevice, st));
            CUDA_CHECK(cudaMemcpyAsync(tok_ + (size_t)b * cap_, src.tok_ + f * src.cap_, len * sizeof(int), cudaMemcpyDeviceToDevice, st));
            CUDA_CHECK(cudaMemcpyAsync(prev_ + (size_t)b * cap_, src.prev_ + f * src.cap_, len * sizeof(int), cudaMemcpyDeviceToDevice, st));
            std::copy_n(src.tok_h_.begin() + f * src.cap_, len, tok_h_.begin() + (size_t)b * cap_);
            std::copy_n(src.prev_h_.begin() + f * src.cap_, len, prev_h_.begin() + (size_t)b * cap_);
            std::copy_n(src.last_.begin() + f * V, V, last_.begin() + b * V);
        }
        CUDA_CHECK(cudaStreamSynchronize(st));
    }

    size_t bytes() const { return (size_t)B_ * cap_ * (D_ * sizeof(bf16) + 2 * sizeof(int)); }

   private:
    const CudaBackend& m_;
    GPTConfig cfg_;
    int B_, D_;
    long long cap_ = 0;                        // key rows each sequence has room for
    bf16 *keys_ = nullptr, *kp_ = nullptr, *o_ = nullptr;  // K' (B, cap, D); a chunk's kp or q (B, n, D); O (n, D)
    int *tok_ = nullptr, *prev_ = nullptr, *first_key_ = nullptr;
    float *row_f_ = nullptr, *vocab_f_ = nullptr, *scores_ = nullptr;
    std::vector<int> tok_h_, prev_h_, last_;  // (B, cap), (B, cap), (B, V)

    // Room for `rows` key rows per sequence (doubling), the rows held kept.
    void grow(long long rows, cudaStream_t st) {
        if (rows <= cap_) return;
        const long long cap = std::max(rows, 2 * cap_);
        bf16* keys = nullptr;
        int *tok = nullptr, *prev = nullptr;
        float* scores = nullptr;
        CUDA_CHECK(cudaMalloc(&keys, (size_t)B_ * cap * D_ * sizeof(bf16)));
        CUDA_CHECK(cudaMalloc(&tok, (size_t)B_ * cap * sizeof(int)));
        CUDA_CHECK(cudaMalloc(&prev, (size_t)B_ * cap * sizeof(int)));
        CUDA_CHECK(cudaMalloc(&scores, (size_t)cap * sizeof(float)));
        if (cap_ > 0) {
            CUDA_CHECK(cudaMemcpy2DAsync(keys, cap * D_ * sizeof(bf16), keys_, cap_ * D_ * sizeof(bf16), cap_ * D_ * sizeof(bf16), B_,
                                         cudaMemcpyDeviceToDevice, st));
            CUDA_CHECK(cudaMemcpy2DAsync(tok, cap * sizeof(int), tok_, cap_ * sizeof(int), cap_ * sizeof(int), B_, cudaMemcpyDeviceToDevice, st));
            CUDA_CHECK(cudaMemcpy2DAsync(prev, cap * sizeof(int), prev_, cap_ * sizeof(int), cap_ * sizeof(int), B_, cudaMemcpyDeviceToDevice, st));
        }
        CUDA_CHECK(cudaStreamSynchronize(st));
        for (void* p : {(void*)keys_, (void*)tok_, (void*)prev_, (void*)scores_}) cudaFree(p);
        keys_ = keys, tok_ = tok, prev_ = prev, scores_ = scores;
        std::vector<int> th((size_t)B_ * cap, 0), ph((size_t)B_ * cap, -1);
        for (int b = 0; b < B_ && cap_ > 0; b++) {
            std::copy_n(tok_h_.begin() + (size_t)b * cap_, cap_, th.begin() + (size_t)b * cap);
            std::copy_n(prev_h_.begin() + (size_t)b * cap_, cap_, ph.begin() + (size_t)b * cap);
        }
        tok_h_.swap(th), prev_h_.swap(ph), cap_ = cap;
    }

    // Device positions 0, 1, ... with room for `n` (shared with the cache's chunks).
    static size_t position_room(long long n) {
        size_t want = 1024;
        while (want < (size_t)n) want *= 2;
        return want;
    }

    // The rows' queries (into kp_) and gate logits (gate, device) from their final states (rows, C).
    void head(const bf16* lnf, int rows, float* gate, cudaStream_t st) {
        const ParamViews<bf16>& p = m_.weights();
        matmul_forward_cuda(kp_, lnf, p.ptrq, nullptr, rows, cfg_.n_embd, D_, st);
        pointer_gate_forward_cuda(gate, lnf, p.ptrgw, p.ptrgb, rows, cfg_.n_embd, st);
    }
};
