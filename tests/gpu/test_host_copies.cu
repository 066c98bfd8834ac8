// The host's copies from the GPU during training must not block while the stream is held up (by a
// transfer from a rank that hangs): only then does comm/host_wait.cuh's timed wait get to run and
// end the job. A kernel holds a stream until the host releases it 1 s later (a flag in mapped
// memory); a copy queued behind it into a PinnedBuffer (core/pinned_buffer.h) must return at once,
// and, as the control that shows the test can fail, the same copy into a std::vector blocks until
// the release.
// Usage: test_host_copies. Prints PASS/FAIL lines and "N passed, M failed".
#include <chrono>
#include <thread>
#include <vector>
#include "core/cuda_check.h"
#include "core/pinned_buffer.h"
#include "tests/check.h"

__global__ void hold_until_released(const volatile int* flag) {
    while (*flag == 0) __nanosleep(1000);
}

int main() {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("SKIP test_host_copies: no CUDA device\n0 passed, 0 failed\n");
        return 0;
    }
    constexpr size_t n = 1 << 16;
    constexpr int hold_ms = 1000;
    int* flag_h = nullptr;
    int* flag_d = nullptr;
    CUDA_CHECK(cudaHostAlloc(&flag_h, sizeof(int), cudaHostAllocMapped));
    CUDA_CHECK(cudaHostGetDevicePointer(&flag_d, flag_h, 0));
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float* src = nullptr;
    CUDA_CHECK(cudaMalloc(&src, n * sizeof(float)));
    CUDA_CHECK(cudaMemset(src, 0, n * sizeof(float)));
    CUDA_CHECK(cudaDeviceSynchronize());

    // How long cudaMemcpyAsync into dst takes to return while the stream is held for hold_ms.
    auto held_copy_ms = [&](float* dst) {
        *(volatile int*)flag_h = 0;
        hold_until_released<<<1, 1, 0, s>>>(flag_d);
        CUDA_CHECK_LAST();
        std::thread release([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
            *(volatile int*)flag_h = 1;
        });
        const auto t0 = std::chrono::steady_clock::now();
        CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost, s));
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        release.join();
        CUDA_CHECK(cudaStreamSynchronize(s));
        return ms;
    };

    PinnedBuffer<float> pinned;
    pinned.resize(n);
    cudaPointerAttributes attr{};
    CUDA_CHECK(cudaPointerGetAttributes(&attr, pinned.data()));
    check(attr.type == cudaMemoryTypeHost, "a PinnedBuffer is page-locked host memory");
    float* before = pinned.data();
    pinned.resize(n / 2);
    check(pinned.data() == before && pinned.size() == n / 2, "shrinking a PinnedBuffer keeps its memory");

    const double pinned_ms = held_copy_ms(pinned.data());
    check(pinned_ms < 100, strf("a copy into a PinnedBuffer returns while the stream is held (%.1f ms, the hold %d ms)",
                                pinned_ms, hold_ms));
    std::vector<float> pageable(n);
    const double pageable_ms = held_copy_ms(pageable.data());
    check(pageable_ms > 0.5 * hold_ms,
          strf("control: the same copy into a std::vector blocks until the stream is released (%.1f ms)", pageable_ms));

    CUDA_CHECK(cudaFree(src));
    CUDA_CHECK(cudaStreamDestroy(s));
    CUDA_CHECK(cudaFreeHost(flag_h));
    return check_report();
}
