#!/usr/bin/env python3
"""Where a repeat's loss sits: late in finding the source, or spread over the copy.

    scripts/copy_positions.py POSITIONS.csv [POSITIONS.csv ...]

Reads the files `infer --copy-loss ... --copy-out P` writes as P_positions.csv (gap, sample,
position, token, first_loss, repeat_loss: a row per passage token 1..P-1 of each sequence) and
prints, for each file and gap, the repeat's mean loss by the token's place in the passage (a copy
that needs a few tokens to find its source pays early and little after; one that never locks in
pays the same all along), the share of the repeat's loss on its worst tenth of tokens (a copy that
slips now and then concentrates it), the tokens copied (repeat loss under 0.1 nats) and lost
(over 2), and the repeat's loss on the tokens the first occurrence found hardest (first loss over
4 nats: names, numbers, what only the source can tell) against the rest.
"""
import csv
import sys
from collections import defaultdict

HEADER = ["gap", "sample", "position", "token", "first_loss", "repeat_loss"]
BUCKETS = [(1, 3), (4, 15), (16, 63), (64, 127), (128, 1 << 30)]


def bucket_name(lo, hi):
    return f"{lo}+" if hi >= 1 << 30 else f"{lo}-{hi}"


def read(path):
    """{gap: [(position, first, repeat)]} of one file, refusing anything but a positions CSV."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        sys.exit(f"error: cannot read {path}: {e.strerror}")
    if not rows or rows[0] != HEADER:
        sys.exit(f"error: {path} is not an infer --copy-out PREFIX_positions.csv (its header is not {','.join(HEADER)}): "
                 "run infer --copy-loss ... --copy-out PREFIX")
    by_gap = defaultdict(list)
    for n, r in enumerate(rows[1:], 2):
        try:
            by_gap[int(r[0])].append((int(r[2]), float(r[4]), float(r[5])))
        except (ValueError, IndexError):
            sys.exit(f"error: {path} line {n} is not a row of gap,sample,position,token,first_loss,repeat_loss: {','.join(r)}")
    return by_gap


def mean(values):
    return sum(values) / len(values) if values else float("nan")


def summarize(rows):
    """The figures of one gap's rows, in the table's column order."""
    repeat = [r for _, _, r in rows]
    by_place = [mean([r for p, _, r in rows if lo <= p <= hi]) for lo, hi in BUCKETS]
    worst = sorted(repeat, reverse=True)[:max(1, len(repeat) // 10)]
    share = sum(worst) / sum(repeat) if sum(repeat) > 0 else float("nan")
    copied = sum(r < 0.1 for r in repeat) / len(repeat)
    lost = sum(r > 2 for r in repeat) / len(repeat)
    hard = mean([r for _, f, r in rows if f > 4])
    easy = mean([r for _, f, r in rows if f <= 4])
    n_hard = sum(f > 4 for _, f, _ in rows)
    return [mean(repeat)] + by_place + [share, copied, lost, hard, easy, n_hard, len(rows)]


def fmt(v):
    return "-" if v != v else f"{v:.2f}"


def main(paths):
    if not paths:
        sys.exit("usage: scripts/copy_positions.py POSITIONS.csv [POSITIONS.csv ...] (infer --copy-out's PREFIX_positions.csv)")
    files = [(path, read(path)) for path in paths]  # every file checked before the table starts
    print("| file | gap | repeat | " + " | ".join(f"at {bucket_name(lo, hi)}" for lo, hi in BUCKETS) +
          " | worst 10% share | copied (<0.1) | lost (>2) | repeat where first > 4 | elsewhere | tokens (first > 4) |")
    print("| --- " * (len(BUCKETS) + 10) + "|")
    for path, by_gap in files:
        for gap, rows in sorted(by_gap.items()):
            s = summarize(rows)
            cells = [fmt(v) for v in s[:1 + len(BUCKETS)]]
            share, copied, lost, hard, easy, n_hard, n = s[1 + len(BUCKETS):]
            cells += [f"{100 * share:.0f}%", f"{100 * copied:.0f}%", f"{100 * lost:.0f}%", fmt(hard), fmt(easy), f"{n} ({n_hard})"]
            print(f"| {path} | {gap} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
