#!/usr/bin/env python3
"""Checks an attention_tool safetensors file from outside the project: reads it with the
standard library only (the format is an 8-byte length, a JSON header, raw little-endian data),
recomputes some rows of O and L in float64 straight from the spec's definition (dense or
dilated, from the pattern in the metadata), and compares. Exit 1 on a mismatch.
    scripts/check_attention_file.py attn.safetensors [--rows 40] [--tol 1e-9]
"""
import argparse, json, math, random, struct, sys

def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        raw = data[b:e]
        if t["dtype"] == "F64":
            vals = struct.unpack("<%dd" % (len(raw) // 8), raw)
        elif t["dtype"] == "F32":
            vals = struct.unpack("<%df" % (len(raw) // 4), raw)
        elif t["dtype"] == "BF16":  # the high half of an fp32
            vals = [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
        else:
            sys.exit("unsupported dtype " + t["dtype"])
        tensors[name] = (t["shape"], vals)
    return meta, tensors

def multiplicity(pattern, head, p, k, n):
    """The spec: how many times query p counts key k."""
    if pattern["causal"] and k > p:
        return 0
    if pattern["kind"] == "dense":
        return 1
    m = 0
    for w, r in zip(pattern["segments"], pattern["dilations"]):
        w = min(w, n)
        s = p // w
        if k // w == s and (p - s * w) % r == head % r and (k - s * w) % r == head % r:
            m += 1
    return m

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--rows", type=int, default=40)
    ap.add_argument("--tol", type=float, default=None)
    args = ap.parse_args()
    meta, t = load(args.file)
    pattern = json.loads(meta["pattern"])["layer_attn"][0]
    scale = float(meta["scale"])
    B, N, H, D = t["q"][0]
    q, k, v, o, lse = t["q"][1], t["k"][1], t["v"][1], t["o"][1], t["lse"][1]
    tol = args.tol if args.tol is not None else {"fp64": 1e-9, "fp32": 1e-4, "bf16": 2e-2}[meta["dtype"]]
    rng = random.Random(0)
    worst = 0.0
    for _ in range(args.rows):
        b, h, p = rng.randrange(B), rng.randrange(H), rng.randrange(N)
        at = lambda x, tok: x[((b * N + tok) * H + h) * D:((b * N + tok) * H + h) * D + D]
        qp = at(q, p)
        keys = [(j, multiplicity(pattern, h, p, j, N)) for j in range(N)]
        keys = [(j, m) for j, m in keys if m]
        got_o, got_l = at(o, p), lse[(b * H + h) * N + p]
        if not keys:  # a row with no key: O = 0 and L = -inf (never NaN)
            ok_row = got_l == -math.inf and all(x == 0 for x in got_o)
            worst = max(worst, 0.0 if ok_row else math.inf)
            continue
        s = [(j, m, scale * sum(a * c for a, c in zip(qp, at(k, j)))) for j, m in keys]
        mx = max(x for _, _, x in s)
        z = sum(m * math.exp(x - mx) for _, m, x in s)
        ref_o = [sum(m * math.exp(x - mx) * at(v, j)[d] for j, m, x in s) / z for d in range(D)]
        ref_l = mx + math.log(z)
        norm = math.sqrt(sum(x * x for x in ref_o)) or 1.0
        err = max(math.sqrt(sum((a - c) ** 2 for a, c in zip(got_o, ref_o))) / norm, abs(got_l - ref_l) / max(1.0, abs(ref_l)))
        worst = max(worst, err)
    ok = worst <= tol
    print("%s %s: %d rows of O and L vs the spec in float64: worst relative error %.3g (tol %.1g)"
          % ("PASS" if ok else "FAIL", args.file, args.rows, worst, tol))
    sys.exit(0 if ok else 1)

main()
