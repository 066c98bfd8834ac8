// Where a training step's GPU time goes, op by op (bench_train --split). After each op
// the backend marks its stream with the op's kind ("matmul", "attention", "layernorm", ...); the
// time between a mark and the one before it is that op's, so the kinds add up to the whole step
// with nothing left over and nothing counted twice. Off (the default) a mark does nothing.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>
#include "core/cuda_check.h"

class OpTimer {
   public:
    OpTimer() = default;
    OpTimer(const OpTimer&) = delete;
    OpTimer& operator=(const OpTimer&) = delete;
    ~OpTimer() {
        for (cudaEvent_t e : events_) cudaEventDestroy(e);
    }

    void enable(bool on) { on_ = on, used_ = 0; }
    bool enabled() const { return on_; }

    // The step begins: what follows on `stream` is timed from here.
    void start(cudaStream_t stream) {
        used_ = 0;
        mark("", stream);
    }
    // The op just queued on `stream` was of this kind.
    void mark(const char* kind, cudaStream_t stream) {
        if (!on_) return;
        if (used_ == events_.size()) {
            cudaEvent_t e;
            CUDA_CHECK(cudaEventCreate(&e));
            events_.push_back(e), kinds_.emplace_back();
        }
        CUDA_CHECK(cudaEventRecord(events_[used_], stream));
        kinds_[used_++] = kind;
    }

    // ms per kind since start(), in the order each kind first came (waits for the last mark).
    std::vector<std::pair<std::string, double>> take() {
        std::vector<std::pair<std::string, double>> out;
        if (used_ < 2) return out;
        CUDA_CHECK(cudaEventSynchronize(events_[used_ - 1]));
        for (size_t i = 1; i < used_; i++) {
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i - 1], events_[i]));
            size_t k = 0;
            while (k < out.size() && out[k].first != kinds_[i]) k++;
            if (k == out.size()) out.emplace_back(kinds_[i], 0.0);
            out[k].second += ms;
        }
        used_ = 0;
        return out;
    }

   private:
    bool on_ = false;
    std::vector<cudaEvent_t> events_;
    std::vector<std::string> kinds_;
    size_t used_ = 0;  // marks since start()
};
