// The NCCL communicator (comm/nccl.h says what and why) and its start-up from the environment.
#include "comm/nccl.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <exception>
#include <thread>
#include "comm/rendezvous.h"
#include "layers/cuda/common.cuh"

using Clock = std::chrono::steady_clock;
static double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Short waits (a ring step, a barrier) are the common case, so a wait spins for its first
// millisecond and only then sleeps a few ms at a time.
static void pause_after(double waited) {
    if (waited < 1e-3)
        std::this_thread::yield();
    else
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

static const char* last_error(ncclComm_t comm) {
    const char* s = ncclGetLastError(comm);
    return s && *s ? s : "no detail";
}

void nccl_fail_(ncclResult_t r, ncclComm_t comm, const char* what, const char* file, int line) {
    fatal("NCCL %s at %s:%d: %s (%s)", what, file, line, ncclGetErrorString(r), last_error(comm));
}

NcclComm::NcclComm(const ncclUniqueId& id, int rank, int size, double timeout_s)
    : rank_(rank), size_(size), timeout_s_(timeout_s) {
    if (size < 1 || rank < 0 || rank >= size) fatal("NCCL communicator: rank %d of %d ranks is impossible", rank, size);
    if (!(timeout_s > 0)) fatal("NCCL communicator: timeout %g s, need a positive number", timeout_s);
    allocate();
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // set-up returns at once; wait() polls it, so a missing rank cannot hang us
    enqueued(ncclCommInitRankConfig(&comm_, size, id, rank, &config), "communicator set-up", __FILE__, __LINE__);
    up_ = true;
}

NcclComm::NcclComm(ncclComm_t child, int parent_rank, double timeout_s)
    : rank_(parent_rank), size_(0), timeout_s_(timeout_s), comm_(child), up_(true) {
    wait(false, "split");  // the child sets itself up in the background, like any non-blocking call
    int r = 0, n = 0;
    enqueued(ncclCommUserRank(comm_, &r), "split (rank)", __FILE__, __LINE__);
    enqueued(ncclCommCount(comm_, &n), "split (size)", __FILE__, __LINE__);
    rank_ = r, size_ = n;
    allocate();
}

void NcclComm::allocate() {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));  // no implicit sync with stream 0
    const size_t scratch_bytes = sizeof(uint64_t) * (size_t)(size_ + 2);
    CUDA_CHECK(cudaMalloc(&scratch_, scratch_bytes));
    CUDA_CHECK(cudaMemset(scratch_, 0, scratch_bytes));
    CUDA_CHECK(cudaMallocHost(&host_scratch_, scratch_bytes));
    CUDA_CHECK(cudaDeviceSynchronize());  // the memset ran on stream 0, which our stream does not wait for
}

std::unique_ptr<NcclComm> NcclComm::split(int color, int key) {
    live("split");
    if (color < 0) fatal("rank %d: NCCL split color %d: colors are >= 0", rank_, color);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t child = nullptr;
    enqueued(ncclCommSplit(comm_, color, key, &child, &config), "split", __FILE__, __LINE__);  // sets child when done
    if (!child) fail("rank %d: NCCL split returned no communicator for color %d", rank_, color);
    return std::unique_ptr<NcclComm>(new NcclComm(child, rank_, timeout_s_));
}

NcclComm::~NcclComm() {
    if (comm_) {
        // Unwinding from an error: the other ranks may never arrive, so don't wait for them.
        bool clean = false;
        if (std::uncaught_exceptions() == 0) {
            const ncclResult_t r = ncclCommFinalize(comm_);  // flushes our work, then frees once all ranks are done
            clean = r == ncclSuccess || r == ncclInProgress;
        }
        const Clock::time_point t0 = Clock::now();
        while (clean) {
            ncclResult_t state = ncclInternalError;
            if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess || (state != ncclSuccess && state != ncclInProgress))
                clean = false;
            else if (state == ncclSuccess)
                break;
            else if (seconds_since(t0) > timeout_s_) {
                std::fprintf(stderr, "warning: rank %d: NCCL finalize waited %.0f s for the other ranks; aborted it\n",
                             rank_, timeout_s_);
                clean = false;
            } else
                pause_after(seconds_since(t0));
        }
        if (clean)
            ncclCommDestroy(comm_);
        else
            ncclCommAbort(comm_);
    }
    // Errors ignored: a destructor cannot report them, and after a fault the context is gone anyway.
    if (host_scratch_) cudaFreeHost(host_scratch_);
    if (scratch_) cudaFree(scratch_);
    if (stream_) cudaStreamDestroy(stream_);
}

// Whom a stuck wait waits for: the rank its last ring step receives from, the other rank of two,
// else any of the others (a collective cannot tell which one is missing).
std::string NcclComm::waited_for() const {
    if (last_from_ >= 0) return "rank " + std::to_string(last_from_) + " (its ring step receives from it)";
    if (size_ == 2) return "rank " + std::to_string(1 - rank_);
    return "one of the other " + std::to_string(size_ - 1) + " ranks";
}

void NcclComm::fail(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char buf[1024];
    std::vsnprintf(buf, sizeof buf, fmt, ap);  // before the abort: the arguments may point into NCCL
    va_end(ap);
    if (comm_) {
        abort_why_ = buf;
        ncclCommAbort(comm_);
        comm_ = nullptr;
    }
    throw FatalError(buf);
}

void NcclComm::live(const char* what) const {
    last_from_ = -1;  // a new op: sendrecv sets its source once enqueued
    if (!comm_) fatal("rank %d: NCCL %s: the job was aborted (%s)", rank_, what, abort_why_.c_str());
}

void NcclComm::check_peer(int r, const char* role) const {
    if (r < 0 || r >= size_) fatal("rank %d: NCCL peer %s=%d is outside the %d ranks", rank_, role, r, size_);
}

// A non-blocking communicator may still be enqueuing when a call returns (ncclInProgress, and
// ncclCommSplit even answers ncclSuccess then); NCCL forbids further calls until its state is
// ncclSuccess, so wait for that after every call (one atomic read when it is already done).
void NcclComm::enqueued(ncclResult_t r, const char* what, const char* file, int line) {
    if (r != ncclSuccess && r != ncclInProgress)
        fail("rank %d: NCCL %s at %s:%d: %s (%s)", rank_, what, file, line, ncclGetErrorString(r), last_error(comm_));
    wait(false, what);
}

void NcclComm::wait(bool stream_too, const char* what) {
    const Clock::time_point t0 = Clock::now();
    for (;;) {
        ncclResult_t state = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
        if (r != ncclSuccess) state = r;
        if (state != ncclSuccess && state != ncclInProgress)
            fail("rank %d: NCCL %s failed: %s (%s)%s", rank_, what, ncclGetErrorString(state), last_error(comm_),
                 up_ ? "; if another rank failed first, its error is the cause"
                     : "; check that every rank has a GPU of its own, the same world size and one rendezvous (a fresh "
                       "LONGNET_RENDEZVOUS, or MASTER_ADDR/MASTER_PORT), and that the hosts reach each other");
        if (state == ncclSuccess) {
            if (!stream_too) return;
            const cudaError_t e = cudaStreamQuery(stream_);
            if (e == cudaSuccess) return;
            if (e != cudaErrorNotReady)
                fail("rank %d: CUDA error while waiting for NCCL %s: %s", rank_, what, cudaGetErrorString(e));
        }
        const double waited = seconds_since(t0);
        if (waited > timeout_s_)
            fail("rank %d: NCCL %s waited %.0f s for %s (it died or hangs): aborted the communicator; see the other "
                 "ranks' errors%s (LONGNET_COMM_TIMEOUT_S sets the limit)",
                 rank_, what, waited, waited_for().c_str(),
                 up_ ? "" : ", and check that they all started with one rendezvous (a fresh LONGNET_RENDEZVOUS, or "
                      "MASTER_ADDR/MASTER_PORT) and that the hosts reach each other (NCCL_SOCKET_IFNAME)");
        pause_after(waited);
    }
}

void NcclComm::sendrecv(const void* src, size_t send_bytes, int to, void* dst, size_t recv_bytes, int from) {
    live("sendrecv");
    check_peer(to, "to"), check_peer(from, "from");
    const char *s = (const char*)src, *d = (const char*)dst;
    if (send_bytes && recv_bytes && s < d + recv_bytes && d < s + send_bytes)
        fatal("rank %d: sendrecv's source and destination overlap: pass separate buffers", rank_);
    if (!send_bytes && !recv_bytes) return;
    // One group: both transfers progress together, so a ring of sendrecvs cannot deadlock.
    enqueued(ncclGroupStart(), "group start", __FILE__, __LINE__);
    if (send_bytes) enqueued(ncclSend(src, send_bytes, ncclUint8, to, comm_, stream_), "send", __FILE__, __LINE__);
    if (recv_bytes) enqueued(ncclRecv(dst, recv_bytes, ncclUint8, from, comm_, stream_), "receive", __FILE__, __LINE__);
    enqueued(ncclGroupEnd(), "sendrecv", __FILE__, __LINE__);
    last_from_ = recv_bytes ? from : -1;
}

void NcclComm::all_reduce_sum(float* x, size_t n) {
    live("all-reduce");
    if (!n) return;
    enqueued(ncclAllReduce(x, x, n, ncclFloat, ncclSum, comm_, stream_), "all-reduce", __FILE__, __LINE__);
}

void NcclComm::broadcast(void* x, size_t bytes, int root) {
    live("broadcast");
    check_peer(root, "root");
    if (!bytes) return;
    enqueued(ncclBroadcast(x, x, bytes, ncclUint8, root, comm_, stream_), "broadcast", __FILE__, __LINE__);
}

void NcclComm::barrier() {
    live("barrier");
    float* one = (float*)scratch_;  // 0 + 0 + ... stays 0: nothing to reset
    enqueued(ncclAllReduce(one, one, 1, ncclFloat, ncclSum, comm_, stream_), "barrier", __FILE__, __LINE__);
    wait(true, "barrier");
}

void NcclComm::abort(const std::string& why) {
    if (!comm_) return;
    abort_why_ = "rank " + std::to_string(rank_) + ": " + why;
    ncclCommAbort(comm_);
    comm_ = nullptr;
}

void NcclComm::synchronize() {
    live("synchronize");
    wait(true, "synchronize");
}

void NcclComm::check_same_everywhere(uint64_t hash, const char* what) {
    live("consistency check");
    uint64_t* gathered = host_scratch_ + 1;
    host_scratch_[0] = hash;
    CUDA_CHECK(cudaMemcpyAsync(scratch_ + 1, host_scratch_, sizeof(uint64_t), cudaMemcpyHostToDevice, stream_));
    enqueued(ncclAllGather(scratch_ + 1, scratch_ + 2, sizeof(uint64_t), ncclUint8, comm_, stream_), "consistency check",
             __FILE__, __LINE__);
    CUDA_CHECK(cudaMemcpyAsync(gathered, scratch_ + 2, sizeof(uint64_t) * size_, cudaMemcpyDeviceToHost, stream_));
    wait(true, "consistency check");
    // Every rank sees the same table, so every rank fails here alike; the communicator stays usable.
    for (int r = 1; r < size_; r++)
        if (gathered[r] != gathered[0])
            fatal("rank %d: %s differs between ranks (rank 0 has %016llx, rank %d has %016llx): start every rank "
                  "with the same flags and binary",
                  rank_, what, (unsigned long long)gathered[0], r, (unsigned long long)gathered[r]);
}

// ------------------------------------------------------------------------------------------------
// Start-up from the environment (comm/rendezvous.h: the launcher's variables, the rendezvous)

double nccl_timeout_from_env() { return comm_timeout_from_env(); }

std::unique_ptr<NcclComm> nccl_comm_from_env() {
    const LauncherRanks me = launcher_ranks_from_env();
    const int rank = me.rank, world = me.world, local = me.local_rank;
    // NVLink multicast (NVLS) can put a shared host's GPUs out of service (../shared/gpu-machine.md);
    // off unless the user turns it on explicitly. Set before NCCL's first call reads it.
    setenv("NCCL_NVLS_ENABLE", "0", 0);

    int devices = 0;
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0)
        fatal("rank %d: no CUDA device (%s): the NCCL communicator needs one GPU per rank", rank,
              e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    if (local >= devices)
        fatal("rank %d: %s=%d but this host shows %d CUDA device(s): start at most %d ranks per host, one per GPU, "
              "with every GPU visible to every rank",
              rank, me.local_var, local, devices, devices);
    CUDA_CHECK(cudaSetDevice(local));  // before anything else touches CUDA: one context, on our GPU

    const double timeout_s = nccl_timeout_from_env();
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    const Rendezvous how = rendezvous_share(&id, sizeof id, rank, world, timeout_s);
    auto comm = std::make_unique<NcclComm>(id, rank, world, timeout_s);
    // Every rank has read the file once set-up is done (it needs them all), so a later job that
    // reuses the path cannot pick up this job's id.
    rendezvous_file_remove(how, rank);
    return comm;
}
