// Runs a program's per-rank body on the ranks of the job, whichever way they were started:
//   simulate_ranks > 0   that many ranks as threads of this process (comm/in_process.h), on the
//                        one device (tests; the code path is the same as real ranks');
//   a launcher           one process per GPU (scripts/launch.sh, mpirun, srun): NCCL between
//                        them (comm/nccl.h), the context-parallel rings split off the world;
//   neither              one rank, no communicator.
// The body gets a ParallelContext (model/parallel.h) with the world, its ring and the shape of
// the job (data-parallel groups of `cp` ranks). Errors name the flag or the launcher to fix.
#pragma once
#include <memory>
#include <vector>
#include "comm/in_process.h"
#include "comm/in_process_cuda.cuh"
#include "layers/cuda/matmul.cuh"
#include "layers/cuda/ring_attention.cuh"
#include "model/parallel.h"
#include "model/select_backend.cuh"
#ifdef HAVE_NCCL
#include "comm/nccl.h"
#endif

// Scalars (loss sums, counts, checks) reduced where the communicator reads: device memory on
// the GPU, host memory on the CPU. Lives as long as the rank's body.
struct RankScalars {
    float host[4];
    float* device = nullptr;
    RankScalars(ParallelContext& px, Device dev) {
        px.scalars = host;
        if (!px.world || dev != Device::Cuda) return;
        CUDA_CHECK(cudaMalloc(&device, 4 * sizeof(float)));
        px.scalars = device;
        px.copy = in_process_device_copy;
    }
    ~RankScalars() { cudaFree(device); }
};

template <class Body>
int run_parallel(Device device, int cp, int simulate_ranks, const char* program, Body body) {
    if (cp < 1) fatal("--cp must be at least 1 (got %d)", cp);
    // Simulated ranks are threads sharing one device, each with a whole model: a test tool.
    if (simulate_ranks < 0 || simulate_ranks > 64)
        fatal("--simulate-ranks must be in [0, 64] (got %d): they are threads of one process", simulate_ranks);
    if (simulate_ranks > 0) {
        if (simulate_ranks % cp)
            fatal("--simulate-ranks %d is not a multiple of --cp %d: the ranks are data-parallel groups of --cp", simulate_ranks, cp);
        InProcessWorld world(simulate_ranks);
        std::vector<std::unique_ptr<InProcessWorld>> rings;
        for (int g = 0; g < simulate_ranks / cp; g++) rings.emplace_back(new InProcessWorld(cp));
        if (device == Device::Cuda) {
            world.copy = in_process_device_copy;
            for (auto& r : rings) r->copy = in_process_device_copy;
        }
        int rc = 0;
        run_ranks(world, [&](Comm& wc) {
            if (device == Device::Cuda) CUDA_CHECK(cudaSetDevice(0));
            InProcessComm ring(*rings[wc.rank() / cp], wc.rank() % cp);
            ParallelContext px;
            px.world = &wc, px.cp = cp > 1 ? &ring : nullptr;
            px.rank = wc.rank(), px.size = wc.size(), px.cp_size = cp, px.dp_size = wc.size() / cp;
            RankScalars scalars(px, device);
            const int r = body(px);
            if (wc.rank() == 0) rc = r;
            if (device == Device::Cuda) matmul_destroy_cuda(), ring_pool_release();  // this thread's cuBLASLt context and ring buffers
        });
        return rc;
    }
    if (launcher_world_size() == 1) {
        if (cp > 1)
            fatal("--cp %d needs %d ranks (or a multiple): start them with scripts/launch.sh %d %s ..., or run them as "
                  "threads of one process with --simulate-ranks %d",
                  cp, cp, cp, program, cp);
        ParallelContext px;
        RankScalars scalars(px, device);
        return body(px);
    }
#ifdef HAVE_NCCL
    if (device != Device::Cuda)
        fatal("%d ranks (%s) need a GPU each (NCCL): use --device cuda, or run the ranks as threads with --simulate-ranks",
              launcher_world_size(), launcher_world_source(launcher_ranks_from_env()).c_str());
    std::unique_ptr<NcclComm> world = nccl_comm_from_env();
    if (world->size() % cp) fatal("%d ranks do not form groups of --cp %d: start a multiple of %d ranks", world->size(), cp, cp);
    std::unique_ptr<NcclComm> ring;  // this rank's data-parallel group; the world itself when there is one group
    if (cp > 1 && cp < world->size()) ring = world->split(world->rank() / cp, world->rank() % cp);
    ParallelContext px;
    px.world = world.get();
    px.cp = cp == 1 ? nullptr : ring ? ring.get() : world.get();
    px.rank = world->rank(), px.size = world->size(), px.cp_size = cp, px.dp_size = world->size() / cp;
    px.world_sync = [&] { world->synchronize(); };
    RankScalars scalars(px, device);
    return body(px);
#else
    fatal("%d ranks were started (%s) but this build has no NCCL: install NCCL (libnccl-dev) and rebuild, or run the "
          "ranks as threads with --simulate-ranks",
          launcher_world_size(), launcher_world_source(launcher_ranks_from_env()).c_str());
#endif
}
