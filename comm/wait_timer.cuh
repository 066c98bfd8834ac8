// How long a compute stream stands still waiting for communication: the "exposed communication"
// of a training step (train --time-comm). Every place where the
// compute stream waits for a communicator's stream (the ring's received blocks, the gradient
// sum) goes through comm_wait_timer().wait(compute, ready). While timing is on, the wait is
// bracketed by two events recorded on the compute stream: the time between them is how long the
// stream stood still for the transfer (about 0 when it had already finished). take_ms() sums the
// pairs recorded since its last call. Off (the default) it is a plain cudaStreamWaitEvent.
// One per thread, as the ring's buffer pool: simulated ranks run as threads.
#pragma once
#include <cstddef>
#include <utility>
#include <vector>
#include "core/cuda_check.h"

class CommWaitTimer {
   public:
    CommWaitTimer() = default;
    CommWaitTimer(const CommWaitTimer&) = delete;
    CommWaitTimer& operator=(const CommWaitTimer&) = delete;
    ~CommWaitTimer() {
        for (auto& [a, b] : pairs_) cudaEventDestroy(a), cudaEventDestroy(b);
    }

    void enable(bool on) { on_ = on; }
    bool enabled() const { return on_; }

    // The compute stream waits for `ready` (an event recorded on a communicator's stream).
    void wait(cudaStream_t compute, cudaEvent_t ready) {
        if (!on_) {
            CUDA_CHECK(cudaStreamWaitEvent(compute, ready, 0));
            return;
        }
        if (used_ == pairs_.size()) {
            std::pair<cudaEvent_t, cudaEvent_t> p;
            CUDA_CHECK(cudaEventCreate(&p.first));
            CUDA_CHECK(cudaEventCreate(&p.second));
            pairs_.push_back(p);
        }
        CUDA_CHECK(cudaEventRecord(pairs_[used_].first, compute));
        CUDA_CHECK(cudaStreamWaitEvent(compute, ready, 0));
        CUDA_CHECK(cudaEventRecord(pairs_[used_].second, compute));
        used_++;
    }

    // The waits since the last call, in ms (it waits for the last of them to have happened).
    double take_ms() {
        double ms = 0;
        for (size_t i = 0; i < used_; i++) {
            CUDA_CHECK(cudaEventSynchronize(pairs_[i].second));
            float t = 0;
            CUDA_CHECK(cudaEventElapsedTime(&t, pairs_[i].first, pairs_[i].second));
            ms += t;
        }
        used_ = 0;
        return ms;
    }

   private:
    bool on_ = false;
    std::vector<std::pair<cudaEvent_t, cudaEvent_t>> pairs_;
    size_t used_ = 0;  // pairs recorded since the last take_ms
};

inline CommWaitTimer& comm_wait_timer() {
    static thread_local CommWaitTimer timer;
    return timer;
}
