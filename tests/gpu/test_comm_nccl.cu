// The NCCL communicator (comm/nccl.h) on real GPUs, with any number of ranks:
//   build/test_comm_nccl                          one rank (no launcher needed)
//   scripts/launch.sh P build/test_comm_nccl      P ranks on this host, one GPU each
//   scripts/launch.sh 2 build/test_comm_nccl --mismatch
//       must exit non-zero with "... differs between ranks ...": the start-up check as users see it
// Checks: sendrecv around the ring both ways (a distinct pattern per sender, sizes that differ by
// sender, 0-byte sides, several calls in flight before one wait), all_reduce_sum (exact on
// integers, close to a double sum otherwise, the same bits on every rank), broadcast from every
// root, barrier (leaves the stream drained), check_same_everywhere (passes equal hashes, names the
// ranks of different ones, the communicator stays usable), split (even and odd ranks apart), and
// abort (later calls fail). Receive
// buffers are poisoned (0xff; patterns never hold 0xff) and have a guard tail, so an unwritten or
// overrun byte fails. Every check ends in a synchronize, so a wrong size or a missing rank fails
// at the timeout instead of hanging.
// Output (every rank): PASS/FAIL lines, then "N passed, M failed"; exit 1 on a failure. With no
// GPU: a SKIP line, "0 passed, 0 failed", exit 0.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>
#include "comm/nccl.h"
#include "layers/cuda/common.cuh"
#include "tests/check.h"

static const size_t kGuard = 64;  // poisoned bytes after every receive buffer

static uint64_t mix(uint64_t x) {
    x ^= x >> 31, x *= 0xbf58476d1ce4e5b9ull, x ^= x >> 27, x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
// Byte i of message `tag` from rank `sender`: differs by sender and tag, and is never the poison.
static uint8_t pattern(int sender, int tag, size_t i) {
    return (uint8_t)(mix(((uint64_t)sender << 56) ^ ((uint64_t)tag << 40) ^ i) % 255);
}
static uint64_t fnv1a(const void* p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t*)p)[i]) * 0x100000001b3ull;
    return h;
}

struct DevBuf {
    void* p = nullptr;
    size_t n;
    explicit DevBuf(size_t n) : n(n) { CUDA_CHECK(cudaMalloc(&p, n ? n : 1)); }
    ~DevBuf() { cudaFree(p); }
    DevBuf(const DevBuf&) = delete;
    void put(const std::vector<uint8_t>& h) { CUDA_CHECK(cudaMemcpy(p, h.data(), h.size(), cudaMemcpyHostToDevice)); }
    void poison() {
        CUDA_CHECK(cudaMemset(p, 0xff, n));
        CUDA_CHECK(cudaDeviceSynchronize());  // the communicator's stream does not wait for stream 0
    }
    std::vector<uint8_t> get() const {
        std::vector<uint8_t> h(n);
        CUDA_CHECK(cudaMemcpy(h.data(), p, n, cudaMemcpyDeviceToHost));
        return h;
    }
};

static std::vector<uint8_t> message(int sender, int tag, size_t n) {
    std::vector<uint8_t> m(n);
    for (size_t i = 0; i < n; i++) m[i] = pattern(sender, tag, i);
    return m;
}
// "" when buf holds sender's message `tag` of n bytes and then an untouched guard.
static std::string compare(const std::vector<uint8_t>& buf, int sender, int tag, size_t n) {
    char why[160];
    for (size_t i = 0; i < buf.size(); i++) {
        const uint8_t want = i < n ? pattern(sender, tag, i) : 0xff;
        if (buf[i] != want) {
            std::snprintf(why, sizeof why, "byte %zu of %zu is %02x, want %02x%s", i, n, buf[i], want,
                          i < n ? "" : " (the guard after the message was overwritten)");
            return why;
        }
    }
    return "";
}

// One batch of ring steps: every step enqueued first, one synchronize, then every step checked.
// size_of(s) is what rank s sends; dir +1 sends to the next rank, -1 to the previous.
template <class SizeOf>
static void ring(NcclComm& c, const std::string& name, int dir, int steps, SizeOf size_of) {
    const int me = c.rank(), to = dir > 0 ? comm_next(c) : comm_prev(c), from = dir > 0 ? comm_prev(c) : comm_next(c);
    const size_t sb = size_of(me), rb = size_of(from);
    std::vector<std::unique_ptr<DevBuf>> src, dst;
    for (int s = 0; s < steps; s++) {
        src.emplace_back(new DevBuf(sb));
        dst.emplace_back(new DevBuf(rb + kGuard));
        src[s]->put(message(me, 1000 * dir + s, sb));
        dst[s]->poison();
    }
    for (int s = 0; s < steps; s++) c.sendrecv(src[s]->p, sb, to, dst[s]->p, rb, from);
    c.synchronize();
    std::string bad;
    for (int s = 0; s < steps && bad.empty(); s++) bad = compare(dst[s]->get(), from, 1000 * dir + s, rb);
    check(bad.empty(),
          "sendrecv " + name + " (sends " + std::to_string(sb) + " B to rank " + std::to_string(to) + ", receives " +
              std::to_string(rb) + " B from rank " + std::to_string(from) + ")",
          bad);
}

static void test_sendrecv(NcclComm& c) {
    ring(c, "ring, 1 MiB + 3 each", +1, 1, [](int) { return (size_t)(1 << 20) + 3; });
    ring(c, "reverse ring, 4 B each", -1, 1, [](int) { return (size_t)4; });
    ring(c, "sizes differ by sender", +1, 1, [](int s) { return (size_t)1000 + 4099 * s + (s % 2) * 65536; });
    ring(c, "odd ranks send 0 B", +1, 1, [](int s) { return s % 2 ? (size_t)0 : (size_t)12345 + s; });
    ring(c, "even ranks send 0 B, reverse", -1, 1, [](int s) { return s % 2 ? (size_t)777 + s : (size_t)0; });
    ring(c, "3 steps in flight, 16 MiB + 1", +1, 3, [](int) { return (size_t)(16 << 20) + 1; });
}

static void test_all_reduce(NcclComm& c) {
    const int P = c.size(), me = c.rank();
    // Small integers add exactly in any order: the sum must be exact.
    {
        const size_t n = (1 << 20) + 7;
        std::vector<float> x(n), want(n, 0.0f);
        for (size_t i = 0; i < n; i++) {
            for (int r = 0; r < P; r++) want[i] += (float)((r + 1) * (int)(i % 1024) - 500);
            x[i] = (float)((me + 1) * (int)(i % 1024) - 500);
        }
        DevBuf d(n * sizeof(float));
        CUDA_CHECK(cudaMemcpy(d.p, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        c.all_reduce_sum((float*)d.p, n);
        c.synchronize();
        CUDA_CHECK(cudaMemcpy(x.data(), d.p, n * sizeof(float), cudaMemcpyDeviceToHost));
        size_t bad = 0;
        while (bad < n && x[bad] == want[bad]) bad++;
        check(bad == n, "all_reduce_sum exact on integers, n = " + std::to_string(n),
              bad == n ? "" : "element " + std::to_string(bad) + " is " + std::to_string(x[bad]) + ", want " + std::to_string(want[bad]));
    }
    // Values whose float sum depends on the order: close to the double sum, and the same bits on
    // every rank (what data-parallel gradients rely on).
    for (size_t n : {(size_t)1, (size_t)3 << 20}) {
        auto value = [](int r, size_t i) { return (float)((double)(mix((uint64_t)r << 40 ^ i) >> 11) * 0x1.0p-53 * 2 - 1); };
        std::vector<float> x(n);
        for (size_t i = 0; i < n; i++) x[i] = value(me, i);
        DevBuf d(n * sizeof(float));
        CUDA_CHECK(cudaMemcpy(d.p, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        c.all_reduce_sum((float*)d.p, n);
        c.synchronize();
        CUDA_CHECK(cudaMemcpy(x.data(), d.p, n * sizeof(float), cudaMemcpyDeviceToHost));
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            double want = 0;
            for (int r = 0; r < P; r++) want += value(r, i);
            const double err = std::fabs(x[i] - want);
            worst = std::max(worst, std::isnan(err) ? INFINITY : err);
        }
        const double tol = 1e-6 * P * P + 1e-7;
        char detail[96];
        std::snprintf(detail, sizeof detail, "max error %.2e (tol %.0e)", worst, tol);
        check(worst <= tol, "all_reduce_sum close to the double sum, n = " + std::to_string(n), detail);
        std::string why;
        try {
            c.check_same_everywhere(fnv1a(x.data(), n * sizeof(float)), "the all-reduced sum");
        } catch (const FatalError& e) {
            why = e.what();
        }
        check(why.empty(), "all_reduce_sum the same bits on every rank, n = " + std::to_string(n), why);
    }
    c.all_reduce_sum(nullptr, 0);  // nothing to do, and nothing enqueued
    c.synchronize();
    check(true, "all_reduce_sum of 0 floats returns");
}

static void test_broadcast(NcclComm& c) {
    for (int root = 0; root < c.size(); root++) {
        const size_t n = 777 + 1000 * (size_t)root + (1 << 16);
        DevBuf d(n + kGuard);
        d.poison();
        if (c.rank() == root) d.put(message(root, 5000 + root, n));
        c.broadcast(d.p, n, root);
        c.synchronize();
        const std::string bad = compare(d.get(), root, 5000 + root, n);
        check(bad.empty(), "broadcast " + std::to_string(n) + " B from root " + std::to_string(root), bad);
    }
}

static void test_barrier(NcclComm& c) {
    // A long all-reduce, then barrier(): the all-reduce must be complete when barrier returns.
    const size_t n = (size_t)32 << 20;
    std::vector<float> ones(n, 1.0f);
    DevBuf d(n * sizeof(float));
    CUDA_CHECK(cudaMemcpy(d.p, ones.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    c.all_reduce_sum((float*)d.p, n);
    c.barrier();
    const cudaError_t q = cudaStreamQuery(c.cuda_stream());
    check(q == cudaSuccess, "barrier leaves the communicator's stream drained", q == cudaSuccess ? "" : cudaGetErrorString(q));
    CUDA_CHECK(cudaMemcpy(ones.data(), d.p, n * sizeof(float), cudaMemcpyDeviceToHost));
    size_t bad = 0;
    while (bad < n && ones[bad] == (float)c.size()) bad++;
    check(bad == n, "barrier after a 128 MiB all-reduce: its result is there",
          bad == n ? "" : "element " + std::to_string(bad) + " is " + std::to_string(ones[bad]));
    for (int i = 0; i < 3; i++) c.barrier();
    check(true, "three barriers in a row return");
}

static void test_check_same(NcclComm& c) {
    std::string why;
    try {
        c.check_same_everywhere(0x0123456789abcdefull, "an equal value");
    } catch (const FatalError& e) {
        why = e.what();
    }
    check(why.empty(), "check_same_everywhere passes an equal hash", why);
    if (c.size() < 2) {
        std::printf("SKIP check_same_everywhere on different hashes: needs 2 or more ranks\n");
        return;
    }
    why.clear();
    try {
        c.check_same_everywhere(1000 + c.rank(), "the rank-dependent value");
    } catch (const FatalError& e) {
        why = e.what();
    }
    const bool named = why.find("the rank-dependent value differs between ranks (rank 0 has 00000000000003e8, rank 1 has "
                                "00000000000003e9)") != std::string::npos;
    check(named, "check_same_everywhere names two ranks of different hashes", why.empty() ? "no error" : why);
    c.barrier();
    check(true, "the communicator still works after a mismatch");
}

// Two sub-communicators, the even and the odd ranks (one with one rank): each sums over its own
// ranks only and runs its own ring.
static void test_split(NcclComm& c) {
    const int P = c.size(), me = c.rank(), color = me % 2;
    std::unique_ptr<NcclComm> sub = c.split(color, me);
    const int want_size = (P - color + 1) / 2;
    check(sub->size() == want_size && sub->rank() == me / 2 && sub->cuda_stream() != c.cuda_stream(),
          "split by parity: rank " + std::to_string(sub->rank()) + " of " + std::to_string(sub->size()) + ", want " +
              std::to_string(me / 2) + " of " + std::to_string(want_size) + ", on its own stream");
    float x = (float)(me + 1), want = 0;
    for (int r = color; r < P; r += 2) want += (float)(r + 1);
    DevBuf d(sizeof(float));
    CUDA_CHECK(cudaMemcpy(d.p, &x, sizeof x, cudaMemcpyHostToDevice));
    sub->all_reduce_sum((float*)d.p, 1);
    sub->synchronize();
    CUDA_CHECK(cudaMemcpy(&x, d.p, sizeof x, cudaMemcpyDeviceToHost));
    check(x == want, "split: all_reduce_sum over the " + std::string(color ? "odd" : "even") + " ranks only",
          x == want ? "" : "got " + std::to_string(x) + ", want " + std::to_string(want));
    ring(*sub, "ring of the split communicator, 100003 B", +1, 1, [](int) { return (size_t)100003; });
}

// On a communicator of this rank alone: aborting one that others share closes its connections
// while another rank may still be finishing the last collective (its receive of our final bytes
// over sockets), and that rank would fail for our abort.
static void test_abort(NcclComm& c) {
    std::unique_ptr<NcclComm> alone = c.split(c.rank(), 0);
    alone->barrier();
    alone->abort("test_comm_nccl aborts on purpose");
    std::string why;
    try {
        alone->barrier();
    } catch (const FatalError& e) {
        why = e.what();
    }
    check(why.find("aborted") != std::string::npos && why.find("on purpose") != std::string::npos,
          "calls after abort fail naming the reason", why.empty() ? "no error" : why);
}

int main(int argc, char** argv) {
    return guarded_main([&] {
        bool mismatch = false;
        for (int i = 1; i < argc; i++) {
            if (std::strcmp(argv[i], "--mismatch") == 0)
                mismatch = true;
            else
                fatal("unknown argument %s: usage: [scripts/launch.sh P] test_comm_nccl [--mismatch]", argv[i]);
        }
        int devices = 0;
        const cudaError_t e = cudaGetDeviceCount(&devices);
        if (e != cudaSuccess || devices == 0) {
            std::printf("SKIP test_comm_nccl: no CUDA device\n0 passed, 0 failed\n");
            return 0;
        }
        std::unique_ptr<NcclComm> comm = nccl_comm_from_env();
        if (mismatch) {
            if (comm->size() < 2) fatal("--mismatch needs 2 or more ranks: scripts/launch.sh 2 %s --mismatch", argv[0]);
            comm->check_same_everywhere(1000 + comm->rank(), "the --mismatch value");
            fatal("--mismatch: check_same_everywhere let different values through");
        }
        std::printf("rank %d of %d, GPU %d of this host\n", comm->rank(), comm->size(), [] {
            int d = 0;
            CUDA_CHECK(cudaGetDevice(&d));
            return d;
        }());
        test_sendrecv(*comm);
        test_all_reduce(*comm);
        test_broadcast(*comm);
        test_barrier(*comm);
        test_check_same(*comm);
        test_split(*comm);
        test_abort(*comm);
        return check_report();
    });
}
