// The GPT on the GPU: the same model as model/gpt.h, composed from the CUDA launchers in
// layers/cuda/, behind the ModelBackend interface. bf16 weights and activations; fp32 master
// weights, gradients and AdamW moments. Launcher conventions: backward launchers overwrite
// activation gradients, except layernorm_backward which adds into the residual stream's
// gradient; parameter gradients (fp32) are always added into.
#pragma once
#include <string>
#include <vector>
#include "layers/cuda/adamw.cuh"
#include "layers/cuda/attention_cudnn.h"
#include "layers/cuda/attention_flash.h"
#include "layers/cuda/classifier.cuh"
#include "layers/cuda/common.cuh"
#include "layers/cuda/encoder.cuh"
#include "layers/cuda/gelu.cuh"
#include "layers/cuda/layernorm.cuh"
#include "layers/cuda/matmul.cuh"
#include "layers/cuda/ring_attention.cuh"
#include "layers/cuda/residual.cuh"
#include "layers/cuda/rope.cuh"
#include "model/backend.h"

__global__ void float_to_bf16_kernel(bf16* out, const float* in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16(in[i]);
}

enum class AttnBackend { Flash, Cudnn };

// Device memory in one place, so its size is known (and checked) before anything is allocated.
class DeviceArena {
   public:
    // Reserves `bytes` (rounded up to 256) for a later pointer; returns its offset.
    size_t reserve(size_t bytes) {
        const size_t at = size_;
        size_ += (bytes + 255) / 256 * 256;
        return at;
    }
    size_t size() const { return size_; }
    void allocate(const char* what, const char* hint) {
        size_t free_b = 0, total_b = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        if (size_ > free_b)
            fatal("out of GPU memory: %s needs %.2f GiB but %.2f GiB of %.2f GiB are free: %s", what, size_ / 1073741824.0,
                  free_b / 1073741824.0, total_b / 1073741824.0, hint);
        CUDA_CHECK(cudaMalloc(&base_, size_));
    }
    template <typename T>
    T* at(size_t offset) const { return reinterpret_cast<T*>(static_cast<char*>(base_) + offset); }
    void release() {
        if (base_) cudaFree(base_);
        base_ = nullptr;
        size_ = 0;
    }
    ~DeviceArena() { release(); }

   private:
    void* base_ = nullptr;
    size_t size_ = 0;
};

// Reproducibility (audited kernel by kernel over everything a training step runs: forward,
// loss, backward, gradient norm, AdamW; layers/cuda/*.cuh).
//
// With deterministic = true (train --deterministic; flash attention only): a step is a pure
// function of (weights, AdamW moments, batch, step number, lr), bit for bit, on the same GPU
// model (same SM count: H100 SXM and H100 PCIe are different GPUs here), the same binary and
// the same CUDA libraries (cuBLASLt; CUB is compiled in). So two runs from the same seed give
// identical losses, gradient norms and weights, and a run resumed from a checkpoint (fp32
// master weights and moments; the bf16 copy is re-rounded from the master exactly as AdamW
// rounds it) continues exactly as the uninterrupted run would have. Checked on an H100 by
// tests/gpu/test_model.cu (two runs, memcmp) and tests/gpu/test_resume_gpu.sh (kill + resume).
// Why each piece is deterministic:
//   - flash attention forward (dense and dilated): no atomics, fixed tile order;
//   - flash attention backward: flash::kDeterministicBackwardVariant (mma.sync dK/dV pass, then
//     a separate query-parallel dQ pass: no atomics; dense and dilated, D = 64 and 128); the
//     dilated branches add into dQ/dK/dV in launch order on one stream;
//   - cuBLASLt products (matmul, LM head): the algorithm is the heuristic's first choice for a
//     key of shapes, layouts, epilogue and pointer alignments (matmul.cuh), asked once per
//     process. The heuristic estimates rather than times, so on one GPU model and library
//     version it answers the same key the same way in every process (an assumption the GPU
//     resume test checks), and the key is the same: every buffer sits at an arena offset
//     (DeviceArena, 256-byte aligned) fixed by the config, batch and window. cuBLAS documents
//     bit-identical results run to run on GPUs of the same architecture and SM count with the
//     same library version when one stream is active or cublasLtMatmul gets a caller-owned
//     workspace, both true here; that covers whatever it picks, split-K included. It promises
//     nothing across GPU models or library versions;
//   - matmul dbias, layernorm dweight/dbias, gradient norm: fixed two-stage reductions, no
//     atomics, grids a function of the shapes only;
//   - encoder (wte) backward: stable radix sort, then per-token sums in position order (its
//     only atomic is an integer counter of a list whose order does not matter);
//   - cross-entropy, GELU, RoPE, residual, AdamW, bf16 casts: elementwise or per-row with a
//     fixed order.
// Without it (the default): everything above holds except the flash attention backward, whose
// default (wgmma) kernels and dilated path add dQ with fp32 atomicAdd in whatever order blocks
// finish. dQ then differs in its last bits from run to run, which reaches every upstream
// gradient through dqkv and the residual stream: losses agree closely at first but are not
// bit-identical, and runs drift apart. The forward (loss at given weights) is always
// deterministic. cuDNN's SDPA backward (--attention cudnn) accumulates dQ in fp32 in an order
// cuDNN does not promise (no determinism knob in the graph built here), so deterministic mode
// refuses it. Never bit-identical: across GPU models (cuBLASLt picks other algorithms), across
// library versions, or against the CPU backend (bf16 here; tests compare within tolerances).
class CudaBackend : public ModelBackend {
   public:
    CudaBackend(const GPTConfig& cfg, AttnBackend attn, bool deterministic = false)
        : cfg_(cfg), attn_(attn), deterministic_(deterministic), layout_(param_layout(cfg)) {
        if (deterministic_ && attn_ == AttnBackend::Cudnn)
            fatal("--deterministic needs --attention flash: cuDNN's attention backward is not bit-reproducible");
        n_ = layout_.back().offset + layout_.back().size;
        CUDA_CHECK(cudaStreamCreate(&stream_));
        // Parameters and optimizer state: bf16 weights, fp32 master weights, grads, m, v.
        const size_t o_param = state_.reserve(n_ * sizeof(bf16)), o_master = state_.reserve(n_ * 4),
                     o_grad = state_.reserve(n_ * 4), o_m = state_.reserve(n_ * 4), o_v = state_.reserve(n_ * 4),
                     o_norm = state_.reserve(256), o_red = state_.reserve(reduce_scratch_bytes());
        state_.allocate("the model's weights and optimizer state", "use a smaller model (--layers, --width)");
        param_ = state_.at<bf16>(o_param), master_ = state_.at<float>(o_master), grad_ = state_.at<float>(o_grad);
        m_ = state_.at<float>(o_m), v_ = state_.at<float>(o_v), scalars_ = state_.at<float>(o_norm);
        reduce_scratch_ = state_.at<float>(o_red);
        CUDA_CHECK(cudaMemset(m_, 0, n_ * 4));
        CUDA_CHECK(cudaMemset(v_, 0, n_ * 4));
        CUDA_CHECK(cudaMemset(grad_, 0, n_ * 4));
        p_ = param_views(param_, cfg_);
        g_ = param_views(grad_, cfg_);
    }
    ~CudaBackend() override {
        acts_.release();
        state_.release();
        cudaStreamDestroy(stream_);
    }

    std::string name() const override {
        cudaDeviceProp prop;
        int dev = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
        return std::string("cuda (") + prop.name + ", attention " + (attn_ == AttnBackend::Flash ? "flash" : "cudnn") +
               (deterministic_ ? ", deterministic" : "") + ")";
    }
    const GPTConfig& config() const override { return cfg_; }
    size_t num_params() const override { return n_; }
    bool deterministic() const { return deterministic_; }

    void init_weights(uint64_t seed) {
        std::vector<float> host(n_);
        init_gpt_weights(host.data(), cfg_, seed);
        set_params(host.data());
    }

    float forward(const int* inputs, const int* targets, const int* doc_start, int B, int T, const int* positions) override {
        upload_batch(inputs, targets, doc_start, B, T, positions);
        run_forward();
        if (!targets) return 0.0f;
        classifier_forward_backward_cuda(losses_, nullptr, nullptr, lnf_, p_.wte, targets_d_, B_ * T_, cfg_.n_embd,
                                         cfg_.vocab_size, 0.0f, classifier_scratch_, stream_);
        return mean_loss();
    }

    float forward_backward(const int* inputs, const int* targets, const int* doc_start, int B, int T,
                           const int* positions = nullptr) override {
        upload_batch(inputs, targets, doc_start, B, T, positions);
        run_forward();
        zero_grad();
        // The LM head runs once: loss, dlnf and dwte together.
        classifier_forward_backward_cuda(losses_, dln_, g_.wte, lnf_, p_.wte, targets_d_, B_ * T_, cfg_.n_embd,
                                         cfg_.vocab_size, loss_scale(), classifier_scratch_, stream_);
        run_backward_from_dlnf();
        return mean_loss();
    }

    void reserve(int B, int T) override { resize(B, T); }
    void zero_grad() override { CUDA_CHECK(cudaMemsetAsync(grad_, 0, n_ * 4, stream_)); }

    void backward() override {
        if (!has_targets_) fatal("internal: backward() needs a forward() with targets");
        classifier_forward_backward_cuda(losses_, dln_, g_.wte, lnf_, p_.wte, targets_d_, B_ * T_, cfg_.n_embd,
                                         cfg_.vocab_size, loss_scale(), classifier_scratch_, stream_);
        run_backward_from_dlnf();
    }

    void set_loss_count(int n) override { loss_count_ = n; }
    double last_loss_sum() const override { return last_loss_sum_; }
    void set_context_parallel(Comm* comm) override {
        if (comm && attn_ != AttnBackend::Flash) fatal("--cp needs --attention flash: the ring runs our kernels");
        cp_ = comm;
    }
    // A communicator with a stream (NCCL) runs the sum there, ordered after the backward by an
    // event; one without (the in-process one of the tests) gets the finished gradients.
    void all_reduce_grads(Comm& comm) override {
        cudaStream_t cs = (cudaStream_t)comm.stream();
        if (!cs) {
            CUDA_CHECK(cudaStreamSynchronize(stream_));
            comm.all_reduce_sum(grad_, n_);
            return;
        }
        cudaEvent_t ev;
        CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventRecord(ev, stream_));
        CUDA_CHECK(cudaStreamWaitEvent(cs, ev, 0));
        comm.all_reduce_sum(grad_, n_);
        CUDA_CHECK(cudaEventRecord(ev, cs));
        CUDA_CHECK(cudaStreamWaitEvent(stream_, ev, 0));
        CUDA_CHECK(cudaEventDestroy(ev));
    }

    double grad_norm() override {
        grad_norm_squared_cuda(scalars_, grad_, n_, reduce_scratch_, stream_);
        float sq = 0;
        CUDA_CHECK(cudaMemcpyAsync(&sq, scalars_, 4, cudaMemcpyDeviceToHost, stream_));
        CUDA_CHECK(cudaStreamSynchronize(stream_));
        return std::sqrt((double)sq);
    }

    void adamw_step(float lr, float grad_scale, const AdamWConfig& o, int step) override {
        CUDA_CHECK(cudaMemcpyAsync(scalars_ + 1, &grad_scale, 4, cudaMemcpyHostToDevice, stream_));
        for (const ParamTensor& t : layout_)
            adamw_update_cuda(master_ + t.offset, param_ + t.offset, m_ + t.offset, v_ + t.offset, grad_ + t.offset, t.size,
                              lr, o.beta1, o.beta2, o.eps, t.decay ? o.weight_decay : 0.0f, step, scalars_ + 1, stream_);
    }

    void logits_at(float* out, int b, int t) override {
        logits_cuda(logits_d_, lnf_ + ((size_t)b * T_ + t) * cfg_.n_embd, p_.wte, cfg_.n_embd, cfg_.vocab_size, stream_);
        CUDA_CHECK(cudaMemcpyAsync(out, logits_d_, (size_t)cfg_.vocab_size * 4, cudaMemcpyDeviceToHost, stream_));
        CUDA_CHECK(cudaStreamSynchronize(stream_));
    }

    void get_params(float* dst) override { copy_to_host(dst, master_); }
    void set_params(const float* src) override {
        CUDA_CHECK(cudaMemcpy(master_, src, n_ * 4, cudaMemcpyHostToDevice));
        float_to_bf16_kernel<<<1024, 256, 0, stream_>>>(param_, master_, n_);
        CUDA_CHECK_LAST();
        CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    void get_opt_state(float* m, float* v) override {
        copy_to_host(m, m_);
        copy_to_host(v, v_);
    }
    void set_opt_state(const float* m, const float* v) override {
        CUDA_CHECK(cudaMemcpy(m_, m, n_ * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(v_, v, n_ * 4, cudaMemcpyHostToDevice));
    }
    // fp32 copy of the parameter gradients (tests compare them with the CPU's).
    void get_grads(float* dst) { copy_to_host(dst, grad_); }
    // Bytes of activation memory for (B, T): what `--batch` and `--seq-len` cost.
    size_t activation_bytes() const { return acts_.size(); }

   private:
    GPTConfig cfg_;
    AttnBackend attn_;
    bool deterministic_;
    std::vector<ParamTensor> layout_;
    size_t n_ = 0;
    cudaStream_t stream_;
    DeviceArena state_, acts_;
    bf16* param_;
    float *master_, *grad_, *m_, *v_, *scalars_, *reduce_scratch_;
    ParamViews<bf16> p_;
    ParamViews<float> g_;

    // Activations, sized for (B_, T_).
    int B_ = 0, T_ = 0, counted_ = 0;
    Comm* cp_ = nullptr;       // context parallel: attention over this ring
    int loss_count_ = 0;       // > 0: the mean loss's denominator over all ranks
    double last_loss_sum_ = 0;
    float loss_scale() const {
        const int n = loss_count_ > 0 ? loss_count_ : counted_;
        return n ? 1.0f / n : 0.0f;
    }
    bool has_targets_ = false;
    std::vector<float> losses_host_;
    int *tokens_d_, *targets_d_, *pos_d_, *doc_start_d_;
    bool use_doc_start_ = false;
    struct Layer {
        bf16 *ln1, *qkv, *atty, *resid_attn, *ln2, *fch_pre, *fch_gelu, *resid_out;
        float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *lse;
    };
    std::vector<Layer> layers_;
    bf16 *encoded_, *lnf_, *tmp_, *qkv_pre_;
    float *lnf_mean_, *lnf_rstd_, *losses_, *logits_d_;
    // Backward scratch.
    bf16 *dresid_, *dln_, *dqkv_, *datty_, *dfch_;
    void *classifier_scratch_, *ln_scratch_, *attn_workspace_;

    size_t reduce_scratch_bytes() const { return grad_norm_squared_scratch_bytes(); }

    void copy_to_host(float* dst, const float* src) {
        CUDA_CHECK(cudaStreamSynchronize(stream_));
        CUDA_CHECK(cudaMemcpy(dst, src, n_ * 4, cudaMemcpyDeviceToHost));
    }

    AttnShape attn_shape() const { return {B_, T_, cfg_.n_head, cfg_.head_dim(), 3 * cfg_.n_embd}; }

    // Activations are laid out for a capacity (cap_B_, cap_T_); smaller batches reuse them.
    // Growing T doubles the capacity, so generation (T + 1 per token) reallocates rarely.
    int cap_B_ = 0, cap_T_ = 0;
    void resize(int B, int T) {
        if (B <= cap_B_ && T <= cap_T_) {
            B_ = B, T_ = T;
            return;
        }
        acts_.release();
        const int newB = std::max(B, cap_B_), newT = T <= cap_T_ ? cap_T_ : std::max(T, std::min(2 * cap_T_, 1 << 20));
        cap_B_ = B_ = newB, cap_T_ = T_ = newT;
        const size_t BT = (size_t)newB * newT, C = cfg_.n_embd, H = cfg_.n_head, L = cfg_.n_layer, V = cfg_.vocab_size;
        std::vector<size_t> off;
        auto bf = [&](size_t n) { off.push_back(acts_.reserve(n * sizeof(bf16))); };
        auto f32 = [&](size_t n) { off.push_back(acts_.reserve(n * 4)); };
        auto i32 = [&](size_t n) { off.push_back(acts_.reserve(n * 4)); };
        i32(BT), i32(BT), i32(newT), i32(BT);                    // tokens, targets, pos, doc_start
        for (size_t l = 0; l < L; l++) {
            bf(BT * C), bf(BT * 3 * C), bf(BT * C), bf(BT * C), bf(BT * C), bf(BT * 4 * C), bf(BT * 4 * C), bf(BT * C);
            f32(BT), f32(BT), f32(BT), f32(BT), f32(BT * H);
        }
        bf(BT * C), bf(BT * C), bf(BT * 4 * C), bf(BT * 3 * C);  // encoded, lnf, tmp, qkv_pre
        f32(BT), f32(BT), f32(BT), f32(V);                       // lnf mean/rstd, losses, logits
        bf(BT * C), bf(BT * C), bf(BT * 3 * C), bf(BT * C), bf(BT * 4 * C);  // dresid, dln, dqkv, datty, dfch
        const AttnShape s = attn_shape();
        const size_t attn_ws = attn_ == AttnBackend::Flash ? attention_backward_workspace_bytes(s) : attention_cudnn_workspace_bytes(s);
        off.push_back(acts_.reserve(classifier_scratch_bytes((int)BT, (int)V)));
        off.push_back(acts_.reserve(layernorm_backward_scratch_bytes((int)BT, (int)C)));
        off.push_back(acts_.reserve(attn_ws));
        char hint[160];
        snprintf(hint, sizeof hint, "lower --batch (now %d) or --seq-len (now %d)", B, T);
        acts_.allocate("activations for this batch", hint);
        size_t k = 0;
        auto next_i = [&]() { return acts_.at<int>(off[k++]); };
        auto next_b = [&]() { return acts_.at<bf16>(off[k++]); };
        auto next_f = [&]() { return acts_.at<float>(off[k++]); };
        tokens_d_ = next_i(), targets_d_ = next_i(), pos_d_ = next_i(), doc_start_d_ = next_i();
        layers_.assign(L, Layer{});
        for (Layer& a : layers_) {
            a.ln1 = next_b(), a.qkv = next_b(), a.atty = next_b(), a.resid_attn = next_b(), a.ln2 = next_b();
            a.fch_pre = next_b(), a.fch_gelu = next_b(), a.resid_out = next_b();
            a.ln1_mean = next_f(), a.ln1_rstd = next_f(), a.ln2_mean = next_f(), a.ln2_rstd = next_f(), a.lse = next_f();
        }
        encoded_ = next_b(), lnf_ = next_b(), tmp_ = next_b(), qkv_pre_ = next_b();
        lnf_mean_ = next_f(), lnf_rstd_ = next_f(), losses_ = next_f(), logits_d_ = next_f();
        dresid_ = next_b(), dln_ = next_b(), dqkv_ = next_b(), datty_ = next_b(), dfch_ = next_b();
        classifier_scratch_ = acts_.at<void>(off[k++]);
        ln_scratch_ = acts_.at<void>(off[k++]);
        attn_workspace_ = acts_.at<void>(off[k++]);
        losses_host_.resize(BT);
        B_ = B, T_ = T;
    }

    void upload_batch(const int* inputs, const int* targets, const int* doc_start, int B, int T, const int* positions) {
        // Before anything changes: an id past the vocabulary would index wte (encoder) and the
        // logits (the classifier reads logit[target]) out of bounds on the device. Targets < 0
        // are ignored positions. O(B*T) on the host, as the CPU model does (model/gpt.h).
        check_token_ids(inputs, targets, B, T, cfg_.vocab_size);
        resize(B, T);
        const size_t BT = (size_t)B * T;
        losses_host_.resize(BT);
        std::vector<int> pos(T);
        for (int t = 0; t < T; t++) pos[t] = positions ? positions[t] : t;
        if (cp_ && pos != RingPlan(cfg_.attn(0), cp_->size(), T * cp_->size()).positions(cp_->rank()))
            fatal("internal: a context-parallel forward needs the ring plan's positions (RingPlan::positions)");
        CUDA_CHECK(cudaMemcpyAsync(tokens_d_, inputs, BT * 4, cudaMemcpyHostToDevice, stream_));
        CUDA_CHECK(cudaMemcpyAsync(pos_d_, pos.data(), T * 4, cudaMemcpyHostToDevice, stream_));
        use_doc_start_ = doc_start != nullptr;
        if (doc_start) CUDA_CHECK(cudaMemcpyAsync(doc_start_d_, doc_start, BT * 4, cudaMemcpyHostToDevice, stream_));
        has_targets_ = targets != nullptr;
        counted_ = 0;
        if (targets) {
            for (size_t i = 0; i < BT; i++) counted_ += targets[i] >= 0;
            CUDA_CHECK(cudaMemcpyAsync(targets_d_, targets, BT * 4, cudaMemcpyHostToDevice, stream_));
        }
        // The host buffers may change once we return: wait for the copies.
        CUDA_CHECK(cudaStreamSynchronize(stream_));
    }

    void attention_forward(bf16* out, float* lse, const bf16* qkv, const AttnPattern& pattern) {
        const int C = cfg_.n_embd;
        const float scale = 1.0f / std::sqrt((float)cfg_.head_dim());
        const int* ds = use_doc_start_ ? doc_start_d_ : nullptr;
        if (cp_)
            ring_attention_forward_cuda(*cp_, RingPlan(pattern, cp_->size(), T_ * cp_->size()), out, lse, qkv, qkv + C,
                                        qkv + 2 * C, 3 * C, ds, B_, cfg_.n_head, cfg_.head_dim(), scale, stream_);
        else if (attn_ == AttnBackend::Flash)
            attention_forward_cuda(out, lse, qkv, qkv + C, qkv + 2 * C, pos_d_, ds, pattern, attn_shape(), scale, stream_);
        else
            attention_forward_cudnn(out, lse, qkv, qkv + C, qkv + 2 * C, pos_d_, ds, pattern, attn_shape(), scale, stream_);
    }
    void attention_backward(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                            const AttnPattern& pattern) {
        const int C = cfg_.n_embd;
        const float scale = 1.0f / std::sqrt((float)cfg_.head_dim());
        const int* ds = use_doc_start_ ? doc_start_d_ : nullptr;
        float* ws = static_cast<float*>(attn_workspace_);
        // Deterministic: the mma.sync pair with a separate dQ pass (no fp32 atomics); its
        // workspace (row statistics only) fits in attention_backward_workspace_bytes(s).
        if (cp_)
            ring_attention_backward_cuda(*cp_, RingPlan(pattern, cp_->size(), T_ * cp_->size()), dqkv, dqkv + C,
                                         dqkv + 2 * C, dout, out, lse, qkv, qkv + C, qkv + 2 * C, 3 * C, ds, B_,
                                         cfg_.n_head, cfg_.head_dim(), scale, stream_);
        else if (attn_ == AttnBackend::Flash)
            attention_backward_cuda_variant(deterministic_ ? flash::kDeterministicBackwardVariant : 0, dqkv, dqkv + C,
                                            dqkv + 2 * C, dout, out, lse, qkv, qkv + C, qkv + 2 * C, pos_d_, ds, pattern,
                                            attn_shape(), scale, ws, stream_);
        else
            attention_backward_cudnn(dqkv, dqkv + C, dqkv + 2 * C, dout, out, lse, qkv, qkv + C, qkv + 2 * C, pos_d_, ds,
                                     pattern, attn_shape(), scale, ws, stream_);
    }

    void run_forward() {
        const int C = cfg_.n_embd, BT = B_ * T_;
        encoder_forward_cuda(encoded_, tokens_d_, p_.wte, B_, T_, C, stream_);
        const bf16* x = encoded_;
        for (int l = 0; l < cfg_.n_layer; l++) {
            Layer& a = layers_[l];
            const BlockParams<bf16>& w = p_.blocks[l];
            layernorm_forward_cuda(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln1w, w.ln1b, BT, C, stream_);
            matmul_forward_cuda(qkv_pre_, a.ln1, w.qkvw, w.qkvb, BT, C, 3 * C, stream_);
            rope_forward_cuda(a.qkv, qkv_pre_, pos_d_, B_, T_, cfg_.n_head, cfg_.head_dim(), cfg_.rope_theta, stream_);
            attention_forward(a.atty, a.lse, a.qkv, cfg_.attn(l));
            matmul_forward_cuda(tmp_, a.atty, w.projw, w.projb, BT, C, C, stream_);
            residual_forward_cuda(a.resid_attn, x, tmp_, (size_t)BT * C, stream_);
            layernorm_forward_cuda(a.ln2, a.ln2_mean, a.ln2_rstd, a.resid_attn, w.ln2w, w.ln2b, BT, C, stream_);
            matmul_forward_cuda(a.fch_gelu, a.ln2, w.fcw, w.fcb, BT, C, 4 * C, stream_, a.fch_pre);
            matmul_forward_cuda(tmp_, a.fch_gelu, w.fcprojw, w.fcprojb, BT, 4 * C, C, stream_);
            residual_forward_cuda(a.resid_out, a.resid_attn, tmp_, (size_t)BT * C, stream_);
            x = a.resid_out;
        }
        layernorm_forward_cuda(lnf_, lnf_mean_, lnf_rstd_, x, p_.lnfw, p_.lnfb, BT, C, stream_);
    }

    // dln_ holds d(lnf output); adds every parameter's gradient into grad_.
    void run_backward_from_dlnf() {
        const int C = cfg_.n_embd, BT = B_ * T_;
        const bf16* x_last = cfg_.n_layer ? layers_.back().resid_out : encoded_;
        CUDA_CHECK(cudaMemsetAsync(dresid_, 0, (size_t)BT * C * sizeof(bf16), stream_));
        float* ln_scratch = static_cast<float*>(ln_scratch_);
        layernorm_backward_cuda(dresid_, g_.lnfw, g_.lnfb, dln_, x_last, p_.lnfw, lnf_mean_, lnf_rstd_, BT, C, ln_scratch, stream_);
        for (int l = cfg_.n_layer - 1; l >= 0; l--) {
            Layer& a = layers_[l];
            const BlockParams<bf16>& w = p_.blocks[l];
            BlockParams<float>& dw = g_.blocks[l];
            const bf16* x_in = l == 0 ? encoded_ : layers_[l - 1].resid_out;
            // MLP; the GELU's backward rides on the fcproj matmul (pre_gelu).
            matmul_backward_cuda(dfch_, dw.fcprojw, dw.fcprojb, dresid_, a.fch_gelu, w.fcprojw, BT, 4 * C, C, stream_, a.fch_pre);
            matmul_backward_cuda(dln_, dw.fcw, dw.fcb, dfch_, a.ln2, w.fcw, BT, C, 4 * C, stream_);
            layernorm_backward_cuda(dresid_, dw.ln2w, dw.ln2b, dln_, a.resid_attn, w.ln2w, a.ln2_mean, a.ln2_rstd, BT, C, ln_scratch, stream_);
            // Attention.
            matmul_backward_cuda(datty_, dw.projw, dw.projb, dresid_, a.atty, w.projw, BT, C, C, stream_);
            attention_backward(dqkv_, datty_, a.atty, a.lse, a.qkv, cfg_.attn(l));
            rope_backward_cuda(dqkv_, dqkv_, pos_d_, B_, T_, cfg_.n_head, cfg_.head_dim(), cfg_.rope_theta, stream_);
            matmul_backward_cuda(dln_, dw.qkvw, dw.qkvb, dqkv_, a.ln1, w.qkvw, BT, C, 3 * C, stream_);
            layernorm_backward_cuda(dresid_, dw.ln1w, dw.ln1b, dln_, x_in, w.ln1w, a.ln1_mean, a.ln1_rstd, BT, C, ln_scratch, stream_);
        }
        encoder_backward_cuda(g_.wte, dresid_, tokens_d_, B_, T_, C, stream_);
    }

    float mean_loss() {
        CUDA_CHECK(cudaMemcpyAsync(losses_host_.data(), losses_, losses_host_.size() * 4, cudaMemcpyDeviceToHost, stream_));
        CUDA_CHECK(cudaStreamSynchronize(stream_));
        double total = 0;
        for (float l : losses_host_) total += l;
        last_loss_sum_ = total;
        return counted_ ? (float)(total / counted_) : 0.0f;
    }
};
