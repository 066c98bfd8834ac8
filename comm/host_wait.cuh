// The host's wait for a compute stream that may itself wait on other ranks' transfers (the ring's
// blocks, the gradient sum, the weights shared after a split update). cudaStreamSynchronize there
// would wait for ever behind a rank that hangs: its transfers never come, and no NCCL call of this
// rank is running to notice. So with a communicator of 2+ ranks the host polls the stream,
// spinning for the first 100 ms (a training step's waits are short, and a sleep would add its
// wake-up to every step) and sleeping 1 ms at a time after that. A wait may be long and healthy
// (a dense ring's step grows with the window's square: over a minute at 1M tokens), so the
// limit is on time without progress: the caller's probe says when the stream has passed another
// of its marks (an event after each block, ProgressMarks). Past LONGNET_COMM_TIMEOUT_S without progress it aborts the
// communicators, so that NCCL's kernels let go of the GPU, and fails with one line.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <thread>
#include <vector>
#include "comm/comm.h"
#include "comm/launcher_env.h"
#include "core/cuda_check.h"
#include "core/error.h"

// Events recorded on a stream at points of its work (after each transformer block); done()
// tells whether the stream passed any of them since its last call.
class ProgressMarks {
   public:
    ProgressMarks() = default;
    ProgressMarks(const ProgressMarks&) = delete;
    ProgressMarks& operator=(const ProgressMarks&) = delete;
    ~ProgressMarks() {
        for (cudaEvent_t e : events_) cudaEventDestroy(e);
    }
    void mark(cudaStream_t stream) {
        if (events_.empty()) {
            events_.resize(kSlots);
            for (cudaEvent_t& e : events_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        }
        // A slot recorded again before it was seen stands for later work: its completion is still progress.
        CUDA_CHECK(cudaEventRecord(events_[recorded_ % kSlots], stream));
        recorded_++;
    }
    bool done() {
        bool any = false;
        while (seen_ < recorded_) {
            const cudaError_t e = cudaEventQuery(events_[seen_ % kSlots]);
            if (e == cudaErrorNotReady) break;
            CUDA_CHECK(e);
            seen_++, any = true;
        }
        return any;
    }

   private:
    static constexpr int kSlots = 256;
    std::vector<cudaEvent_t> events_;
    uint64_t recorded_ = 0, seen_ = 0;
};

// `comms`: the communicators the stream may wait on (nullptr entries skipped; the first names the
// rank). `progressed`: true when the stream got further since the last call (nullptr: never).
inline void host_wait(cudaStream_t stream, std::initializer_list<Comm*> comms, const char* what,
                      const std::function<bool()>& progressed = nullptr) {
    Comm* first = nullptr;
    for (Comm* c : comms)
        if (c && c->size() > 1 && !first) first = c;
    if (!first) {
        CUDA_CHECK(cudaStreamSynchronize(stream));
        return;
    }
    static const double limit_s = comm_timeout_from_env();
    using Clock = std::chrono::steady_clock;
    const Clock::time_point t0 = Clock::now();
    Clock::time_point last = t0;  // the last progress seen
    for (;;) {
        const cudaError_t e = cudaStreamQuery(stream);
        if (e == cudaSuccess) return;
        if (e != cudaErrorNotReady) CUDA_CHECK(e);
        const Clock::time_point now = Clock::now();
        if (progressed && progressed()) last = now;
        const double still = std::chrono::duration<double>(now - last).count();
        if (still > limit_s) {
            const std::string why = strf("the GPU made no progress for %.0f s in %s, waiting for another rank's transfers "
                                         "(a rank died or hangs)", still, what);
            for (Comm* c : comms)
                if (c) c->abort(why);
            fatal("rank %d: %s: aborted the communicator; see the other ranks' errors (LONGNET_COMM_TIMEOUT_S sets the limit)",
                  first->rank(), why.c_str());
        }
        if (std::chrono::duration<double>(now - t0).count() < 0.1) std::this_thread::yield();
        else std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}
