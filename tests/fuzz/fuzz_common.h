// Shared by the libFuzzer harnesses in tests/fuzz/ (see rules.mk and run_fuzz.sh).
//
// What counts as a finding, in every harness:
//   - FatalError (layers/common.h) and JsonError (core/json.h) are the clean "error: ..." a
//     user sees for a bad file: the expected outcome for bad input. Harnesses catch exactly
//     these two and return 0.
//   - Any other exception (std::invalid_argument from stoi/stoul, std::out_of_range,
//     std::length_error, std::bad_alloc, ...) is deliberately NOT caught: with no handler the
//     C++ runtime calls std::terminate at the throw site, libFuzzer reports the abort as a
//     crash, and the stack trace shows where it was thrown.
//   - ASan (memory errors, allocations over -malloc_limit_mb or too big to make) and UBSan
//     (-fno-sanitize-recover: signed overflow, float->int casts out of range, ...) reports.
//   - A broken invariant the harness checks itself (FUZZ_CHECK: prints what and traps).
//   - A hang past -timeout, or RSS past -rss_limit_mb.
#pragma once
#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

// A clean rejection (FatalError / JsonError). FUZZ_VERBOSE=1 prints its message, to see why a
// replayed input was turned down: FUZZ_VERBOSE=1 build/fuzz/fuzz_json FILE.
inline void fuzz_rejected(const std::exception& e) {
    static const bool verbose = std::getenv("FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "rejected: %s\n", e.what());
}

#define FUZZ_CHECK(cond, ...)                                                          \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            std::fprintf(stderr, __VA_ARGS__);                                         \
            std::fprintf(stderr, "\n");                                                \
            __builtin_trap();                                                          \
        }                                                                              \
    } while (0)

// The readers under test take a path: the input bytes go to an in-memory file (memfd, one per
// process, so parallel fuzzers never collide and nothing is left behind), read through
// /proc/self/fd/<n>.
class FuzzFile {
   public:
    explicit FuzzFile(const char* name) {
        fd_ = memfd_create(name, 0);
        if (fd_ < 0) {
            std::perror("memfd_create");
            __builtin_trap();
        }
        path_ = "/proc/self/fd/" + std::to_string(fd_);
    }
    const std::string& write(const uint8_t* data, size_t size) {
        if (ftruncate(fd_, 0) != 0) __builtin_trap();
        size_t done = 0;
        while (done < size) {
            const ssize_t n = pwrite(fd_, data + done, size - done, (off_t)done);
            if (n <= 0) __builtin_trap();
            done += (size_t)n;
        }
        return path_;
    }

   private:
    int fd_ = -1;
    std::string path_;
};

// A safetensors file from a fuzz input: one mode byte, then
//   mode even: the file's bytes, verbatim (the 8-byte header length is fuzzed too);
//   mode odd:  the JSON header, a NUL byte, the tensor data: the file gets the header's true
//              length, so mutations that grow or shrink the header still reach the checks past it.
// (make_seeds.cpp writes seeds in both forms: write_safetensors_seeds.)
inline std::string fuzz_safetensors_bytes(const uint8_t* data, size_t size) {
    std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (!(data[0] & 1)) return bytes;
    const size_t nul = std::min(bytes.find('\0'), bytes.size());
    const std::string header = bytes.substr(0, nul), body = nul < bytes.size() ? bytes.substr(nul + 1) : "";
    std::string file_bytes(8, '\0');
    for (int i = 0; i < 8; i++) file_bytes[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
    return file_bytes + header + body;
}
