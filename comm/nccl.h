// The NCCL communicator: one process per GPU, NCCL carrying all traffic between device buffers,
// behind the Comm interface (comm/comm.h). Declarations only; the code is comm/nccl.cu, compiled
// once into build/obj/nccl.o (link it and -lnccl).
//   auto comm = nccl_comm_from_env();   // rank, world and GPU from the launcher's environment
//   comm->sendrecv(...); ...            // enqueued on comm->stream(), returns at once
//   comm->synchronize();                // waits, but never forever
// Start P ranks with scripts/launch.sh P program args, torchrun --nproc-per-node P, mpirun -np P or
// srun -n P (docs/ring.md: the commands, one host or several).
//
// Why the waiting is done by hand: a rank that dies or never starts leaves NCCL's kernels on the
// others spinning for ever, and a blocking communicator blocks inside NCCL where nothing can time
// out. So the communicator is non-blocking (its set-up too), and every wait here polls the stream
// and NCCL's asynchronous error state; after timeout_s (LONGNET_COMM_TIMEOUT_S, 45 s by default)
// or on an asynchronous error it aborts the communicator and fails with one line naming the rank.
// Not thread-safe: one thread drives one NcclComm.
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>
#include <cstdint>
#include <memory>
#include <string>
#include "comm/comm.h"
#include "core/error.h"

// For NCCL calls outside a communicator's own waits (ncclGetUniqueId, ...): fails (FatalError)
// with file:line, NCCL's name for the error and its last error text.
[[noreturn]] void nccl_fail_(ncclResult_t r, ncclComm_t comm, const char* what, const char* file, int line);
inline void nccl_check_(ncclResult_t r, const char* what, const char* file, int line) {
    if (r != ncclSuccess) nccl_fail_(r, nullptr, what, file, line);
}
#define NCCL_CHECK(call) nccl_check_((call), #call, __FILE__, __LINE__)

class NcclComm : public Comm {
   public:
    // Joins the world of `size` ranks as `rank` on the current CUDA device; every rank passes the
    // same id (rank 0's ncclGetUniqueId). Fails if the others have not joined within timeout_s.
    NcclComm(const ncclUniqueId& id, int rank, int size, double timeout_s);
    ~NcclComm() override;
    NcclComm(const NcclComm&) = delete;
    NcclComm& operator=(const NcclComm&) = delete;

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    std::string name() const override { return "nccl"; }
    void* stream() const override { return (void*)stream_; }
    cudaStream_t cuda_stream() const { return stream_; }
    double timeout_s() const { return timeout_s_; }

    // Comm (comm/comm.h) on device buffers: each call enqueues on stream() and returns.
    void sendrecv(const void* src, size_t send_bytes, int to, void* dst, size_t recv_bytes, int from) override;
    void all_reduce_sum(float* x, size_t n) override;
    void broadcast(void* x, size_t bytes, int root) override;
    // Waits for this rank's stream too, so every earlier call is complete on return.
    void barrier() override;
    // NCCL has no way to reach the other ranks' pending calls: they fail when NCCL reports the
    // lost peer or at their timeout, and scripts/launch.sh stops them once this rank exits.
    void abort(const std::string& why) override;

    // Waits until everything enqueued on stream() is done (see the top of this file).
    void synchronize();
    // Start-up consistency: fails on every rank, naming two ranks and their values, unless every
    // rank passed the same hash (of its flags, config, binary...). `what` names the hashed thing.
    void check_same_everywhere(uint64_t hash, const char* what);
    // Sub-communicators (the context-parallel rings of data-parallel training): every rank calls
    // it; the ranks of one color (>= 0) form a communicator, ranked by key. Its own stream.
    std::unique_ptr<NcclComm> split(int color, int key);

   private:
    NcclComm(ncclComm_t child, int parent_rank, double timeout_s);  // adopts split()'s child
    void allocate();                              // stream and scratch buffers, once size_ is known
    void live(const char* what) const;            // fails once the communicator is aborted
    void enqueued(ncclResult_t r, const char* what, const char* file, int line);
    void wait(bool stream_too, const char* what);  // the polling loop
    // Aborts the communicator (so NCCL stops and frees it), then fails with the message.
    [[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
    void check_peer(int r, const char* role) const;
    std::string waited_for() const;

    int rank_, size_;  // a split child learns its own from NCCL
    const double timeout_s_;
    ncclComm_t comm_ = nullptr;  // nullptr once aborted
    bool up_ = false;            // set-up finished (errors before it hint at the rendezvous)
    std::string abort_why_;
    mutable int last_from_ = -1;  // the rank the last op received from (a ring step), -1 after a collective
    cudaStream_t stream_ = nullptr;
    uint64_t* scratch_ = nullptr;       // device: [0] the barrier's float, [1] a hash, [2..] the gathered hashes
    uint64_t* host_scratch_ = nullptr;  // pinned: a copy to pageable memory blocks in CUDA, past our timeout
};

// Seconds a wait may take: LONGNET_COMM_TIMEOUT_S (a positive number), else 45.
double nccl_timeout_from_env();

// This process's rank of the job from the launcher's environment (torchrun, mpirun of Open MPI or
// MPICH, srun, scripts/launch.sh: comm/rendezvous.h lists the variables); no world size at all means
// one rank. Selects GPU local rank, then meets the other ranks (2 or more): rank 0 makes NCCL's
// unique id and hands it to the others through the file LONGNET_RENDEZVOUS (on a filesystem every
// rank sees; scripts/launch.sh sets it) or, when that is unset, over TCP at MASTER_ADDR:MASTER_PORT
// (torchrun sets them). Sets NCCL_NVLS_ENABLE=0 unless it is set.
std::unique_ptr<NcclComm> nccl_comm_from_env();
