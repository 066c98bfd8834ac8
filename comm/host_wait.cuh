// The host's wait for a compute stream that may itself wait on other ranks' transfers (the ring's
// blocks, the gradient sum, the weights shared after a split update). cudaStreamSynchronize there
// would wait for ever behind a rank that hangs: its transfers never come, and no NCCL call of this
// rank is running to notice. So with a communicator of 2+ ranks the host polls the stream,
// spinning for the first 100 ms (a training step's waits are short, and a sleep would add its
// wake-up to every step) and sleeping 1 ms at a time after that; past LONGNET_COMM_TIMEOUT_S it
// aborts the communicators, so that NCCL's kernels let go of the GPU, and fails with one line.
#pragma once
#include <chrono>
#include <initializer_list>
#include <thread>
#include "comm/comm.h"
#include "comm/launcher_env.h"
#include "core/cuda_check.h"
#include "core/error.h"

// `comms`: the communicators the stream may wait on (nullptr entries skipped; the first names the rank).
inline void host_wait(cudaStream_t stream, std::initializer_list<Comm*> comms, const char* what) {
    Comm* first = nullptr;
    for (Comm* c : comms)
        if (c && c->size() > 1 && !first) first = c;
    if (!first) {
        CUDA_CHECK(cudaStreamSynchronize(stream));
        return;
    }
    static const double limit_s = comm_timeout_from_env();
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        const cudaError_t e = cudaStreamQuery(stream);
        if (e == cudaSuccess) return;
        if (e != cudaErrorNotReady) CUDA_CHECK(e);
        const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (waited > limit_s) {
            const std::string why = strf("the GPU waited %.0f s in %s for another rank's transfers (a rank died or hangs)",
                                         waited, what);
            for (Comm* c : comms)
                if (c) c->abort(why);
            fatal("rank %d: %s: aborted the communicator; see the other ranks' errors (LONGNET_COMM_TIMEOUT_S sets the limit)",
                  first->rank(), why.c_str());
        }
        if (waited < 0.1) std::this_thread::yield();
        else std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}
