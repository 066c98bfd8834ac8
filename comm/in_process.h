// P simulated ranks in one process, one thread each, behind the Comm interface (comm/comm.h):
// the ring and the parallel training code run unchanged on a 2-core CI machine or one GPU.
//   InProcessWorld world(P);                      // shared by the ranks
//   run_ranks(world, [&](Comm& comm) { ... });   // one thread per rank; rethrows the first error
// Messages are copied by world.copy (memcpy; a GPU test sets cudaMemcpy with cudaMemcpyDefault,
// so device buffers work too). Reductions add in rank order, so every rank gets the same bits.
// A rank that throws aborts the world: the others' waits fail instead of hanging, and a wait
// longer than world.timeout_s fails naming the rank it waited for.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>
#include "comm/comm.h"
#include "core/error.h"

struct InProcessWorld {
    explicit InProcessWorld(int P) : P(P), slots((size_t)P * P), ptrs(P) {
        if (P < 1) fatal("in-process communicator: %d ranks, need at least 1", P);
    }
    const int P;
    std::function<void(void* dst, const void* src, size_t bytes)> copy = [](void* d, const void* s, size_t n) {
        if (n) std::memcpy(d, s, n);
    };
    double timeout_s = 300;

    struct Slot {
        const void* src = nullptr;
        size_t bytes = 0;
        bool full = false;
    };
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Slot> slots;        // slots[from * P + to]
    std::vector<void*> ptrs;        // the buffers of a collective, by rank
    long long barrier_gen = 0;
    int barrier_count = 0;
    bool aborted = false;
    std::string abort_why;

    // Waits (lock held) until ready(); fails on abort or after timeout_s, naming `whom`.
    template <class Ready>
    void wait(std::unique_lock<std::mutex>& lk, Ready ready, int rank, const char* what) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        while (!ready()) {
            if (aborted) fatal("rank %d: the job was aborted (%s)", rank, abort_why.c_str());
            if (cv.wait_until(lk, deadline) == std::cv_status::timeout && !ready())
                fatal("rank %d: waited %.0f s in %s for the other ranks: a rank died or hangs", rank, timeout_s, what);
        }
        if (aborted) fatal("rank %d: the job was aborted (%s)", rank, abort_why.c_str());
    }
    void barrier(int rank) {
        std::unique_lock<std::mutex> lk(mu);
        const long long gen = barrier_gen;
        if (++barrier_count == P) {
            barrier_count = 0;
            barrier_gen++;
            cv.notify_all();
            return;
        }
        wait(lk, [&] { return barrier_gen != gen; }, rank, "a barrier");
    }
    void abort(const std::string& why) {
        std::lock_guard<std::mutex> lk(mu);
        if (!aborted) aborted = true, abort_why = why;
        cv.notify_all();
    }
};

class InProcessComm : public Comm {
   public:
    InProcessComm(InProcessWorld& w, int rank) : w_(w), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return w_.P; }
    std::string name() const override { return "in-process"; }

    void sendrecv(const void* src, size_t send_bytes, int to, void* dst, size_t recv_bytes, int from) override {
        check_peer(to), check_peer(from);
        std::unique_lock<std::mutex> lk(w_.mu);
        InProcessWorld::Slot& out = w_.slots[(size_t)rank_ * w_.P + to];
        if (send_bytes) {
            w_.wait(lk, [&] { return !out.full; }, rank_, "sendrecv (previous send)");
            out = InProcessWorld::Slot{src, send_bytes, true};
            w_.cv.notify_all();
        }
        if (recv_bytes) {
            InProcessWorld::Slot& in = w_.slots[(size_t)from * w_.P + rank_];
            w_.wait(lk, [&] { return in.full; }, rank_, "sendrecv (receive)");
            if (in.bytes != recv_bytes)
                fatal("rank %d: expects %zu bytes from rank %d, which sends %zu: the ranks disagree on the plan", rank_,
                      recv_bytes, from, in.bytes);
            w_.copy(dst, in.src, recv_bytes);
            in.full = false;
            w_.cv.notify_all();
        }
        if (send_bytes) w_.wait(lk, [&] { return !out.full; }, rank_, "sendrecv (send)");  // src may change now
    }

    void all_reduce_sum(float* x, size_t n) override {
        post(x);
        std::vector<float> sum(n, 0.0f), part(n);
        for (int r = 0; r < w_.P; r++) {  // rank order: the same bits everywhere
            w_.copy(part.data(), w_.ptrs[r], n * sizeof(float));
            for (size_t i = 0; i < n; i++) sum[i] += part[i];
        }
        w_.barrier(rank_);  // everyone has read every buffer
        w_.copy(x, sum.data(), n * sizeof(float));
        w_.barrier(rank_);
    }

    void broadcast(void* x, size_t bytes, int root) override {
        check_peer(root);
        post(x);
        if (rank_ != root) w_.copy(x, w_.ptrs[root], bytes);
        w_.barrier(rank_);
    }

    void barrier() override { w_.barrier(rank_); }
    void abort(const std::string& why) override { w_.abort("rank " + std::to_string(rank_) + ": " + why); }

   private:
    void post(void* x) {
        {
            std::lock_guard<std::mutex> lk(w_.mu);
            w_.ptrs[rank_] = x;
        }
        w_.barrier(rank_);
    }
    void check_peer(int r) const {
        if (r < 0 || r >= w_.P) fatal("rank %d: peer %d is outside the %d ranks", rank_, r, w_.P);
    }
    InProcessWorld& w_;
    const int rank_;
};

// Runs body(comm) on P threads, one per rank. The first rank to throw aborts the world (the
// others fail out of their waits); its error is rethrown here once all threads have ended.
template <class Body>
void run_ranks(InProcessWorld& world, Body body) {
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(world.P);
    for (int r = 0; r < world.P; r++) {
        try {
            threads.emplace_back([&, r] {
            InProcessComm comm(world, r);
            try {
                body(comm);
            } catch (const std::exception& e) {
                errors[r] = std::current_exception();
                world.abort(std::string("rank ") + std::to_string(r) + ": " + e.what());
            } catch (...) {
                errors[r] = std::current_exception();
                world.abort("rank " + std::to_string(r) + " failed");
            }
            });
        } catch (const std::system_error& e) {  // no thread for this rank: end the ones started
            world.abort("no thread for rank " + std::to_string(r));
            for (std::thread& t : threads) t.join();
            fatal("cannot start thread %d of %d simulated ranks (%s): use fewer ranks", r, world.P, e.what());
        }
    }
    for (std::thread& t : threads) t.join();
    // The root cause: the first error that is not another rank's abort.
    for (int r = 0; r < world.P; r++)
        if (errors[r]) {
            try {
                std::rethrow_exception(errors[r]);
            } catch (const FatalError& e) {
                if (std::string(e.what()).find("was aborted") == std::string::npos) throw;
            }
        }
    for (int r = 0; r < world.P; r++)
        if (errors[r]) std::rethrow_exception(errors[r]);
}
