// What train and infer need from a model, whatever runs it. The CPU backend (here) wraps the
// reference GPT<float>; the CUDA backend implements the same interface with its own kernels,
// so train.cu and infer.cu pick one at run time and never look inside.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "layers/adamw.h"
#include "model/gpt.h"

struct AdamWConfig {
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
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
    // Context parallelism: this rank holds its zigzag rows of each window (layers/ring_plan.h)
    // and attention runs over the ring of `comm` (nullptr: the whole window is here).
    virtual void set_context_parallel(Comm* comm) = 0;
    virtual void adamw_step(float lr, float grad_scale, const AdamWConfig& opt, int step) = 0;
    virtual void logits_at(float* out, int b, int t) = 0;  // (V) after a forward

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
    void zero_grad() override { model_.zero_grad(); }
    void backward() override { model_.backward(); }
    double grad_norm() override { return std::sqrt(grad_norm_squared(model_.grads.data(), model_.num_params)); }
    void set_loss_count(int n) override { model_.loss_count = n; }
    double last_loss_sum() const override { return model_.last_loss_sum; }
    void all_reduce_grads(Comm& comm) override { comm.all_reduce_sum(model_.grads.data(), model_.num_params); }
    void set_context_parallel(Comm* comm) override { model_.cp = comm; }
    void adamw_step(float lr, float grad_scale, const AdamWConfig& o, int step) override {
        for (const ParamTensor& t : model_.layout) {
            const size_t at = t.offset;
            adamw_update(model_.params.data() + at, m_.data() + at, v_.data() + at, model_.grads.data() + at, t.size,
                         lr, o.beta1, o.beta2, o.eps, t.decay ? o.weight_decay : 0.0f, step, grad_scale);
        }
    }
    void logits_at(float* out, int b, int t) override { model_.logits_at(out, b, t); }
    void get_params(float* dst) override { std::copy(model_.params.begin(), model_.params.end(), dst); }
    void set_params(const float* src) override { std::copy(src, src + model_.num_params, model_.params.begin()); }
    void get_opt_state(float* m, float* v) override {
        std::copy(m_.begin(), m_.end(), m);
        std::copy(v_.begin(), v_.end(), v);
    }
    void set_opt_state(const float* m, const float* v) override {
        std::copy(m, m + m_.size(), m_.begin());
        std::copy(v, v + v_.size(), v_.begin());
    }

   private:
    GPT<float> model_;
    std::vector<float> m_, v_;  // AdamW moments, fp32
};
