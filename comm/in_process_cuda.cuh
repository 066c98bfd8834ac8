// The copy of the in-process communicator (comm/in_process.h) when its ranks' buffers are device
// memory: simulated ranks on one GPU (train --simulate-ranks, the ring and context-parallel tests).
// The communicator treats a copy as finished when it returns: the sender may then overwrite its
// buffer and the receiver's compute stream may read what arrived. cudaMemcpy does not promise
// that: a device-to-device copy (and one from pageable host memory) may return while the copy is
// still queued on the legacy default stream, and the ranks' streams are non-blocking, so nothing
// orders them after it. Waiting on the legacy stream does. (Without the wait, the ring's backward
// can read half-copied dK/dV, as compute-sanitizer's slower timing shows.)
#pragma once
#include <cstddef>
#include "layers/cuda/common.cuh"

inline void in_process_device_copy(void* dst, const void* src, size_t bytes) {
    if (!bytes) return;
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
    CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}
