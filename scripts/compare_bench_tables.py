#!/usr/bin/env python3
"""Compares the attention benchmark tables of two builds (scripts/device.sh ab): for every row
present in both, the ratio new/old of the forward and forward+backward times (the first and
third numbers with a decimal point in bench_attention's and bench_attention_dilated's rows),
taking per build the lowest time over its runs.

  compare_bench_tables.py OLD.md[,OLD2.md...] NEW.md[,NEW2.md...] [F,FB]

F,FB (default 0,2) say which decimal columns after the first are the two times: 0,3 for
bench_attention_block_sparse (fwd ms, Mt/s, TF/s, f+b ms), 0,0 for bench_train (one step's ms;
its markdown bars are ignored).

A row is keyed by its tokens before the first decimal number (N, D, B, H, or N and pattern).
Prints a markdown table and the worst ratio. Standard library only."""
import sys


OFFSETS = (0, 2)


def parse(path):
    rows = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        cols = [c for c in line.split() if c != "|"]
        first = next((i for i, c in enumerate(cols) if "." in c and c.replace(".", "", 1).isdigit()), None)
        if first is None or len(cols) <= first + max(OFFSETS):
            continue  # the header
        try:
            rows[" ".join(cols[:first])] = (float(cols[first + OFFSETS[0]]), float(cols[first + OFFSETS[1]]))
        except ValueError:
            continue
    return rows


def best(paths):
    out = {}
    for p in paths:
        for k, (f, fb) in parse(p).items():
            of, ofb = out.get(k, (f, fb))
            out[k] = (min(of, f), min(ofb, fb))
    return out


def main():
    global OFFSETS
    if len(sys.argv) > 3:
        OFFSETS = tuple(int(x) for x in sys.argv[3].split(","))
    old, new = best(sys.argv[1].split(",")), best(sys.argv[2].split(","))
    worst = 0.0
    print("| row | fwd ms old | fwd ms new | new/old | f+b ms old | f+b ms new | new/old |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for k, (of, ofb) in old.items():
        if k not in new:
            continue
        nf, nfb = new[k]
        worst = max(worst, nf / of, nfb / ofb)
        print(f"| {k} | {of:.3f} | {nf:.3f} | {nf / of:.3f} | {ofb:.3f} | {nfb:.3f} | {nfb / ofb:.3f} |")
    print(f"\nworst new/old time ratio: {worst:.3f} ({(worst - 1) * 100:+.1f}%)")


if __name__ == "__main__":
    main()
