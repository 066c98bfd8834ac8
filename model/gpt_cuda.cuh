// The GPT on the GPU: the same model as model/gpt.h, composed from the CUDA launchers in
// layers/cuda/, behind the ModelBackend interface. bf16 weights and activations; fp32 master
// weights, gradients and AdamW moments. Launcher conventions: backward launchers overwrite
// activation gradients, except layernorm_backward which adds into the residual stream's
// gradient; parameter gradients (fp32) are always added into.
#pragma once
#include <functional>
#include <string>
#include <type_traits>
#include <vector>
#include "comm/host_wait.cuh"
#include "comm/wait_timer.cuh"
#include "core/pinned_buffer.h"
#include "model/op_timer.cuh"
#include "layers/cuda/attention_cudnn.h"
#include "layers/cuda/attention_flash.h"
#include "layers/cuda/attn_sink.cuh"
#include "layers/cuda/classifier.cuh"
#include "layers/cuda/common.cuh"
#include "layers/cuda/encoder.cuh"
#include "layers/cuda/gelu.cuh"
#include "layers/cuda/layernorm.cuh"
#include "layers/cuda/matmul.cuh"
#include "layers/cuda/pointer.cuh"
#include "layers/cuda/qk_conv.cuh"
#include "layers/cuda/ring_attention.cuh"
#include "layers/cuda/residual.cuh"
#include "layers/cuda/rope.cuh"
#include "model/backend.h"
#include "model/recompute.h"
#include "optim/adamw.cuh"
#include "optim/clip.cuh"

__global__ void float_to_bf16_kernel(bf16* out, const float* in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16(in[i]);
}

enum class AttnBackend { Flash, Cudnn };

// The ring (context parallelism, --cp) runs our flash kernels, never cuDNN's: the one place this
// rule is checked (train and infer ask it when they plan, the model when a ring is attached).
inline void check_ring_backend(bool ring, AttnBackend attn) {
    if (ring && attn != AttnBackend::Flash) fatal("--cp needs --attention flash: the ring runs our kernels");
}
// Bit-reproducible steps (--deterministic) need our kernels too: cuDNN's backward is not (the
// CudaBackend comment says why).
inline void check_deterministic_backend(bool deterministic, AttnBackend attn) {
    if (deterministic && attn == AttnBackend::Cudnn)
        fatal("--deterministic needs --attention flash: cuDNN's attention backward is not bit-reproducible");
}

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
//     dilated branches add into dQ/dK/dV in launch order on one stream; under --cp the ring's
//     pieces run the same pair, each key block's dQ added into an fp32 accumulator in ring
//     order, and dK/dV travel and add in the plan's fixed order (ring_attention.cuh);
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
//   - the q/k convolution's weight gradient: partial sums per slab of rows, then a fixed-order sum;
//   - cross-entropy, GELU, RoPE, the q/k convolution's forward and input gradient, residual,
//     AdamW, bf16 casts: elementwise or per-row with a fixed order.
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
        check_deterministic_backend(deterministic_, attn_);
        n_ = layout_.back().offset + layout_.back().size;
        CUDA_CHECK(cudaStreamCreate(&stream_));
        // Parameters and optimizer state: bf16 weights, fp32 master weights, grads, m, v.
        const size_t o_param = state_.reserve(n_ * sizeof(bf16)), o_master = state_.reserve(n_ * 4),
                     o_grad = state_.reserve(n_ * 4), o_m = state_.reserve(n_ * 4), o_v = state_.reserve(n_ * 4),
                     o_norm = state_.reserve(256), o_red = state_.reserve(reduce_scratch_bytes()),
                     o_chunks = state_.reserve(max_adamw_chunks() * sizeof(AdamWChunk));
        state_.allocate("the model's weights and optimizer state", "use a smaller model (--layers, --width)");
        param_ = state_.at<bf16>(o_param), master_ = state_.at<float>(o_master), grad_ = state_.at<float>(o_grad);
        m_ = state_.at<float>(o_m), v_ = state_.at<float>(o_v), scalars_ = state_.at<float>(o_norm);
        reduce_scratch_ = state_.at<float>(o_red);
        adamw_chunks_ = state_.at<AdamWChunk>(o_chunks);
        set_adamw_shard(UpdateShard{0, n_});
        CUDA_CHECK(cudaMemset(m_, 0, n_ * 4));
        CUDA_CHECK(cudaMemset(v_, 0, n_ * 4));
        CUDA_CHECK(cudaMemset(grad_, 0, n_ * 4));
        p_ = param_views(param_, cfg_);
        g_ = param_views(grad_, cfg_);
        matmul_context();  // its workspaces now, so that the memory planner finds them held
    }
    ~CudaBackend() override {
        for (cudaEvent_t e : bucket_done_) cudaEventDestroy(e);
        if (upd_done_) cudaEventDestroy(upd_done_);
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
        if (cfg_.pointer) pointer_forward_all();
        classifier_forward_backward_cuda(losses_, nullptr, nullptr, lnf_, p_.wte, targets_d_, B_ * T_, cfg_.n_embd,
                                         cfg_.vocab_size, 0.0f, classifier_scratch_, stream_, pointer_mix());
        return mean_loss();
    }

    float forward_backward(const int* inputs, const int* targets, const int* doc_start, int B, int T,
                           const int* positions = nullptr) override {
        ops_.start(stream_);
        upload_batch(inputs, targets, doc_start, B, T, positions);
        mark("upload");
        run_forward();
        if (cfg_.pointer && targets) pointer_forward_all();
        zero_grad();
        mark("zero grad");
        // The LM head runs once: loss, dlnf and dwte together.
        classifier_forward_backward_cuda(losses_, dln_, g_.wte, lnf_, p_.wte, targets_d_, B_ * T_, cfg_.n_embd,
                                         cfg_.vocab_size, loss_scale(), classifier_scratch_, stream_, pointer_mix());
        mark("classifier");
        if (cfg_.pointer && targets) pointer_backward_all();
        run_backward_from_dlnf();
        return mean_loss();
    }

    void reserve(int B, int T) override { resize(B, T); }
    void reshape(int B, int T) override {
        acts_.release();
        cap_B_ = cap_T_ = 0;  // resize lays out (B, T) exactly
        resize(B, T);
    }

    void set_recompute(Recompute r) override {
        if (r != recompute_) acts_.release(), cap_B_ = cap_T_ = 0;  // re-lay the activations at the next resize
        recompute_ = r;
    }
    Recompute recompute() const override { return recompute_; }
    MemoryNeeds memory_needs(int B, int T, Recompute r) const override {
        MemoryNeeds n;
        n.held = state_.size() + MATMUL_WORKSPACE_BYTES + MATMUL_DBIAS_SCRATCH_BYTES;
        DeviceArena count;  // counts only: lay_out changes nothing without an Assign list
        const_cast<CudaBackend*>(this)->lay_out(B, T, r, count, nullptr);
        n.activations = count.size();
        n.extra = ring_pool_bytes(B, T);  // the ring's buffers (context parallel only)
        const size_t C = cfg_.n_embd, H = cfg_.n_head;
        n.per_token_per_layer = r == Recompute::None ? 16 * C * 2 + (4 + H) * 4 : r == Recompute::Selective ? 6 * C * 2 + H * 4 : C * 2;
        int conv_layers = 0;  // their raw q and k, kept where the attention's inputs are
        for (int l = 0; l < cfg_.n_layer; l++) conv_layers += cfg_.layer_qk_conv(l) > 0;
        if (r != Recompute::Full) n.per_token_per_layer += (size_t)conv_layers * 2 * C * 2 / cfg_.n_layer;
        return n;
    }
    size_t memory_available() const override {
        size_t free_b = 0, total_b = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        return free_b + acts_.size();
    }
    const char* memory_name() const override { return "GPU"; }
    void zero_grad() override {
        join_buckets();  // a backward whose sums nobody waited for must not race the memset
        CUDA_CHECK(cudaMemsetAsync(grad_, 0, n_ * 4, stream_));
    }
    // Only a communicator with a stream (NCCL) can run beside the backward; context parallel
    // runs keep the sum in one piece (train.cu), so that no two communicators run at once.
    void set_gradient_comm(Comm* comm) override {
        join_buckets();
        grad_comm_ = comm && comm->stream() ? comm : nullptr;
        if (grad_comm_ && bucket_done_.empty()) {
            bucket_done_.resize(cfg_.n_layer + 2);
            for (cudaEvent_t& e : bucket_done_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        }
    }

    void backward() override {
        if (!has_targets_) fatal("internal: backward() needs a forward() with targets");
        classifier_forward_backward_cuda(losses_, dln_, g_.wte, lnf_, p_.wte, targets_d_, B_ * T_, cfg_.n_embd,
                                         cfg_.vocab_size, loss_scale(), classifier_scratch_, stream_, pointer_mix());
        if (cfg_.pointer) pointer_backward_all();
        run_backward_from_dlnf();
    }

    void set_loss_count(int n) override { loss_count_ = n; }
    double last_loss_sum() const override { return last_loss_sum_; }
    void set_context_parallel(Comm* comm) override {
        check_ring_backend(comm != nullptr, attn_);
        if (comm && cfg_.qk_conv) fatal("%s", kQkConvRingError);
        if (comm && cfg_.pointer) fatal("%s", kPointerRingError);
        cp_ = comm;
    }
    // A communicator with a stream (NCCL) runs the sum there, ordered after the backward by an
    // event; one without (the in-process one of the tests) gets the finished gradients.
    void all_reduce_grads(Comm& comm) override {
        if (buckets_in_flight_) {  // run_backward_from_dlnf summed them already, block by block
            if (&comm != grad_comm_) fatal("internal: the gradients were summed over another communicator");
            join_buckets();
            return;
        }
        cudaStream_t cs = (cudaStream_t)comm.stream();
        if (!cs) {
            CUDA_CHECK(cudaStreamSynchronize(stream_));
            comm.all_reduce_sum(grad_, n_);
            return;
        }
        sum_comm_ = &comm;  // the host's waits now watch it (wait_host)
        cudaEvent_t ev;
        CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventRecord(ev, stream_));
        CUDA_CHECK(cudaStreamWaitEvent(cs, ev, 0));
        comm.all_reduce_sum(grad_, n_);
        CUDA_CHECK(cudaEventRecord(ev, cs));
        comm_wait_timer().wait(stream_, ev);
        CUDA_CHECK(cudaEventDestroy(ev));
    }

    double grad_norm() override {
        grad_norm_squared_cuda(scalars_, grad_, n_, reduce_scratch_, stream_);
        mark("grad norm");
        scalar_host_.resize(1);
        CUDA_CHECK(cudaMemcpyAsync(scalar_host_.data(), scalars_, 4, cudaMemcpyDeviceToHost, stream_));
        wait_host("the gradient norm");
        return std::sqrt((double)scalar_host_[0]);
    }

    void adamw_step(float lr, float grad_scale, const AdamWConfig& o, int step) override {
        CUDA_CHECK(cudaMemcpyAsync(scalars_ + 1, &grad_scale, 4, cudaMemcpyHostToDevice, stream_));
        // Every weight, or with a split update this rank's shard (optim/update_shard.h): one launch.
        adamw_update_chunks_cuda(master_, param_, m_, v_, grad_, adamw_chunks_, n_adamw_chunks_, lr, o.beta1, o.beta2, o.eps,
                                 o.weight_decay, step, scalars_ + 1, stream_);
        mark("adamw");
        if (!upd_) return;
        // The owners' bf16 weights to every rank before the next forward reads them.
        if (cudaStream_t cs = (cudaStream_t)upd_->stream()) {
            CUDA_CHECK(cudaEventRecord(upd_done_, stream_));
            CUDA_CHECK(cudaStreamWaitEvent(cs, upd_done_, 0));
            share_shards(*upd_, param_, n_, sizeof(bf16));
            CUDA_CHECK(cudaEventRecord(upd_done_, cs));
            comm_wait_timer().wait(stream_, upd_done_);
        } else {  // the in-process communicator copies at once
            wait_host("the update");
            share_shards(*upd_, param_, n_, sizeof(bf16));
        }
        state_split_ = true;
        mark("share weights");
    }
    void set_update_comm(Comm* comm) override {
        if (state_split_) fatal("internal: set_update_comm while the state is split: gather_state() first");
        upd_ = comm && comm->size() > 1 ? comm : nullptr;
        set_adamw_shard(upd_ ? update_shard(n_, upd_->size(), upd_->rank()) : UpdateShard{0, n_});
        if (upd_ && !upd_done_) CUDA_CHECK(cudaEventCreateWithFlags(&upd_done_, cudaEventDisableTiming));
    }
    // Every rank together: the owners' fp32 master weights and moments to every rank.
    void gather_state() override {
        if (!state_split_) return;
        if (cudaStream_t cs = (cudaStream_t)upd_->stream()) {
            CUDA_CHECK(cudaEventRecord(upd_done_, stream_));
            CUDA_CHECK(cudaStreamWaitEvent(cs, upd_done_, 0));
        } else {
            wait_host("the update");
        }
        for (float* x : {master_, m_, v_}) share_shards(*upd_, x, n_, sizeof(float));
        upd_->barrier();  // waits (with the communicator's time-out) for the broadcasts on its stream
        state_split_ = false;
    }

    void logits_at(float* out, int b, int t) override {
        if (cfg_.pointer) fatal("internal: CudaBackend::logits_at does not mix a pointer in: generate through a KV cache (make_kv_cache)");
        logits_cuda(logits_d_, lnf_ + ((size_t)b * T_ + t) * cfg_.n_embd, p_.wte, cfg_.n_embd, cfg_.vocab_size, stream_);
        CUDA_CHECK(cudaMemcpyAsync(out, logits_d_, (size_t)cfg_.vocab_size * 4, cudaMemcpyDeviceToHost, stream_));
        CUDA_CHECK(cudaStreamSynchronize(stream_));
    }

    void get_params(float* dst) override {
        refuse_split_state("get_params");
        copy_to_host(dst, master_);
    }
    void set_params(const float* src) override {
        refuse_split_state("set_params");  // it would leave the moments split and say nothing
        CUDA_CHECK(cudaMemcpy(master_, src, n_ * 4, cudaMemcpyHostToDevice));
        float_to_bf16_kernel<<<1024, 256, 0, stream_>>>(param_, master_, n_);
        CUDA_CHECK_LAST();
        CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    void get_opt_state(float* m, float* v) override {
        refuse_split_state("get_opt_state");
        copy_to_host(m, m_);
        copy_to_host(v, v_);
    }
    void set_opt_state(const float* m, const float* v) override {
        refuse_split_state("set_opt_state");
        CUDA_CHECK(cudaMemcpy(m_, m, n_ * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(v_, v, n_ * 4, cudaMemcpyHostToDevice));
    }
    // The bf16 weights and the stream, for inference built on this backend (model/kv_cache_cuda.cuh).
    const ParamViews<bf16>& weights() const { return p_; }
    cudaStream_t stream() const { return stream_; }
    // fp32 copy of the parameter gradients (tests compare them with the CPU's).
    void get_grads(float* dst) { copy_to_host(dst, grad_); }
    // Bytes of activation memory for (B, T): what `--batch` and `--seq-len` cost.
    size_t activation_bytes() const { return acts_.size(); }
    OpTimer& op_timer() { return ops_; }
    void time_ops(bool on) override { ops_.enable(on); }
    std::vector<std::pair<std::string, double>> take_op_split() override { return ops_.take(); }

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
    OpTimer ops_;                // bench_train --split: each op's kind marked on stream_
    Comm* grad_comm_ = nullptr;  // data parallel: each block's gradients summed during the backward
    Comm* upd_ = nullptr;        // data parallel: the AdamW update split over its ranks (optim/update_shard.h)
    Comm* sum_comm_ = nullptr;   // the last all_reduce_grads' communicator
    cudaEvent_t upd_done_ = nullptr;
    AdamWChunk* adamw_chunks_ = nullptr;  // in state_: the table of the weights this rank updates
    int n_adamw_chunks_ = 0;
    bool state_split_ = false;   // only this rank's shard of master_, m_, v_ is current (gather_state)
    ProgressMarks progress_;     // wait_host: how far stream_ has got (comm/host_wait.cuh)
    std::vector<cudaEvent_t> bucket_done_;  // per block, the embedding, and the join
    bool buckets_in_flight_ = false;
    int loss_count_ = 0;       // > 0: the mean loss's denominator over all ranks
    double last_loss_sum_ = 0;
    float loss_scale() const {
        const int n = loss_count_ > 0 ? loss_count_ : counted_;
        return n ? 1.0f / n : 0.0f;
    }
    bool has_targets_ = false;
    PinnedBuffer<float> losses_host_;  // pinned: see core/pinned_buffer.h
    PinnedBuffer<float> scalar_host_;  // the gradient norm's square, read by the host
    int *tokens_d_, *targets_d_, *pos_d_, *doc_start_d_;
    bool use_doc_start_ = false;
    // One block's activations (model/recompute.h): under a recompute policy the fields a block
    // does not keep point into work_, shared by the blocks and recomputed in the backward.
    struct Layer {
        bf16 *ln1, *qkv, *atty, *resid_attn, *ln2, *fch_pre, *fch_gelu, *resid_out;  // (B,T,C|3C|4C)
        bf16* qk_raw;  // (B,T,2C): q and k before the convolution, in a layer that has one
        float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *lse;                       // (B,T), (B,H,T)
    };
    Recompute recompute_ = Recompute::None;
    std::vector<Layer> layers_;
    Layer work_{};
    bf16 *encoded_, *lnf_, *tmp_, *qkv_pre_;
    float *lnf_mean_, *lnf_rstd_, *losses_, *logits_d_;
    // Backward scratch; the q/k convolution's (when the model has one): the gradient of its input
    // and its weight gradient's partial sums.
    bf16 *dresid_, *dln_, *dqkv_, *datty_, *dfch_, *dqkv_conv_ = nullptr;
    void *classifier_scratch_, *ln_scratch_, *attn_workspace_;
    float* conv_scratch_ = nullptr;
    float* sink_scratch_ = nullptr;  // the sinks' backward partials (layers/cuda/attn_sink.cuh)
    float* logn_scratch_ = nullptr;  // the learned log-n slopes' backward partials (layers/cuda/rope.cuh)
    // The pointer's (layers/cuda/pointer.cuh), in a model with one: [q | kp] (B,T,2D), later their
    // gradient; the head's rows (B,T,3D) and their gradient; its O and dO (B,T,D); per row the gate
    // logit, L, p_copy, w and the gate's gradient; the gate's partial sums; the target's keys as
    // tiles (pointer_tiles: two orders of at most B T rows, then at most B T tiles of each kind).
    bf16 *ptr_qk_ = nullptr, *ptr_qkv_ = nullptr, *ptr_dqkv_ = nullptr, *ptr_o_ = nullptr, *ptr_do_ = nullptr;
    float *ptr_gate_ = nullptr, *ptr_lse_ = nullptr, *ptr_pcopy_ = nullptr, *ptr_w_ = nullptr, *ptr_dgate_ = nullptr;
    float* ptr_scratch_ = nullptr;
    int* ptr_tiles_d_ = nullptr;
    PointerTiles ptr_tiles_host_;
    std::vector<int> ptr_tiles_staged_;
    PointerTilesDevice ptr_tiles_;

    // What the ring's buffer pool (layers/cuda/ring_attention.cuh) holds once a layer has run
    // its forward and backward, the most any rank of the ring holds (later layers and steps reuse the same
    // sizes): ring_attention_pool_bytes_needed replays the calls' requests, so this is exact when
    // every layer has one pattern (test_ring checks the replay against the pool). Layers of
    // different patterns park different numbers of accumulators; for them the upper bound below,
    // which assumes no buffer is shared and at most 2P + 2 parked ones, is taken when larger.
    // Plus the positions 0..N-1 of the whole window (ints, outside the pool) and cudaMalloc's rounding.
    size_t ring_pool_bytes(int B, int T) const {
        if (!cp_) return 0;
        const int P = cp_->size();
        size_t most = 0;
        bool one_pattern = true;
        for (int l = 0; l < cfg_.n_layer; l++) {
            const bool as_before = l > 0 && pattern_to_json(cfg_.attn(l)) == pattern_to_json(cfg_.attn(l - 1));
            one_pattern = one_pattern && (l == 0 || as_before);
            if (as_before) continue;
            most = std::max(most, ring_attention_pool_bytes_needed(RingPlan(cfg_.attn(l), P, T * P), -1, B, cfg_.n_head,
                                                                   cfg_.head_dim(), /*has_doc_start=*/true));
        }
        if (!one_pattern) most = std::max(most, ring_pool_bytes_bound(B, T));
        return most + (size_t)P * T * sizeof(int) + 64 * 512;
    }

    // The upper bound, counted from the buffers those calls take, c = T / 2 rows per chunk,
    // E = B c C elements:
    //   forward: q 2 x E bf16, own K/V 2 x 2E bf16, O 2 x E fp32, L 2 x B H c fp32, doc 2 x B c int,
    //            K/V blocks 4 x 2E bf16;
    //   backward (reusing the forward's sizes): dO and O 4 x E bf16, the pieces' workspaces 2,
    //            dK/dV accumulators 4 x 2E fp32, a bf16 dK/dV scratch 2E, parked accumulators and
    //            the ones sent home (at most 2P + 2) x 2E fp32, dQ E bf16.
    size_t ring_pool_bytes_bound(int B, int T) const {
        const size_t P = cp_->size(), c = (size_t)T / 2, C = cfg_.n_embd, H = cfg_.n_head, E = (size_t)B * c * C;
        const AttnDims dm{B, cfg_.n_head, cfg_.head_dim(), (int)(P * T)};
        const size_t fwd = 2 * E * 2 + 2 * 2 * E * 2 + 2 * E * 4 + 2 * (size_t)B * H * c * 4 + 2 * (size_t)B * c * 4 + 4 * 2 * E * 2;
        const size_t bwd = 4 * E * 2 + 2 * attention_backward_pieces_workspace_bytes(dm, (int)c) + 4 * 2 * E * 4 + 2 * E * 2 +
                           (2 * P + 2) * 2 * E * 4 + E * 2;
        return fwd + bwd + 64 * 256;
    }

    size_t reduce_scratch_bytes() const { return grad_norm_squared_scratch_bytes(); }

    void copy_to_host(float* dst, const float* src) {
        wait_host("a copy to the host");
        CUDA_CHECK(cudaMemcpy(dst, src, n_ * 4, cudaMemcpyDeviceToHost));
    }

    AttnShape attn_shape() const { return {B_, T_, cfg_.n_head, cfg_.head_dim(), 3 * cfg_.n_embd}; }

    // The attention backward's workspace: the largest any layer's pattern needs (a dilated
    // layer needs an fp32 dQ accumulator for one chunk only); the ring brings its own.
    // The pointer's head runs our dense flash backward, whatever --attention says.
    size_t pointer_workspace_bytes(const AttnShape& s) const {
        return cfg_.pointer ? attention_backward_workspace_bytes(pointer_attn_shape(s.B, s.N, cfg_.head_dim()), AttnPattern{}) : 0;
    }
    size_t attention_workspace_bytes(const AttnShape& s) const {
        if (cp_) return 0;
        if (attn_ == AttnBackend::Cudnn) return std::max(attention_cudnn_workspace_bytes(s), pointer_workspace_bytes(s));
        size_t most = 0;
        for (int l = 0; l < cfg_.n_layer; l++) most = std::max(most, attention_backward_workspace_bytes(s, cfg_.attn(l)));
        return std::max(most, pointer_workspace_bytes(s));
    }

    // Every activation buffer of (B, T) under policy r, placed in `arena` (which only counts
    // until it is allocated); `assign`, if given, collects what points each member at its place
    // once the arena has its memory. The planner (memory_needs) and resize() both call it, so
    // the plan is the allocation.
    using Assign = std::vector<std::function<void(const DeviceArena&)>>;
    void lay_out(int B, int T, Recompute r, DeviceArena& arena, Assign* assign) {
        const size_t BT = (size_t)B * T, C = cfg_.n_embd, H = cfg_.n_head, V = cfg_.vocab_size;
        auto place = [&](auto*& dst, size_t bytes) {
            const size_t at = arena.reserve(bytes);
            using P = std::remove_reference_t<decltype(dst)>;
            if (assign) assign->push_back([&dst, at](const DeviceArena& a) { dst = a.at<std::remove_pointer_t<P>>(at); });
        };
        auto bf = [&](bf16*& dst, size_t n) { place(dst, n * sizeof(bf16)); };
        auto f32 = [&](float*& dst, size_t n) { place(dst, n * 4); };
        place(tokens_d_, BT * 4), place(targets_d_, BT * 4), place(pos_d_, (size_t)T * 4), place(doc_start_d_, BT * 4);
        // What a block keeps (model/recompute.h); work_ holds the rest for every block.
        auto place_layer = [&](Layer& a, Recompute keep, bool qk_conv) {
            const bool all = keep == Recompute::None, attn = keep != Recompute::Full;
            if (all) bf(a.ln1, BT * C), bf(a.ln2, BT * C), bf(a.fch_pre, BT * 4 * C), bf(a.fch_gelu, BT * 4 * C);
            if (all) f32(a.ln1_mean, BT), f32(a.ln1_rstd, BT), f32(a.ln2_mean, BT), f32(a.ln2_rstd, BT);
            if (attn) bf(a.qkv, BT * 3 * C), bf(a.atty, BT * C), bf(a.resid_attn, BT * C), f32(a.lse, BT * H);
            if (attn && qk_conv) bf(a.qk_raw, BT * 2 * C);
        };
        if (assign) layers_.assign(cfg_.n_layer, Layer{}), work_ = Layer{};
        Layer unused{};  // planning only: places are counted, nothing is pointed
        auto layer = [&](int l) -> Layer& { return assign ? layers_[l] : unused; };
        for (int l = 0; l < cfg_.n_layer; l++) bf(layer(l).resid_out, BT * C), place_layer(layer(l), r, cfg_.layer_qk_conv(l) > 0);
        if (r != Recompute::None) {
            // work_'s GELU output is dfch_ (below): matmul_backward_cuda reads it before writing dfch.
            Layer& w = assign ? work_ : unused;
            bf(w.ln1, BT * C), bf(w.ln2, BT * C), bf(w.fch_pre, BT * 4 * C);
            f32(w.ln1_mean, BT), f32(w.ln1_rstd, BT), f32(w.ln2_mean, BT), f32(w.ln2_rstd, BT);
            if (r == Recompute::Full) bf(w.qkv, BT * 3 * C), bf(w.atty, BT * C), bf(w.resid_attn, BT * C), f32(w.lse, BT * H);
            if (r == Recompute::Full && cfg_.qk_conv) bf(w.qk_raw, BT * 2 * C);
        }
        bf(encoded_, BT * C), bf(lnf_, BT * C), bf(tmp_, BT * C);
        f32(lnf_mean_, BT), f32(lnf_rstd_, BT), f32(losses_, BT), f32(logits_d_, V);
        // qkv_pre_ lives between the QKV matmul and the rotary in a block's forward, dqkv_ in its
        // backward: one buffer.
        bf(dresid_, BT * C), bf(dln_, BT * C), bf(dqkv_, BT * 3 * C), bf(datty_, BT * C), bf(dfch_, BT * 4 * C);
        const AttnShape s{B, T, cfg_.n_head, cfg_.head_dim(), 3 * cfg_.n_embd};
        place(classifier_scratch_, classifier_scratch_bytes((int)BT, (int)V));
        place(ln_scratch_, layernorm_backward_scratch_bytes((int)BT, (int)C));
        place(attn_workspace_, attention_workspace_bytes(s));
        if (cfg_.qk_conv) {
            bf(dqkv_conv_, BT * 3 * C);
            place(conv_scratch_, qk_conv_backward_scratch_bytes(B, T, (int)C, cfg_.qk_conv));
        }
        if (cfg_.attn_sink) f32(sink_scratch_, attn_sink_scratch_floats((long long)BT, (int)H));
        if (cfg_.logn_learn) f32(logn_scratch_, logn_slope_scratch_floats((long long)BT, (int)H));
        if (cfg_.pointer) {
            const size_t D = cfg_.head_dim();
            bf(ptr_qk_, BT * 2 * D), bf(ptr_qkv_, BT * 3 * D), bf(ptr_dqkv_, BT * 3 * D), bf(ptr_o_, BT * D), bf(ptr_do_, BT * D);
            f32(ptr_gate_, BT), f32(ptr_lse_, BT), f32(ptr_pcopy_, BT), f32(ptr_w_, BT), f32(ptr_dgate_, BT);
            f32(ptr_scratch_, pointer_gate_scratch_floats((long long)BT, (int)C));
            place(ptr_tiles_d_, 10 * BT * sizeof(int));
        }
        if (!assign) return;
        assign->push_back([this, r](const DeviceArena&) {
            qkv_pre_ = dqkv_;
            if (r != Recompute::None) work_.fch_gelu = dfch_;
            for (Layer& a : layers_) {
                auto from_work = [](auto*& f, auto* w) { if (!f) f = w; };
                from_work(a.ln1, work_.ln1), from_work(a.qkv, work_.qkv), from_work(a.atty, work_.atty);
                from_work(a.resid_attn, work_.resid_attn), from_work(a.ln2, work_.ln2), from_work(a.fch_pre, work_.fch_pre);
                from_work(a.fch_gelu, work_.fch_gelu), from_work(a.ln1_mean, work_.ln1_mean);
                from_work(a.ln1_rstd, work_.ln1_rstd), from_work(a.ln2_mean, work_.ln2_mean);
                from_work(a.ln2_rstd, work_.ln2_rstd), from_work(a.lse, work_.lse), from_work(a.qk_raw, work_.qk_raw);
            }
        });
    }

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
        Assign assign;
        lay_out(newB, newT, recompute_, acts_, &assign);
        char hint[200];
        snprintf(hint, sizeof hint, "lower --batch (now %d) or --seq-len (now %d), or recompute more (--recompute, now %s)",
                 B, T, recompute_name(recompute_));
        acts_.allocate("activations for this batch", hint);
        for (auto& f : assign) f(acts_);
        losses_host_.resize((size_t)newB * newT);
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
        if (targets && cfg_.pointer) upload_pointer_tiles(inputs, targets, B, T);
        // The host buffers may change once we return: wait for the copies.
        wait_host("the batch's upload");
    }

    // The target's keys as tiles (layers/pointer.h), built on the host and sent as one copy:
    // [query order | key order], B T slots each, then the query tiles and the key tiles.
    void upload_pointer_tiles(const int* inputs, const int* targets, int B, int T) {
        const size_t BT = (size_t)B * T;
        PointerTiles& pt = ptr_tiles_host_;
        pointer_tiles(pt, inputs, targets, B, T, cfg_.vocab_size);
        std::vector<int>& st = ptr_tiles_staged_;
        st.assign(2 * BT, 0);
        std::copy(pt.query_order.begin(), pt.query_order.end(), st.begin());
        std::copy(pt.key_order.begin(), pt.key_order.end(), st.begin() + BT);
        st.insert(st.end(), pt.query_tiles.begin(), pt.query_tiles.end());
        st.insert(st.end(), pt.key_tiles.begin(), pt.key_tiles.end());
        if (st.size() > 10 * BT) fatal("internal: the pointer's tiles (%zu ints) outgrow their buffer", st.size());
        CUDA_CHECK(cudaMemcpyAsync(ptr_tiles_d_, st.data(), st.size() * sizeof(int), cudaMemcpyHostToDevice, stream_));
        ptr_tiles_.query_order = ptr_tiles_d_, ptr_tiles_.key_order = ptr_tiles_d_ + BT;
        ptr_tiles_.query_tiles = ptr_tiles_d_ + 2 * BT;
        ptr_tiles_.key_tiles = ptr_tiles_.query_tiles + pt.query_tiles.size();
        ptr_tiles_.n_query_tiles = pt.n_query_tiles(), ptr_tiles_.n_key_tiles = pt.n_key_tiles();
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
                                         cfg_.n_head, cfg_.head_dim(), scale, stream_, nullptr, deterministic_);
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
        mark("encoder");
        for (int l = 0; l < cfg_.n_layer; l++) {
            block_forward(l, block_input(l), layers_[l], BlockStage::Output);
            progress_mark();
        }
        layernorm_forward_cuda(lnf_, lnf_mean_, lnf_rstd_, block_input(cfg_.n_layer), p_.lnfw, p_.lnfb, BT, C, stream_);
        mark("layernorm");
    }

    // The residual stream entering block l (l = n_layer: the last block's output).
    const bf16* block_input(int l) const { return l == 0 ? encoded_ : layers_[l - 1].resid_out; }

    // How far block_forward runs: to the block's output, or (recomputing for the backward,
    // where the output is kept) to the last activation the backward reads, the GELU.
    enum class BlockStage { Gelu, Output };

    void block_forward(int l, const bf16* x_in, const Layer& a, BlockStage stage) {
        const int C = cfg_.n_embd, BT = B_ * T_;
        const BlockParams<bf16>& w = p_.blocks[l];
        layernorm_forward_cuda(a.ln1, a.ln1_mean, a.ln1_rstd, x_in, w.ln1w, w.ln1b, BT, C, stream_);
        mark("layernorm");
        matmul_forward_cuda(qkv_pre_, a.ln1, w.qkvw, w.qkvb, BT, C, 3 * C, stream_);  // (B, T, 3, H, D)
        mark("matmul");
        if (const int W = cfg_.layer_qk_conv(l))  // a NoPE layer: its convolution instead of the rotary
            qk_conv_forward_cuda(a.qkv, a.qk_raw, qkv_pre_, nullptr, w.qkconv, pos_d_, use_doc_start_ ? doc_start_d_ : nullptr, B_,
                                 T_, C, W, stream_);
        else
            rope_forward_cuda(a.qkv, qkv_pre_, pos_d_, B_, T_, cfg_.n_head, cfg_.head_dim(), cfg_.layer_rope_theta(l), stream_);
        logn_scale_queries_cuda(a.qkv, pos_d_, B_, T_, cfg_.n_head, cfg_.head_dim(), cfg_.layer_logn_base(l), stream_, w.logn_slope);
        mark("rope");  // the q/k convolution too, where it stands in the rotary's place
        attention_forward(a.atty, a.lse, a.qkv, cfg_.attn(l));                       // (B, T, H, D)
        if (w.sink) attn_sink_forward_cuda(a.atty, a.lse, w.sink, B_, T_, cfg_.n_head, cfg_.head_dim(), stream_);
        mark("attention");
        matmul_forward_cuda(tmp_, a.atty, w.projw, w.projb, BT, C, C, stream_);
        mark("matmul");
        residual_forward_cuda(a.resid_attn, x_in, tmp_, (size_t)BT * C, stream_);
        mark("residual");
        mlp_up_forward(l, a);
        if (stage == BlockStage::Gelu) return;
        matmul_forward_cuda(tmp_, a.fch_gelu, w.fcprojw, w.fcprojb, BT, 4 * C, C, stream_);
        mark("matmul");
        residual_forward_cuda(a.resid_out, a.resid_attn, tmp_, (size_t)BT * C, stream_);
        mark("residual");
    }

    // ln2, the MLP's up projection and its GELU (fused into the matmul's epilogue).
    void mlp_up_forward(int l, const Layer& a) {
        const int C = cfg_.n_embd, BT = B_ * T_;
        const BlockParams<bf16>& w = p_.blocks[l];
        layernorm_forward_cuda(a.ln2, a.ln2_mean, a.ln2_rstd, a.resid_attn, w.ln2w, w.ln2b, BT, C, stream_);
        mark("layernorm");
        matmul_forward_cuda(a.fch_gelu, a.ln2, w.fcw, w.fcb, BT, C, 4 * C, stream_, a.fch_pre);  // (B, T, 4C)
        mark("matmul");  // the GELU rides in its epilogue
    }

    // Before block l's backward: recomputes what it did not keep (model/recompute.h).
    void block_recompute(int l, const bf16* x_in, const Layer& a) {
        const BlockParams<bf16>& w = p_.blocks[l];
        if (recompute_ == Recompute::Full) block_forward(l, x_in, a, BlockStage::Gelu);
        if (recompute_ != Recompute::Selective) return;
        layernorm_forward_cuda(a.ln1, a.ln1_mean, a.ln1_rstd, x_in, w.ln1w, w.ln1b, B_ * T_, cfg_.n_embd, stream_);
        mark("layernorm");
        mlp_up_forward(l, a);
    }

    // dln_ holds d(lnf output); adds every parameter's gradient into grad_.
    void run_backward_from_dlnf() {
        const int C = cfg_.n_embd, BT = B_ * T_;
        CUDA_CHECK(cudaMemsetAsync(dresid_, 0, (size_t)BT * C * sizeof(bf16), stream_));
        float* ln_scratch = static_cast<float*>(ln_scratch_);
        layernorm_backward_cuda(dresid_, g_.lnfw, g_.lnfb, dln_, block_input(cfg_.n_layer), p_.lnfw, lnf_mean_, lnf_rstd_,
                                BT, C, ln_scratch, stream_);
        mark("layernorm");
        for (int l = cfg_.n_layer - 1; l >= 0; l--) {
            const Layer& a = layers_[l];
            const BlockParams<bf16>& w = p_.blocks[l];
            BlockParams<float>& dw = g_.blocks[l];
            const bf16* x_in = block_input(l);
            block_recompute(l, x_in, a);
            // MLP; the GELU's backward rides on the fcproj matmul (pre_gelu). dfch_ may be
            // a.fch_gelu itself (recompute policies): the matmul reads it first.
            matmul_backward_cuda(dfch_, dw.fcprojw, dw.fcprojb, dresid_, a.fch_gelu, w.fcprojw, BT, 4 * C, C, stream_, a.fch_pre);
            matmul_backward_cuda(dln_, dw.fcw, dw.fcb, dfch_, a.ln2, w.fcw, BT, C, 4 * C, stream_);
            mark("matmul");
            layernorm_backward_cuda(dresid_, dw.ln2w, dw.ln2b, dln_, a.resid_attn, w.ln2w, a.ln2_mean, a.ln2_rstd, BT, C, ln_scratch, stream_);
            mark("layernorm");
            // Attention.
            matmul_backward_cuda(datty_, dw.projw, dw.projb, dresid_, a.atty, w.projw, BT, C, C, stream_);
            mark("matmul");
            attention_backward(dqkv_, datty_, a.atty, a.lse, a.qkv, cfg_.attn(l));
            // atty and lse are the sink's already: the attention's backward needed nothing of it
            if (w.sink) attn_sink_backward_cuda(dw.sink, datty_, a.atty, a.lse, w.sink, B_, T_, cfg_.n_head, cfg_.head_dim(),
                                                sink_scratch_, stream_);
            mark("attention");
            if (w.logn_slope)  // before dq is scaled: it reads dq'
                logn_slope_backward_cuda(dw.logn_slope, dqkv_, a.qkv, pos_d_, w.logn_slope, B_, T_, cfg_.n_head, cfg_.head_dim(),
                                         cfg_.layer_logn_base(l), logn_scratch_, stream_);
            logn_scale_queries_cuda(dqkv_, pos_d_, B_, T_, cfg_.n_head, cfg_.head_dim(), cfg_.layer_logn_base(l), stream_, w.logn_slope);
            const bf16* dqkv_pre = dqkv_;  // the gradient of the QKV product's output
            if (const int W = cfg_.layer_qk_conv(l)) {  // a NoPE layer: no rotary to undo
                qk_conv_backward_cuda(dqkv_conv_, dw.qkconv, dqkv_, a.qk_raw, w.qkconv, pos_d_, use_doc_start_ ? doc_start_d_ : nullptr,
                                      B_, T_, C, W, conv_scratch_, stream_);
                dqkv_pre = dqkv_conv_;
            } else {
                rope_backward_cuda(dqkv_, dqkv_, pos_d_, B_, T_, cfg_.n_head, cfg_.head_dim(), cfg_.layer_rope_theta(l), stream_);
            }
            mark("rope");
            matmul_backward_cuda(dln_, dw.qkvw, dw.qkvb, dqkv_pre, a.ln1, w.qkvw, BT, C, 3 * C, stream_);
            mark("matmul");
            layernorm_backward_cuda(dresid_, dw.ln1w, dw.ln1b, dln_, x_in, w.ln1w, a.ln1_mean, a.ln1_rstd, BT, C, ln_scratch, stream_);
            mark("layernorm");
            // Block l's gradients are final (and, for the last block, the final LayerNorm's,
            // which follow it in the buffer): their sum runs under the blocks below.
            if (grad_comm_) sum_bucket(l, dw.ln1w, l + 1 < cfg_.n_layer ? g_.blocks[l + 1].ln1w : grad_ + n_);
            progress_mark();
        }
        encoder_backward_cuda(g_.wte, dresid_, tokens_d_, B_, T_, C, stream_);
        mark("encoder");
        if (grad_comm_) sum_bucket(cfg_.n_layer, g_.wte, g_.blocks[0].ln1w);  // the tied embedding, classifier and encoder
    }
    void mark(const char* kind) { ops_.mark(kind, stream_); }

    // The data-parallel sum of grad_[begin, end) on the communicator's stream, after what
    // stream_ has queued so far (the kernels that wrote those gradients).
    void sum_bucket(int i, float* begin, float* end) {
        CUDA_CHECK(cudaEventRecord(bucket_done_[i], stream_));
        CUDA_CHECK(cudaStreamWaitEvent((cudaStream_t)grad_comm_->stream(), bucket_done_[i], 0));
        grad_comm_->all_reduce_sum(begin, (size_t)(end - begin));
        buckets_in_flight_ = true;
    }
    // stream_ waits for every bucket's sum: the optimizer, the norm and the next step's
    // zero_grad read or write what the sums write.
    void join_buckets() {
        if (!buckets_in_flight_) return;
        cudaEvent_t all = bucket_done_[cfg_.n_layer + 1];
        CUDA_CHECK(cudaEventRecord(all, (cudaStream_t)grad_comm_->stream()));
        comm_wait_timer().wait(stream_, all);
        buckets_in_flight_ = false;
    }

    // AdamW's chunk table (optim/adamw.cuh) for the weights this rank updates.
    size_t max_adamw_chunks() const { return adamw_max_chunks(n_, layout_.size()); }
    void set_adamw_shard(UpdateShard shard) {
        const std::vector<AdamWChunk> chunks = adamw_shard_chunks(layout_, shard);
        if (chunks.size() > max_adamw_chunks()) fatal("internal: %zu AdamW chunks, room for %zu", chunks.size(), max_adamw_chunks());
        CUDA_CHECK(cudaMemcpy(adamw_chunks_, chunks.data(), chunks.size() * sizeof(AdamWChunk), cudaMemcpyHostToDevice));
        n_adamw_chunks_ = (int)chunks.size();
    }

    // The host waits for the compute stream, which may wait on other ranks (comm/host_wait.cuh).
    void wait_host(const char* what) {
        host_wait(stream_, {cp_, grad_comm_, upd_, sum_comm_}, what, [this] { return progress_.done(); });
    }
    // With other ranks, an event after each block (forward and backward): wait_host's progress.
    void progress_mark() {
        if (cp_ || grad_comm_ || upd_ || sum_comm_) progress_.mark(stream_);
    }
    void refuse_split_state(const char* what) const {
        if (state_split_) fatal("internal: %s while the AdamW state is split over the ranks: call gather_state() on every rank first", what);
    }

    // The pointer's side of the classifier (none without a pointer).
    PointerMixCuda pointer_mix() const {
        if (!cfg_.pointer) return {};
        return {ptr_gate_, ptr_pcopy_, ptr_w_};
    }

    // The pointer's head over lnf_ up to its copy weights (layers/cuda/pointer.cuh). The query's
    // and key's weights are one (2D, C) product: ptr.k.weight follows ptr.q.weight in the layout.
    void pointer_forward_all() {
        const int C = cfg_.n_embd, D = cfg_.head_dim(), BT = B_ * T_;
        if (p_.ptrk != p_.ptrq + (size_t)D * C) fatal("internal: ptr.k.weight does not follow ptr.q.weight");
        matmul_forward_cuda(ptr_qk_, lnf_, p_.ptrq, nullptr, BT, C, 2 * D, stream_);
        pointer_pack_cuda(ptr_qkv_, ptr_qk_, B_, T_, D, stream_);
        pointer_gate_forward_cuda(ptr_gate_, lnf_, p_.ptrgw, p_.ptrgb, BT, C, stream_);
        pointer_forward_cuda(ptr_lse_, ptr_pcopy_, ptr_o_, ptr_qkv_, pos_d_, ptr_tiles_, B_, T_, D, stream_);
        mark("pointer");
    }

    // After the classifier (which wrote dln_ and ptr_w_): the pointer's gradient into its weights
    // and dln_. tmp_ holds the products' dlnf: nothing else uses it between the forward and the
    // blocks' backward.
    void pointer_backward_all() {
        const int C = cfg_.n_embd, D = cfg_.head_dim(), BT = B_ * T_;
        pointer_backward_cuda(ptr_qk_, ptr_dgate_, ptr_o_, ptr_do_, ptr_dqkv_, ptr_qkv_, ptr_gate_, ptr_w_, ptr_lse_, ptr_pcopy_,
                              targets_d_, pos_d_, ptr_tiles_, B_, T_, D, loss_scale(),
                              deterministic_, static_cast<float*>(attn_workspace_), stream_);
        matmul_backward_cuda(tmp_, g_.ptrq, nullptr, ptr_qk_, lnf_, p_.ptrq, BT, C, 2 * D, stream_);
        pointer_gate_backward_cuda(dln_, g_.ptrgw, g_.ptrgb, tmp_, ptr_dgate_, lnf_, p_.ptrgw, BT, C, ptr_scratch_, stream_);
        mark("pointer");
    }

    float mean_loss() {
        CUDA_CHECK(cudaMemcpyAsync(losses_host_.data(), losses_, losses_host_.size() * 4, cudaMemcpyDeviceToHost, stream_));
        wait_host("the loss");
        double total = 0;
        for (float l : losses_host_) total += l;
        last_loss_sum_ = total;
        return counted_ ? (float)(total / counted_) : 0.0f;
    }
};
