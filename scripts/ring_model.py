#!/usr/bin/env python3
"""Ring attention scaling model: ring time from per-step compute and link bandwidth.

A ring of P ranks runs P steps in lockstep; during step s each rank computes its query chunks
against the key/value block it holds while the next block travels, so a step takes
    max(compute of the slowest rank, bytes of the next block / link bandwidth + latency).
Compute per step comes from bench_ring's table (measured on one GPU, rank by rank and step by
step; notes/gpu-runs/issue9/bench_ring_h100.md): for each (pattern, tokens per GPU) we take the
P = 4 row's compute and divide by 4 steps. Dense causal attention under the zigzag split does
about the same work at every step, so that per-step time holds for any P at the same tokens per
GPU; the bytes per step are the K/V of one rank's tokens (2 x tokens x H x D bf16 values), 3x that
backward (K/V out, fp32 dK/dV back). Dilated attention whose segments stay inside a rank's chunks
moves nothing, so its ring is its compute at any P (bench_ring shows 0 bytes for the LongNet
setting from 64K tokens per GPU).

Usage: scripts/ring_model.py [--table FILE] [--bw GBPS] [--latency-us US] [--ranks 2,4,64,1024]
Prints, per pattern and tokens per GPU, the predicted ring efficiency forward and forward +
backward for each P, and the window P x tokens that the ring trains.
"""
import argparse
import os
import re
import sys
import tarfile

DEFAULT_TABLE = "notes/gpu-runs/issue9/bench_ring_h100.md"
DEFAULT_ARCHIVE = "notes/archive/issue9.tar.xz"  # where the raw runs are kept (notes/README.md)


def table_lines(path):
    """The table's lines: from the file, or for the default table, from its study's archive."""
    if os.path.exists(path) or path != DEFAULT_TABLE:
        return open(path).read().splitlines()
    with tarfile.open(DEFAULT_ARCHIVE) as tar:
        return tar.extractfile(path[len("notes/"):]).read().decode().splitlines()


def read_table(path):
    rows = []
    for line in table_lines(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 11 or not re.match(r"^\d+K$", cells[1]):
            continue
        rows.append(dict(pattern=cells[0], tokens=int(cells[1][:-1]) * 1024, P=int(cells[2]), fwd=float(cells[3]),
                         both=float(cells[7]), sent=float(cells[10].split()[0])))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", default=DEFAULT_TABLE)
    ap.add_argument("--bw", type=float, default=50.0, help="link bandwidth per direction, GB/s")
    ap.add_argument("--latency-us", type=float, default=20.0)
    ap.add_argument("--ranks", default="2,4,64,1024")
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--head-dim", type=int, default=64)
    a = ap.parse_args()
    rows = read_table(a.table)
    if not rows:
        sys.exit(f"error: no bench_ring rows in {a.table}: run build/bench_ring --out FILE on a GPU first")
    ranks = [int(x) for x in a.ranks.split(",")]
    print(f"link {a.bw:.0f} GB/s per direction, {a.latency_us:.0f} us per message; compute per step from {a.table}")
    print(f"{'pattern':<16} {'tokens/GPU':>10} {'P':>5} {'window':>12} {'step fwd ms':>11} {'xfer fwd ms':>11} "
          f"{'eff fwd':>8} {'eff fwd+bwd':>11}")
    for r in rows:
        if r["P"] != 4:
            continue
        step_f, step_b = r["fwd"] / 4, r["both"] / 4
        moves = r["sent"] > 0  # bench_ring measured the plan's bytes: none for segments inside chunks
        kv_bytes = 2 * r["tokens"] * a.heads * a.head_dim * 2
        for P in ranks:
            xf = kv_bytes / (a.bw * 1e6) + a.latency_us * 1e-3 if moves else 0.0
            xb = 3 * kv_bytes / (a.bw * 1e6) + 2 * a.latency_us * 1e-3 if moves else 0.0
            # P steps; the first needs no transfer, the others hide it behind compute if they can.
            ring_f = step_f + (P - 1) * max(step_f, xf)
            ring_b = step_b + (P - 1) * max(step_b, xb)
            window = P * r["tokens"]
            print(f"{r['pattern']:<16} {r['tokens'] // 1024:>9}K {P:>5} {window / 2**20:>10.1f}M {step_f:>11.2f} {xf:>11.2f} "
                  f"{100 * P * step_f / ring_f:>7.1f}% {100 * P * step_b / ring_b:>10.1f}%")


if __name__ == "__main__":
    main()
