// How a training rank sits in a job of DP x CP ranks, and the few things the trainer does with
// the others (train.cu): rank r is context-parallel rank r % CP of data-parallel group r / CP.
//   - data: every rank draws the same global batch (the loader has the same seed everywhere);
//     data-parallel group g takes windows [g Bl, (g+1) Bl), and within it context-parallel rank c
//     takes its zigzag rows of each window (RingPlan::positions), with their global positions;
//   - loss: a step's mean spans every rank's targets (sum and count reduced over the world);
//   - gradients: summed over the world (ModelBackend::all_reduce_grads), so every rank applies
//     the same update; checked at each checkpoint by comparing a weight checksum;
//   - start-up: every rank must have the same flags and binary (a hash compared across ranks).
// Comm (comm/comm.h) carries it: NCCL between processes, or the in-process communicator when
// train --simulate-ranks runs the ranks as threads of one process (tests on one GPU or the CPU).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>
#include "comm/comm.h"
#include "comm/launcher_env.h"
#include "layers/ring_plan.h"

struct ParallelContext {
    Comm* world = nullptr;  // every rank (nullptr: one process, nothing to reduce)
    Comm* cp = nullptr;     // this rank's context-parallel group, the ring (nullptr: CP = 1)
    int rank = 0, size = 1, cp_size = 1, dp_size = 1;
    // Where scalars are reduced (4 floats): device memory for a device communicator (NCCL, or
    // in-process ranks on a GPU), host memory otherwise; how to copy to and from them, and how to
    // wait for the world's enqueued work (a device communicator returns before it is done).
    float* scalars = nullptr;
    std::function<void(void*, const void*, size_t)> copy = [](void* d, const void* s, size_t n) { std::memcpy(d, s, n); };
    std::function<void()> world_sync = [] {};

    int cp_rank() const { return rank % cp_size; }
    int dp_rank() const { return rank / cp_size; }
    bool leader() const { return rank == 0; }

    // x summed over every rank (the same value everywhere).
    void sum(double* x, int n) const {
        if (!world) return;
        float h[4];
        for (int i = 0; i < n; i++) h[i] = (float)x[i];
        copy(scalars, h, n * sizeof(float));
        world->all_reduce_sum(scalars, n);
        world_sync();
        copy(h, scalars, n * sizeof(float));
        for (int i = 0; i < n; i++) x[i] = h[i];
    }
    void barrier() const {
        if (world) world->barrier();
    }
    // Fails on every rank unless every rank passed the same value: rank 0's is broadcast, each
    // rank compares, and the verdicts are summed so that all ranks stop together.
    void check_same(uint64_t value, const std::string& what, const std::string& fix) const {
        if (!world) return;
        uint64_t root = value;
        copy(scalars, &root, sizeof root);
        world->broadcast(scalars, sizeof root, 0);
        world_sync();
        copy(&root, scalars, sizeof root);
        double bad = root != value;
        sum(&bad, 1);
        if (bad > 0)
            fatal("rank %d: %s differs between ranks (%d of %d ranks differ from rank 0): %s", rank, what.c_str(), (int)bad,
                  size, fix.c_str());
    }

    // This rank's rows of a global batch (Bg windows of T tokens, (Bg, T)): (Bl, T / CP).
    void take_rows(int* dst, const int* src, int Bg, int T) const {
        const int Bl = Bg / dp_size, n = T / cp_size;
        const std::vector<int> pos = positions(T);
        for (int b = 0; b < Bl; b++)
            for (int i = 0; i < n; i++) dst[(size_t)b * n + i] = src[(size_t)(dp_rank() * Bl + b) * T + pos[i]];
    }
    // The global positions of this rank's tokens of a window of T.
    std::vector<int> positions(int T) const {
        if (cp_size == 1) {
            std::vector<int> p(T);
            for (int i = 0; i < T; i++) p[i] = i;
            return p;
        }
        return RingPlan(AttnPattern{}, cp_size, T).positions(cp_rank());
    }
};

// The ranks a launcher started (torchrun, mpirun, srun, scripts/launch.sh: comm/launcher_env.h reads
// their variables, and fails with one line on a partial or inconsistent set); 1 when none is set.
// comm/nccl.h reads the rest (rank, GPU, rendezvous).
inline int launcher_world_size() { return launcher_ranks_from_env().world; }

// FNV-1a over bytes: the start-up and checkpoint checks.
inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
    const unsigned char* p = (const unsigned char*)data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}
