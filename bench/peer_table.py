#!/usr/bin/env python3
"""`make bench`'s last table: each performance target of ours beside its peer, both measured in the
same run on the same GPU, read back from the tables bench/run_bench.sh wrote in DIR:

  attention.md                      dense causal attention, ours and cuDNN (TF/s, one row per N and D)
  attention_block_sparse.md         block-sparse, window 2048 + 128 global tokens (ours)
  attention_block_sparse_flex.md    the same pattern in PyTorch's FlexAttention (scripts/bench_flex_attention.py)
  attention_dilated.md              LongNet's dilated pattern (ours)
  attention_dilated_torch.md        a PyTorch LongNet, flash and cuDNN; `*` marks the faster f+b (the peer)
  train_split_256k.md               the 91M dilated model's step at T = 256K (train --op-split)
  train_124m.md                     the GPT-2 124M shape's training step, our attention and cuDNN's
  decode_1m.md                      prefill and decode of the 91M dilated model at a 1M-token context

A row whose tables are missing (no PyTorch on this machine, a benchmark that stopped) says so instead
of a number. Ratios are ours against the peer, larger is better: TF/s or tokens/s over the peer's, or
the peer's time over ours.

    python3 bench/peer_table.py DIR [--out FILE]

Standard library only."""
import argparse
import os
import re
import sys

NUM = r"[-+]?\d+(?:\.\d+)?"


def read(dir_, name):
    path = os.path.join(dir_, name)
    return open(path).read() if os.path.exists(path) else None


def dense_rows(text):
    """{(N, D): (fwd TF/s, f+b TF/s, cuDNN fwd TF/s, cuDNN f+b TF/s)} from bench_attention's table."""
    rows = {}
    for line in (text or "").splitlines():
        cols = line.split()
        if len(cols) == 11 and cols[0].isdigit():
            v = [float(c) for c in cols[4:]]
            rows[(int(cols[0]), int(cols[1]))] = (v[1], v[3], v[5], v[6])
    return rows


def block_sparse_ms(text, n):
    """(fwd ms, f+b ms) of our fastest window-2048 + 128-global row at N (blocks of 64 or 128)."""
    best = None
    for m in re.finditer(rf"^{n}\s+b\d+ w2048 g128\s+\S+\s+{NUM}%\s+{NUM}%\s+({NUM})\s+{NUM}\s+{NUM}\s+({NUM})", text or "", re.M):
        fwd, fb = float(m.group(1)), float(m.group(2))
        best = (fwd, fb) if best is None or fb < best[1] else best
    return best


def flex_ms(text, n):
    """(fwd ms, f+b ms) of FlexAttention at N."""
    m = re.search(rf"^{n}\s+\S+\s+({NUM})\s+{NUM}\s+{NUM}\s+({NUM})\s", text or "", re.M)
    return (float(m.group(1)), float(m.group(2))) if m else None


def dilated(text, n, name):
    """(fwd ms, f+b ms, f+b TF/s) of the row `N name` (ours: 'dilated'; the peer: the starred row)."""
    m = re.search(rf"^{n}\s+{name}\s+({NUM})\s+{NUM}\s+({NUM})\s+({NUM})", text or "", re.M)
    return (float(m.group(1)), float(m.group(2)), float(m.group(3))) if m else None


def step_tokens_per_s(text, warmup=2):
    """The median tokens/s of train's steps after the first `warmup`, leaving out the one --op-split
    timed op by op (its clock counts the timing); each step once (the table repeats the steps
    that follow the op split's lines)."""
    split = re.search(r"op split of step (\d+)", text or "")
    by_step = {}
    for m in re.finditer(r"^step +(\d+)/\d+ \| loss .*\| +(\d+) tok/s", text or "", re.M):
        step = int(m.group(1))
        if step > warmup and not (split and step == int(split.group(1))):
            by_step.setdefault(step, float(m.group(2)))
    if not by_step:
        return None
    rates = sorted(by_step.values())
    mid = len(rates) // 2
    return rates[mid] if len(rates) % 2 else (rates[mid - 1] + rates[mid]) / 2


def train_tokens_per_s(text, attention, batch):
    m = re.search(rf"^\| {attention} \| {batch} \| \d+ \| {NUM} \| (\d+) \|", text or "", re.M)
    return float(m.group(1)) if m else None


def decode_1m(text):
    """(prefill s, decode tokens/s) of the batch-1 row at a 1M context."""
    m = re.search(rf"^\| 1048576 \| 1 \| ({NUM}) \| {NUM} \| ({NUM}) \|", text or "", re.M)
    return (float(m.group(1)), float(m.group(2))) if m else None


def ratio(num, den):
    """num / den, or None where either is missing or den is 0 (a table that printed no time)."""
    return num / den if num is not None and den else None


def fmt(x, digits=1):
    return "-" if x is None else f"{x:,.{digits}f}"


def table(dir_):
    rows = []  # (what, ours, peer, ratio text, target, met: True / False / None)

    def add(what, ours, peer, times, target, lowest, digits=1, ratio_text=None):
        met = None if times is None else times >= lowest
        text = ratio_text if ratio_text is not None else (f"{times:.2f}x" if times is not None else "not run")
        rows.append((what, ours if isinstance(ours, str) else fmt(ours, digits),
                     peer if isinstance(peer, str) else fmt(peer, digits), text, target, met))

    dense = dense_rows(read(dir_, "attention.md"))
    for d in (64, 128):
        for ns, lowest, label in (((1024, 2048, 4096), 0.95, "1K-4K"), ((8192, 16384, 32768, 65536), 1.0, "8K-64K")):
            got = [dense[(n, d)] for n in ns if (n, d) in dense]
            ratios = [x for x in (ratio(r[1], r[3]) for r in got) if x is not None]
            add(f"dense causal f+b, D = {d}, {label} (TF/s)", " / ".join(f"{r[1]:.0f}" for r in got) or "-",
                " / ".join(f"{r[3]:.0f}" for r in got) or "-", min(ratios) if ratios else None,
                f">= {lowest:.2f}x cuDNN", lowest,
                ratio_text=(" / ".join(f"{x:.2f}" for x in ratios) + " (worst)") if ratios else None)
    for d in (64, 128):
        r = dense.get((16384, d))
        add(f"dense forward 16K, D = {d} (TF/s)", r and r[0], r and r[2], r and ratio(r[0], r[2]), ">= 1.0x cuDNN", 1.0)

    ours = block_sparse_ms(read(dir_, "attention_block_sparse.md"), 1 << 20)
    flex = flex_ms(read(dir_, "attention_block_sparse_flex.md"), 1 << 20)
    for i, (what, lowest) in enumerate((("forward", 1.2), ("f+b", 1.5))):
        add(f"block-sparse 1M, window 2048 + 128 global, {what} (ms)", ours and ours[i], flex and flex[i],
            ours and flex and ratio(flex[i], ours[i]), f">= {lowest}x FlexAttention", lowest, digits=2)

    ours = dilated(read(dir_, "attention_dilated.md"), 1 << 20, "dilated")
    peer = dilated(read(dir_, "attention_dilated_torch.md"), 1 << 20, r"torch \w+ \*")
    add("LongNet 1M, f+b (TF/s)", ours and ours[2], "-", ours and ours[2] / 330.0, ">= 330 TF/s", 1.0,
        ratio_text=f"{ours[2] / 330.0:.2f} of 330" if ours else None)
    add("LongNet 1M, f+b (ms) against the PyTorch LongNet", ours and ours[1], peer and peer[1],
        ours and peer and ratio(peer[1], ours[1]), ">= 4x", 4.0, digits=2)

    tps = step_tokens_per_s(read(dir_, "train_split_256k.md"))
    add("91M dilated model, T = 256K, one GPU (tokens/s)", tps, "-", tps and tps / 490000, ">= 490K tokens/s", 1.0, digits=0,
        ratio_text=f"{tps / 490000:.2f} of 490K" if tps else None)

    train = read(dir_, "train_124m.md")
    for batch in (32, 64):
        o, p = train_tokens_per_s(train, "flash", batch), train_tokens_per_s(train, "cudnn", batch)
        add(f"GPT-2 124M shape, T = 1024, batch {batch} (tokens/s)", o, p, ratio(o, p), ">= 1.1x cuDNN's", 1.1, digits=0)

    dec = decode_1m(read(dir_, "decode_1m.md"))
    add("1M context, batch 1: decode averaged over 32K positions (tokens/s)", dec and dec[1], "-", dec and dec[1] / 5000,
        ">= 5,000 tokens/s", 1.0, digits=0, ratio_text=f"{dec[1] / 5000:.2f} of 5,000" if dec else None)
    speed = dec and ratio(0.6, dec[0])
    add("1M context, batch 1: prefill (s)", dec and dec[0], "-", speed, "<= 0.6 s", 1.0, digits=3,
        ratio_text=f"{speed:.2f} of the target's speed" if speed else None)

    out = ["# make bench: ours beside the strongest peer, the same run on the same GPU (bench/peer_table.py)", "",
           "| what | ours | peer | ours against the peer | target | met |", "| --- | --- | --- | --- | --- | --- |"]
    for what, o, p, against, target, met in rows:
        out.append(f"| {what} | {o} | {p} | {against} | {target} | {'-' if met is None else 'yes' if met else 'no'} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--out")
    args = ap.parse_args()
    if not os.path.isdir(args.dir):
        print(f"error: peer_table: {args.dir} is not a directory: give the folder make bench wrote (build/bench)", file=sys.stderr)
        return 2
    text = table(args.dir)
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
