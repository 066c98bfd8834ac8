// Page-locked host memory for the copies a GPU makes to the host during training. A copy from the
// device into pageable memory (a std::vector, a local variable) is synchronous even through
// cudaMemcpyAsync: the call returns only once the stream has reached it. When the stream waits on
// another rank that hangs, the host would then block inside the copy for ever, before
// comm/host_wait.cuh's timed wait could notice. Into page-locked memory the call returns at once.
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include "core/cuda_check.h"

template <typename T>
class PinnedBuffer {
   public:
    PinnedBuffer() = default;
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    ~PinnedBuffer() {
        if (p_) cudaFreeHost(p_);
    }
    // n elements, zeroed when the buffer grows; the memory is only reallocated to grow.
    void resize(size_t n) {
        if (n > capacity_) {
            if (p_) CUDA_CHECK(cudaFreeHost(p_));
            p_ = nullptr;
            CUDA_CHECK(cudaMallocHost(&p_, n * sizeof(T)));
            capacity_ = n;
            for (size_t i = 0; i < n; i++) p_[i] = T();
        }
        n_ = n;
    }
    T* data() { return p_; }
    const T* data() const { return p_; }
    size_t size() const { return n_; }
    T* begin() { return p_; }
    T* end() { return p_ + n_; }
    T& operator[](size_t i) { return p_[i]; }

   private:
    T* p_ = nullptr;
    size_t n_ = 0, capacity_ = 0;
};
