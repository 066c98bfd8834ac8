// What train and infer need from a model, whatever runs it. The CPU backend (here) wraps the
// reference GPT<float>; the CUDA backend implements the same interface with its own kernels,
// so train.cu and infer.cu pick one at run time and never look inside.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include "model/gpt.h"
#include "model/host_memory.h"
#include "model/recompute.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/update_shard.h"

// Memory a training step of (B, T) needs under a recompute policy (model/memory_plan.h).
struct MemoryNeeds {
    size_t held = 0;         // allocated already, whatever the shape: weights, optimizer state
    size_t activations = 0;  // what reserve(B, T) allocates under the policy
    size_t extra = 0;        // what libraries and kernels allocate on first use (workspaces)
    size_t per_token_per_layer = 0;  // of the activations: what one block keeps per token
    size_t peak() const { return held + activations + extra; }
};

class ModelBackend {
   public:
    virtual ~ModelBackend() = default;
    virtual std::string name() const = 0;
    virtual const GPTConfig& config() const = 0;
    virtual size_t num_params() const = 0;

    // Mean loss over targets >= 0 (targets nullptr: inference, returns 0). See GPT::forward.
    virtual float forward(const int* inputs, const int* targets, const int* doc_start, int B, int T,
                          const int* positions = nullptr) = 0;
    // Allocates what batches of (B, T) need, so that running out of memory is reported before
    // a run writes anything. Optional: forward() allocates on first use anyway.
    virtual void reserve(int B, int T) { (void)B, (void)T; }
    // As reserve, but lays the activations out for exactly (B, T), giving back what a larger
    // earlier shape held: a run whose window and batch change (train --schedule) holds what each
    // stage needs, not the largest of every dimension.
    virtual void reshape(int B, int T) { reserve(B, T); }
    // Gradient checkpointing (model/recompute.h): what each block keeps for its backward. Takes
    // effect at the next reserve or forward. The gradients are the same under every policy.
    virtual void set_recompute(Recompute r) = 0;
    virtual Recompute recompute() const = 0;
    // The memory model behind the planner (model/memory_plan.h), and the bytes the activations
    // and extras may take now (free memory plus the activations held now, which a new reserve
    // gives back first).
    virtual MemoryNeeds memory_needs(int B, int T, Recompute r) const = 0;
    virtual size_t memory_available() const = 0;
    virtual const char* memory_name() const = 0;  // "GPU" or "host"
    virtual void zero_grad() = 0;
    virtual void backward() = 0;  // adds the gradient of the last forward's mean loss
    // One training step's worth: zeroes the gradients, then forward and backward; returns the
    // mean loss. Backends override it to share work between the two (the CUDA backend runs
    // the LM head once for both).
    virtual float forward_backward(const int* inputs, const int* targets, const int* doc_start, int B, int T,
                                   const int* positions = nullptr) {
        const float loss = forward(inputs, targets, doc_start, B, T, positions);
        zero_grad();
        backward();
        return loss;
    }
    virtual double grad_norm() = 0;

    // Parallel training (context and data parallel, train --cp). The mean loss of a step spans
    // every rank's targets: set_loss_count(n) gives their number over all ranks before the
    // forward (0: this rank's own), last_loss_sum() the sum over this rank's counted targets
    // after it, and all_reduce_grads sums the gradients over the ranks of `comm`.
    virtual void set_loss_count(int n) = 0;
    virtual double last_loss_sum() const = 0;
    virtual void all_reduce_grads(Comm& comm) = 0;
    // Data parallelism: sum each block's gradients over `comm` as soon as the backward has made
    // them, while it goes on to the block below (the buckets of PyTorch's DDP and llm.c);
    // all_reduce_grads then only waits for the last. nullptr, or a backend that cannot overlap:
    // everything is summed in all_reduce_grads.
    virtual void set_gradient_comm(Comm* comm) { (void)comm; }
    // Data parallelism: each rank of `comm` applies AdamW to its 1/P of the weights and sends them
    // to the others (optim/update_shard.h; nullptr: every rank updates every weight). The weights
    // are the same bits either way. After a split update only the rank's own shard of the moments
    // (and of the GPU's master weights) is current: every rank calls gather_state() together
    // before anything reads or replaces them (a checkpoint); get_params / get_opt_state (and the
    // GPU's set_params / set_opt_state) refuse until then.
    virtual void set_update_comm(Comm* comm) { (void)comm; }
    virtual void gather_state() {}
    // Context parallelism: this rank holds its zigzag rows of each window (layers/ring_plan.h)
    // and attention runs over the ring of `comm` (nullptr: the whole window is here).
    virtual void set_context_parallel(Comm* comm) = 0;
    virtual void adamw_step(float lr, float grad_scale, const AdamWConfig& opt, int step) = 0;
    virtual void logits_at(float* out, int b, int t) = 0;  // (V) after a forward
    // Where one step's time goes (train --op-split, bench_train --split): on, the next
    // forward_backward to adamw_step marks each op's end; take_op_split returns ms per kind of
    // op in the order each first came (empty where the backend cannot time its ops).
    virtual void time_ops(bool on) { (void)on; }
    virtual std::vector<std::pair<std::string, double>> take_op_split() { return {}; }

    // fp32 host copies of the state, in param_layout order, for checkpoints.
    virtual void get_params(float* dst) = 0;
    virtual void set_params(const float* src) = 0;
    virtual void get_opt_state(float* m, float* v) = 0;
    virtual void set_opt_state(const float* m, const float* v) = 0;
};

class CpuBackend : public ModelBackend {
   public:
    explicit CpuBackend(const GPTConfig& cfg) : model_(cfg), m_(model_.num_params), v_(model_.num_params) {}
    std::string name() const override { return "cpu"; }
    const GPTConfig& config() const override { return model_.cfg; }
    size_t num_params() const override { return model_.num_params; }
    void init_weights(uint64_t seed) { model_.init_weights(seed); }

    float forward(const int* inputs, const int* targets, const int* doc_start, int B, int T, const int* positions) override {
        return model_.forward(inputs, targets, doc_start, B, T, positions);
    }
    // Allocates the activations now, so out-of-memory ends the run before it writes anything.
    void reserve(int B, int T) override { model_.resize(B, T); }
    void set_recompute(Recompute r) override { model_.set_recompute(r); }
    Recompute recompute() const override { return model_.recompute; }
    MemoryNeeds memory_needs(int B, int T, Recompute r) const override {
        MemoryNeeds n;
        n.held = model_.num_params * sizeof(float) * 4;  // weights, gradients, AdamW m and v
        n.activations = GPT<float>::activation_elements(model_.cfg, B, T, r) * sizeof(float);
        n.per_token_per_layer = (GPT<float>::activation_elements(model_.cfg, 1, 1, r) -
                                 GPT<float>::activation_elements(with_layers(0), 1, 1, r)) * sizeof(float) /
                                std::max(1, model_.cfg.n_layer);
        return n;
    }
    size_t memory_available() const override {
        return (size_t)host_bytes_available() +
               GPT<float>::activation_elements(model_.cfg, model_.B, model_.Tn, model_.recompute) * sizeof(float);
    }
    const char* memory_name() const override { return "host"; }
    const GPT<float>& model() const { return model_; }  // for inference built on it (model/kv_cache.h)
    void zero_grad() override { model_.zero_grad(); }
    void backward() override { model_.backward(); }
    double grad_norm() override { return std::sqrt(grad_norm_squared(model_.grads.data(), model_.num_params)); }
    void set_loss_count(int n) override { model_.loss_count = n; }
    double last_loss_sum() const override { return model_.last_loss_sum; }
    void all_reduce_grads(Comm& comm) override { comm.all_reduce_sum(model_.grads.data(), model_.num_params); }
    void set_context_parallel(Comm* comm) override { model_.cp = comm; }
    void adamw_step(float lr, float grad_scale, const AdamWConfig& o, int step) override {
        const size_t n = model_.num_params;
        const UpdateShard mine = upd_ ? update_shard(n, upd_->size(), upd_->rank()) : UpdateShard{0, n};
        for_each_in_shard(model_.layout, mine, [&](const ParamTensor& t, size_t at, size_t count) {
            adamw_update(model_.params.data() + at, m_.data() + at, v_.data() + at, model_.grads.data() + at, count, lr,
                         o.beta1, o.beta2, o.eps, t.decay ? o.weight_decay : 0.0f, step, grad_scale);
        });
        if (!upd_) return;
        share_shards(*upd_, model_.params.data(), n, sizeof(float));  // the owners' weights to every rank
        moments_split_ = true;
    }
    void set_update_comm(Comm* comm) override {
        if (moments_split_) fatal("internal: set_update_comm while the moments are split: gather_state() first");
        upd_ = comm && comm->size() > 1 ? comm : nullptr;
    }
    void gather_state() override {
        if (!moments_split_) return;
        share_shards(*upd_, m_.data(), m_.size(), sizeof(float));
        share_shards(*upd_, v_.data(), v_.size(), sizeof(float));
        moments_split_ = false;
    }
    void logits_at(float* out, int b, int t) override { model_.logits_at(out, b, t); }
    void get_params(float* dst) override { std::copy(model_.params.begin(), model_.params.end(), dst); }
    void set_params(const float* src) override { std::copy(src, src + model_.num_params, model_.params.begin()); }
    void get_opt_state(float* m, float* v) override {
        if (moments_split_) fatal("internal: get_opt_state while the AdamW moments are split over the ranks: call gather_state() on every rank first");
        std::copy(m_.begin(), m_.end(), m);
        std::copy(v_.begin(), v_.end(), v);
    }
    void set_opt_state(const float* m, const float* v) override {
        if (moments_split_) fatal("internal: set_opt_state while the AdamW moments are split over the ranks: call gather_state() on every rank first");
        std::copy(m, m + m_.size(), m_.begin());
        std::copy(v, v + v_.size(), v_.begin());
    }

   private:
    GPTConfig with_layers(int L) const {
        GPTConfig c = model_.cfg;
        c.n_layer = L;
        return c;
    }
    GPT<float> model_;
    std::vector<float> m_, v_;  // AdamW moments, fp32
    Comm* upd_ = nullptr;       // data parallel: the update split over its ranks (optim/update_shard.h)
    bool moments_split_ = false;
};
