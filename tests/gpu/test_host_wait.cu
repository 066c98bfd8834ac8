// The host's waits for a compute stream held up by other ranks (comm/host_wait.cuh) on one GPU,
// the other rank played by the host: kernels that spin until the host releases them (flags in
// mapped memory) stand for transfers from a rank that is slow or hangs.
//   1. The host's copies from the GPU must not block while the stream is held: only then does the
//      timed wait get to run. A copy queued behind a held kernel into a PinnedBuffer
//      (core/pinned_buffer.h) returns at once; the control, the same copy into a std::vector,
//      blocks until the release (so the check can fail).
//   2. A healthy wait longer than the time-out is not a hang: four held kernels released 0.6 s apart,
//      a progress mark after each (ProgressMarks), LONGNET_COMM_TIMEOUT_S=1: host_wait returns
//      after ~2.4 s and aborts nothing.
//   3. A hang is: one kernel held for good, no mark passed: host_wait aborts the communicator and
//      fails in one line within the time-out (run as a child process, `--hang`, since it exits).
// Usage: test_host_wait [--hang]. Prints PASS/FAIL lines and "N passed, M failed".
#include <sys/wait.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include "comm/host_wait.cuh"
#include "core/cuda_check.h"
#include "core/pinned_buffer.h"
#include "tests/check.h"

__global__ void hold_until_released(const volatile int* flag) {
    while (*flag == 0) __nanosleep(1000);
}

// The other rank of a job of two: nothing crosses it; abort says so on stdout.
class StandInComm : public Comm {
   public:
    int rank() const override { return 0; }
    int size() const override { return 2; }
    std::string name() const override { return "stand-in"; }
    void sendrecv(const void*, size_t, int, void*, size_t, int) override {}
    void all_reduce_sum(float*, size_t) override {}
    void broadcast(void*, size_t, int) override {}
    void barrier() override {}
    void abort(const std::string& why) override {
        aborted = true;
        std::printf("stand-in communicator aborted: %s\n", why.c_str());
        std::fflush(stdout);
    }
    bool aborted = false;
};

// Flags in mapped memory, one per held kernel.
struct Flags {
    static constexpr int kMax = 8;
    int* host = nullptr;
    int* device = nullptr;
    Flags() {
        CUDA_CHECK(cudaHostAlloc(&host, kMax * sizeof(int), cudaHostAllocMapped));
        CUDA_CHECK(cudaHostGetDevicePointer(&device, host, 0));
        for (int i = 0; i < kMax; i++) host[i] = 0;
    }
    ~Flags() { cudaFreeHost(host); }
    void release(int i) { ((volatile int*)host)[i] = 1; }
};

static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

static void test_copies(cudaStream_t s) {
    constexpr size_t n = 1 << 16;
    constexpr int hold_ms = 1000;
    Flags flags;
    float* src = nullptr;
    CUDA_CHECK(cudaMalloc(&src, n * sizeof(float)));
    CUDA_CHECK(cudaMemset(src, 0, n * sizeof(float)));
    CUDA_CHECK(cudaDeviceSynchronize());
    int next = 0;
    // How long cudaMemcpyAsync into dst takes to return while the stream is held for hold_ms.
    auto held_copy_ms = [&](float* dst) {
        const int f = next++;
        hold_until_released<<<1, 1, 0, s>>>(flags.device + f);
        CUDA_CHECK_LAST();
        std::thread release([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
            flags.release(f);
        });
        const auto t0 = std::chrono::steady_clock::now();
        CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost, s));
        const double ms = 1e3 * seconds_since(t0);
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
}

static void test_long_healthy_wait(cudaStream_t s) {
    constexpr int kHeld = 4, kApartMs = 600;
    Flags flags;
    ProgressMarks marks;
    StandInComm other;
    for (int i = 0; i < kHeld; i++) {
        hold_until_released<<<1, 1, 0, s>>>(flags.device + i);
        CUDA_CHECK_LAST();
        marks.mark(s);
    }
    std::thread release([&] {
        for (int i = 0; i < kHeld; i++) {
            std::this_thread::sleep_for(std::chrono::milliseconds(kApartMs));
            flags.release(i);
        }
    });
    const auto t0 = std::chrono::steady_clock::now();
    host_wait(s, {&other}, "the stand-in step", [&] { return marks.done(); });
    const double took = seconds_since(t0);
    release.join();
    check(took > 2.0 && !other.aborted,
          strf("a wait of %.1f s with a mark passed every 0.6 s outlasts the 1 s time-out and aborts nothing", took));
}

// The child: one kernel held for good; host_wait must end the process.
static int hang_child() {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    Flags flags;
    ProgressMarks marks;
    StandInComm other;
    marks.mark(s);  // passed at once: progress before the hang
    hold_until_released<<<1, 1, 0, s>>>(flags.device);
    CUDA_CHECK_LAST();
    marks.mark(s);  // never passed
    const int rc = guarded_main([&] {
        host_wait(s, {&other}, "the stand-in step", [&] { return marks.done(); });
        std::printf("host_wait returned from a hang\n");
        return 0;
    });
    flags.release(0);  // after the verdict: the kernel ends, and the process can exit
    return rc;
}

static void test_hang(const char* self) {
    const std::string cmd = std::string(self) + " --hang 2>&1";
    const auto t0 = std::chrono::steady_clock::now();
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) {
        check(false, "a held stream without progress ends the process", "popen failed");
        return;
    }
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    const int status = pclose(p);
    const double took = seconds_since(t0);
    const bool failed = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) != 0;
    const bool named = out.find("stand-in communicator aborted: the GPU made no progress for 1 s in the stand-in step") !=
                           std::string::npos &&
                       out.find("error: rank 0: the GPU made no progress") != std::string::npos;
    check(failed && named && took < 10,
          strf("a held stream without progress aborts the communicator and fails in one line (%.1f s, exit %d)", took,
               WIFEXITED(status) ? WEXITSTATUS(status) : -1),
          named ? "" : out);
}

int main(int argc, char** argv) {
    setenv("LONGNET_COMM_TIMEOUT_S", "1", 1);  // host_wait reads it once, at its first call
    if (argc == 2 && std::strcmp(argv[1], "--hang") == 0) return hang_child();
    if (argc != 1) {
        std::fprintf(stderr, "usage: test_host_wait [--hang]\n");
        return 2;
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("SKIP test_host_wait: no CUDA device\n0 passed, 0 failed\n");
        return 0;
    }
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    test_copies(s);
    test_long_healthy_wait(s);
    test_hang(argv[0]);
    CUDA_CHECK(cudaStreamDestroy(s));
    return check_report();
}
