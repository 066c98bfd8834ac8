// What ranks need from each other, whatever carries it: the communicator interface that ring
// attention and context/data-parallel training are written against. Two implementations:
//   comm/in_process.h   P simulated ranks sharing one process (one thread each): the CPU tests in
//                       CI and the single-GPU tests run the real ring code through it;
//   comm/nccl.h         one process per GPU, NCCL carrying all traffic (device memory).
// Buffers live where the implementation says (memory_space()): host memory for the CPU
// in-process communicator, device memory for NCCL and the GPU in-process one. Every call is
// collective over the ranks it names: a rank that calls sendrecv must be matched by its
// partners' calls, and all ranks call all_reduce / broadcast / barrier in the same order.
#pragma once
#include <cstddef>
#include <string>

enum class CommDtype { F32, BF16, I32, U8 };

inline size_t comm_dtype_bytes(CommDtype t) { return t == CommDtype::BF16 ? 2 : t == CommDtype::U8 ? 1 : 4; }

class Comm {
   public:
    virtual ~Comm() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual std::string name() const = 0;  // "in-process", "nccl"

    // One ring step: send send_bytes from src to rank `to` and receive recv_bytes into dst from
    // rank `from`, as one operation (so a ring of sendrecvs cannot deadlock). A message of 0
    // bytes is not sent and not waited for, so the partners must agree on every size (both sides
    // compute it from the same plan). src and dst must not overlap.
    virtual void sendrecv(const void* src, size_t send_bytes, int to, void* dst, size_t recv_bytes, int from) = 0;
    // Device communicators enqueue their work on this stream (a cudaStream_t) and return; a
    // caller orders it against its compute with events. nullptr: every call is complete on return.
    virtual void* stream() const { return nullptr; }
    // x (n floats, in place) = the sum over ranks, the same bits on every rank.
    virtual void all_reduce_sum(float* x, size_t n) = 0;
    // x (bytes) on every rank = x on `root`.
    virtual void broadcast(void* x, size_t bytes, int root) = 0;
    virtual void barrier() = 0;
    // Makes every rank's pending and later calls fail (FatalError naming `why`), so that one
    // rank's error ends the job instead of leaving the others waiting.
    virtual void abort(const std::string& why) = 0;
};

// Ring neighbours.
inline int comm_next(const Comm& c) { return (c.rank() + 1) % c.size(); }
inline int comm_prev(const Comm& c) { return (c.rank() + c.size() - 1) % c.size(); }
