#!/usr/bin/env python3
"""NCCL's send/receive rate between the ranks of a ring, as a ring attention step uses it: every rank
sends to the next and receives from the previous at once. Started by any launcher (scripts/launch.sh,
scripts/sim_hosts.sh, torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT). Rank 0
prints one line a message size: MiB, the median time of --reps exchanges, GB/s per direction. It
measures the link that bench_ring's --bw models (scripts/ring_model.py); PyTorch serves only as the
measuring tool here, never as a dependency of the project.
Usage: nccl_bw.py [--sizes-mib 8,64,512] [--reps 10]"""
import argparse
import os
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-mib", default="8,64,512")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    try:
        sizes = [int(s) for s in args.sizes_mib.split(",")]
    except ValueError:
        sys.exit(f"nccl_bw: --sizes-mib {args.sizes_mib!r} is not a list of whole numbers such as 8,64,512")
    if args.reps < 1 or any(s < 1 for s in sizes):
        sys.exit("nccl_bw: --reps and every size must be positive")
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if var not in os.environ:
            sys.exit(f"nccl_bw: {var} is not set: start it with scripts/launch.sh P, scripts/sim_hosts.sh N or torchrun")
    import torch
    import torch.distributed as dist

    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for mib in sizes:
        n = mib << 20
        send = torch.ones(n, dtype=torch.uint8, device="cuda")
        recv = torch.empty(n, dtype=torch.uint8, device="cuda")
        times = []
        for rep in range(args.reps + 2):  # two warm-up exchanges
            dist.barrier()
            torch.cuda.synchronize()
            t = time.perf_counter()
            ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            torch.cuda.synchronize()
            if rep >= 2:
                times.append(time.perf_counter() - t)
        med = statistics.median(times)
        if rank == 0:
            print(f"nccl_bw P={world} {mib} MiB: {med * 1e3:.2f} ms, {n / med / 1e9:.1f} GB/s per direction", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
