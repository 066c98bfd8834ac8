#!/usr/bin/env python3
"""Where a repeat's loss sits: late in finding the source, or spread over the copy.

    scripts/copy_positions.py [--freq SHARD] POSITIONS.csv [POSITIONS.csv ...]

Reads the files `infer --copy-loss ... --copy-out P` writes as P_positions.csv (gap, sample,
position, token, first_loss, repeat_loss: a row per passage token 1..P-1 of each sequence) and
prints, for each file and gap, the repeat's mean loss by the token's place in the passage (a copy
that needs a few tokens to find its source pays early and little after; one that never locks in
pays the same all along) and the share of its loss on tokens 1-15 (finding the source), the share
on its worst tenth of tokens (a copy that slips now and then concentrates it), the tokens copied
(repeat loss under 0.1 nats) and lost (over 2), and the repeat's loss on the tokens the first
occurrence found hardest (first loss over 4 nats: names, numbers, what only the source can tell)
against the rest, with those tokens' share of the loss (a copy that yields to the language model
where the two disagree most). Given several files (the runs of one recipe), a last row per gap
gives each column's median over them.

--freq SHARD (the corpus's train.bin the model was trained on) adds two tables of the same
repeats, all gaps of a file together: by how common each token is in SHARD (per million tokens),
and by the first occurrence's loss, rare tokens (under 100 a million) apart from the rest: whether
what the copy loses is the rare tokens (whose embeddings trained least) or the surprising ones
(where the copy and the language model disagree), which any token can be.
"""
import array
import csv
import os
import statistics
import struct
import sys
from collections import Counter, defaultdict

HEADER = ["gap", "sample", "position", "token", "first_loss", "repeat_loss"]
BUCKETS = [(1, 3), (4, 15), (16, 63), (64, 127), (128, 1 << 30)]
FREQ_BANDS = [(0, 10), (10, 100), (100, 1000), (1000, 10000), (10000, None)]  # per million tokens
FIRST_BANDS = [(0, 1), (1, 2), (2, 4), (4, 6), (6, 8), (8, None)]  # the first occurrence's loss, nats
RARE = 100  # per million tokens


def bucket_name(lo, hi):
    return f"{lo}+" if hi >= 1 << 30 else f"{lo}-{hi}"


def read_counts(path):
    """(how often each token id occurs, the number of tokens) in a token shard (data/FORMAT.md)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 36 or head[:8] != b"LNGSHARD":
                sys.exit(f"error: {path} is not a token shard (no LNGSHARD header): give --freq the corpus's train.bin")
            version, token_bytes, n_tokens, n_docs, _ = struct.unpack_from("<IIQQI", head, 8)
            offset = (64 if version >= 2 else 36) + 8 * n_docs
            if token_bytes not in (2, 4) or os.path.getsize(path) != offset + token_bytes * n_tokens:
                sys.exit(f"error: {path} is cut short or malformed ({token_bytes} bytes a token, {n_tokens} tokens): regenerate it")
            f.seek(offset)
            tokens = array.array("H" if token_bytes == 2 else "I")
            tokens.frombytes(f.read(token_bytes * n_tokens))
    except OSError as e:
        sys.exit(f"error: cannot read {path}: {e.strerror}")
    return Counter(tokens), max(n_tokens, 1)


def read(path):
    """{gap: [(position, first, repeat, token)]} of one file, refusing anything but a positions CSV."""
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
            by_gap[int(r[0])].append((int(r[2]), float(r[4]), float(r[5]), int(r[3])))
        except (ValueError, IndexError):
            sys.exit(f"error: {path} line {n} is not a row of gap,sample,position,token,first_loss,repeat_loss: {','.join(r)}")
    return by_gap


def mean(values):
    return sum(values) / len(values) if values else float("nan")


def summarize(rows):
    """The figures of one gap's rows, in the table's column order."""
    rows = [row[:3] for row in rows]
    repeat = [r for _, _, r in rows]
    by_place = [mean([r for p, _, r in rows if lo <= p <= hi]) for lo, hi in BUCKETS]
    worst = sorted(repeat, reverse=True)[:max(1, len(repeat) // 10)]
    total = sum(repeat)
    share = sum(worst) / total if total > 0 else float("nan")
    finding = sum(r for p, _, r in rows if p <= 15) / total if total > 0 else float("nan")
    hard_share = sum(r for _, f, r in rows if f > 4) / total if total > 0 else float("nan")
    copied = sum(r < 0.1 for r in repeat) / len(repeat)
    lost = sum(r > 2 for r in repeat) / len(repeat)
    hard = mean([r for _, f, r in rows if f > 4])
    easy = mean([r for _, f, r in rows if f <= 4])
    n_hard = sum(f > 4 for _, f, _ in rows)
    return [mean(repeat)] + by_place + [finding, share, copied, lost, hard, easy, hard_share, n_hard, len(rows)]


def fmt(v):
    return "-" if v != v else f"{v:.2f}"


def row_cells(s):
    """A summarize() list as the table's cells."""
    cells = [fmt(v) for v in s[:1 + len(BUCKETS)]]
    finding, share, copied, lost, hard, easy, hard_share, n_hard, n = s[1 + len(BUCKETS):]
    return cells + [pct(finding), pct(share), pct(copied), pct(lost), fmt(hard), fmt(easy), pct(hard_share),
                    f"{n:.0f} ({n_hard:.0f})"]


def pct(v):
    return "-" if v != v else f"{100 * v:.0f}%"


def band_name(lo, hi):
    return f"{lo}+" if hi is None else f"{lo}-{hi}"


def print_freq(files, counts, n_tokens):
    """The repeats by how common each token is in the training shard, every gap of a file together."""
    print()
    print("| file | tokens per million in the shard | tokens | first | repeat | repeat where first > 4 | elsewhere |")
    print("| --- " * 7 + "|")
    for path, by_gap in files:
        rows = [row for gap_rows in by_gap.values() for row in gap_rows]
        for lo, hi in FREQ_BANDS:
            sel = [(f, r) for _, f, r, t in rows
                   if lo <= 1e6 * counts[t] / n_tokens and (hi is None or 1e6 * counts[t] / n_tokens < hi)]
            if not sel:
                continue
            cells = [mean([f for f, _ in sel]), mean([r for _, r in sel]),
                     mean([r for f, r in sel if f > 4]), mean([r for f, r in sel if f <= 4])]
            print(f"| {path} | {band_name(lo, hi)} | {len(sel)} | " + " | ".join(fmt(v) for v in cells) + " |")
    print()
    print(f"| file | first occurrence's loss | tokens | repeat | rare tokens (under {RARE} a million) | the rest |")
    print("| --- " * 6 + "|")
    for path, by_gap in files:
        rows = [(f, r, 1e6 * counts[t] / n_tokens < RARE) for gap_rows in by_gap.values() for _, f, r, t in gap_rows]
        for lo, hi in FIRST_BANDS:
            sel = [(r, rare) for f, r, rare in rows if lo <= f and (hi is None or f < hi)]
            if not sel:
                continue
            cells = [mean([r for r, _ in sel]), mean([r for r, rare in sel if rare]), mean([r for r, rare in sel if not rare])]
            print(f"| {path} | {band_name(lo, hi)} | {len(sel)} | " + " | ".join(fmt(v) for v in cells) + " |")


def main(args):
    usage = "usage: scripts/copy_positions.py [--freq SHARD] POSITIONS.csv [POSITIONS.csv ...] (infer --copy-out's PREFIX_positions.csv)"
    shard = None
    if args[:1] == ["--freq"]:
        if len(args) < 2:
            sys.exit(usage)
        shard, args = args[1], args[2:]
    paths = args
    if not paths or any(p.startswith("--") for p in paths):
        sys.exit(usage)
    files = [(path, read(path)) for path in paths]  # every file checked before the table starts
    counts, n_tokens = read_counts(shard) if shard else (None, 0)
    print("| file | gap | repeat | " + " | ".join(f"at {bucket_name(lo, hi)}" for lo, hi in BUCKETS) +
          " | share at 1-15 | worst 10% share | copied (<0.1) | lost (>2) | repeat where first > 4 | elsewhere"
          " | their share | tokens (first > 4) |")
    print("| --- " * (len(BUCKETS) + 12) + "|")
    by_gap_all = defaultdict(list)
    for path, by_gap in files:
        for gap, rows in sorted(by_gap.items()):
            s = summarize(rows)
            by_gap_all[gap].append(s)
            print(f"| {path} | {gap} | " + " | ".join(row_cells(s)) + " |")
    if len(files) > 1:
        for gap, summaries in sorted(by_gap_all.items()):
            med = [statistics.median(col) if all(v == v for v in col) else float("nan") for col in zip(*summaries)]
            print(f"| median of {len(summaries)} files | {gap} | " + " | ".join(row_cells(med)) + " |")
    if shard:
        print_freq(files, counts, n_tokens)


if __name__ == "__main__":
    main(sys.argv[1:])
