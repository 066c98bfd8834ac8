#!/usr/bin/env python3
"""The log-n slopes a model's NoPE heads learned (train --logn-learn), beside where they started.

  scripts/logn_slopes.py CKPT [CKPT ...]   a checkpoint file, or a run's folder (its newest checkpoint)

Prints, per checkpoint, a markdown row per NoPE layer: each head's slope s_h, its ratio to the start
1 / ln(base), and the factor 1 + s_h ln((p + 1) / base) it gives a query at 8K and at 128K (the
fixed factor's beside them). A checkpoint without learned slopes is named and skipped; exit 1 if
none had any. numpy comes from Debian's python3-numpy (scripts/install_deps.sh).
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_model import read_safetensors  # noqa: E402
from weights_only import newest  # noqa: E402


def factor(slope, base, p):
    return 1.0 + slope * math.log((p + 1) / base) if p + 1 > base else 1.0


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: scripts/logn_slopes.py CKPT [CKPT ...]")
    any_slopes = False
    for arg in sys.argv[1:]:
        path = newest(arg)
        try:
            meta, w = read_safetensors(path)
            config = json.loads(meta["config"])
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"error: {path} is not a readable checkpoint ({e}): name a file train wrote")
        base = config.get("logn_attn", 0)
        names = sorted((n for n in w if n.startswith("blocks.") and n.endswith(".attn.logn_slope")), key=lambda n: int(n.split(".")[1]))
        if not config.get("logn_learn", False) or not names:
            print(f"{path}: no learned log-n slopes")
            continue
        any_slopes = True
        start = 1.0 / math.log(base)
        print(f"{path}: slopes from 1 / ln({base}) = {start:.4f}; factors at 8K / 128K (fixed: "
              f"{factor(start, base, 8192):.2f} / {factor(start, base, 131072):.2f})")
        print("| layer | head | slope | / start | factor at 8K | at 128K |")
        print("| --- | --- | --- | --- | --- | --- |")
        for n in names:
            for h, s in enumerate(w[n]):
                print(f"| {n.split('.')[1]} | {h} | {s:.4f} | {s / start:.2f} | {factor(s, base, 8192):.2f} | "
                      f"{factor(s, base, 131072):.2f} |")
    sys.exit(0 if any_slopes else 1)


if __name__ == "__main__":
    main()
