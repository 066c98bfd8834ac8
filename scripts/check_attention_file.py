#!/usr/bin/env python3
"""Checks an attention_tool safetensors file from outside the project: reads it with the
standard library only (the format is an 8-byte length, a JSON header, raw little-endian data),
recomputes in float64 straight from the spec's definition (docs/attention-spec.md#common: one
softmax per row over the pattern's multiset of keys, dense, dilated, block-sparse or fixed as the "pattern"
metadata says, causal in positions 0..N-1), and compares:
  - a sample of rows of O and L;
  - with --backward files (do, dq, dk, dv): dQ for a sample of query rows and dK, dV for a
    sample of key rows of each checked (b, h) (a key's gradient sums over every query that
    attends it, so those are recomputed by looping over the queries);
  - every value of every tensor: a NaN or an infinity fails (L may be -inf: a row with no key).
Prints one PASS/FAIL line per check, naming the tensor, then a summary line; exit 1 on any
mismatch or malformed file.
    scripts/check_attention_file.py attn.safetensors [--rows 40] [--tol X] [--grad-rows 24]
        [--grad-heads 16] [--grad-tol X] [--grad-stats auto|spec|file]
"""
import argparse, json, math, operator, random, struct, sys
from array import array

# Tolerances by the file's dtype (relative errors, see rel_err below).
# O and L:
TOL_OUT = {"fp64": 1e-9, "fp32": 1e-4, "bf16": 2e-2}
# dQ, dK, dV. The backward is three chained products (dP = dO.V^T, dS = P * (dP - delta),
# dQ = s dS.K, dK = s dS^T.Q, dV = P^T.dO), and dP - delta cancels: delta = rowsum(dO * O)
# is an average of dP under P, so dS is a difference of numbers larger than itself, and a
# gradient row is a sum of terms of both signs. So the gradients lose a few more digits than O:
#   F64: the CPU reference in double. Unit roundoff 1.1e-16; sums of a few thousand terms with
#        a cancellation factor of ~10-100 stay below 1e-12 (seen: ~1e-15). 1e-9, as for O,
#        leaves a margin of 1000x and still catches any wrong term.
#   F32: the CPU reference in float. Unit roundoff 6e-8; the same growth (N terms, random-sign
#        rounding ~ sqrt(N) * eps, times the cancellation) gives ~1e-5: seen up to 2.1e-5
#        (dense, causal and not, dilated, D 64 and 128, N 50..512, scales 0.125..0.5).
#        5e-4 is 25x above that and 20x below a 1% error in every row.
#   BF16: the GPU kernels store q, k, v, dO, O and the gradients in bf16 (unit roundoff
#        2^-9 = 2e-3) and feed P and dS to the tensor cores in bf16, with fp32 accumulation;
#        each of P, dS and the stored result carries ~2e-3 relative rounding. Seen on an H100
#        (flash and cuDNN backends, dense and dilated, causal and not, D 64 and 128, N 64..4096,
#        scales 0.02..2, with L and delta from the file as below): 2.8e-3..4.9e-3. 3e-2 is 6x
#        above that, 1.5x the O tolerance, and fails a 10% error or a wrong mask (O(1) per row).
TOL_GRAD = {"fp64": 1e-9, "fp32": 5e-4, "bf16": 3e-2}
# A gradient row can be (near) zero where the exact value is zero (dQ of a row that attends
# one key: dS = P * (dP - delta) = 0), so its relative error is measured against at least this
# fraction of the typical (RMS) norm of the sampled rows of that tensor.
GRAD_FLOOR = 0.1
# The row statistics the gradients need (L and delta = rowsum(dO * O), for every query of a
# checked key) come either from the spec (a whole row recomputed in float64 for each) or from the
# file's lse and o: the spec's backward "consumes dO, O, L", and the O/L check above verifies
# those against the spec on its own sample. --grad-stats auto takes:
#   - the file's, for BF16: the kernels form delta from the bf16-stored O, whose rounding (2e-3
#     relative, of a delta that nearly cancels dP) is a property of the storage, not of the
#     backward; with a sharp softmax (e.g. --scale 0.5) the exact-O delta moves dQ by ~10%
#     where the bf16-O one agrees within 1%. tests/gpu/test_attention.cu does the same.
#   - the spec's, for F32/F64 up to N = SPEC_STATS_MAX_N (every row is then recomputed: cost
#     ~ N^2 D per (b, h)), the file's beyond.
SPEC_STATS_MAX_N = 256

DTYPE_BYTES = {"F64": 8, "F32": 4, "BF16": 2}


class Bad(Exception):
    """A malformed or inconsistent file: reported as one FAIL line."""


def load(path):
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise Bad("cannot read: %s" % e.strerror)
    if len(blob) < 8:
        raise Bad("not a safetensors file (shorter than 8 bytes)")
    n = struct.unpack_from("<Q", blob, 0)[0]
    if n > len(blob) - 8:
        raise Bad("header length %d exceeds the file" % n)
    try:
        header = json.loads(blob[8:8 + n])
    except ValueError as e:
        raise Bad("header is not JSON: %s" % e)
    if not isinstance(header, dict):
        raise Bad("header is not a JSON object")
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        try:
            dtype, shape, (b, e) = t["dtype"], [int(x) for x in t["shape"]], t["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise Bad("tensor %s: malformed header entry" % name)
        if dtype not in DTYPE_BYTES:
            raise Bad("tensor %s: unsupported dtype %s" % (name, dtype))
        count = 1
        for x in shape:
            if x < 0:
                raise Bad("tensor %s: negative dimension in shape %s" % (name, shape))
            count *= x
        if not (0 <= b <= e <= len(data)) or e - b != count * DTYPE_BYTES[dtype]:
            raise Bad("tensor %s: data_offsets [%s, %s] do not hold shape %s of %s in %d data bytes"
                      % (name, b, e, shape, dtype, len(data)))
        raw = data[b:e]
        if dtype == "F64":
            vals = array("d")
            vals.frombytes(raw)
        elif dtype == "F32":
            vals = array("f")
            vals.frombytes(raw)
        else:  # BF16: the high half of a little-endian fp32
            wide = bytearray(2 * len(raw))
            wide[2::4] = raw[0::2]
            wide[3::4] = raw[1::2]
            vals = array("f")
            vals.frombytes(bytes(wide))
        if sys.byteorder == "big":
            vals.byteswap()
        tensors[name] = (shape, dtype, vals)
    return meta, tensors


M64 = (1 << 64) - 1


def random_block(seed, head, qb, i, rng):
    """A block-sparse layout's i-th random key block of (head, query block): splitmix64."""
    z = seed ^ ((head & 0xFFFFFFFF) << 40) ^ ((qb & 0xFFFFFFFF) << 16) ^ (i & 0xFFFFFFFF)
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    z ^= z >> 31
    return z % rng


def block_sparse_keeps(pt, head, p, k, n):
    """Block-sparse, as the spec says: the builders united (window, global on tokens; dilated
    blocks, random blocks, an explicit layout on blocks)."""
    d, b = p - k, pt["block"]
    causal = pt["causal"]
    if pt["window"] and ((d < pt["window"]) if causal else (abs(d) < pt["window"])):
        return True
    if pt["global"] and (k < pt["global"] or p < pt["global"]):
        return True
    qb, kb = p // b, k // b
    bd = qb - kb if causal else abs(qb - kb)
    if pt["dilated_r"] and bd >= 0 and bd % pt["dilated_r"] == 0 and bd * b < pt["dilated_window"]:
        return True
    if pt["random_count"]:
        rng = qb + 1 if causal else (n + b - 1) // b
        if any(random_block(pt["random_seed"], head, qb, i, rng) == kb for i in range(pt["random_count"])):
            return True
    lay = pt.get("layout")
    if lay and qb < lay["n_blocks"] and (lay["heads"] == 1 or head < lay["heads"]):
        row = (0 if lay["heads"] == 1 else head) * lay["n_blocks"] + qb
        return kb in lay["cols"][lay["row_ptr"][row]:lay["row_ptr"][row + 1]]
    return False


def multiplicity(pattern, head, p, k, n):
    """The spec: how many times query p counts key k."""
    if pattern["causal"] and k > p:
        return 0
    if pattern["kind"] == "dense":
        return 1
    if pattern["kind"] == "block-sparse":
        return 1 if block_sparse_keeps(pattern, head, p, k, n) else 0
    if pattern["kind"] == "fixed":  # its own block, or the last `summary` keys of any block
        l, c = pattern["stride"], pattern["summary"]
        return 1 if p // l == k // l or k % l >= l - c else 0
    m = 0
    for w, r in zip(pattern["segments"], pattern["dilations"]):
        w = min(w, n)
        s = p // w
        if k // w == s and (p - s * w) % r == head % r and (k - s * w) % r == head % r:
            m += 1
    return m


def dot(a, b):
    return sum(map(operator.mul, a, b))


def finite_check(name, shape, vals, is_lse):
    """A NaN anywhere fails, and so does an infinity (L: -inf is a row with no key)."""
    if is_lse:
        if not any(map(math.isnan, vals)) and (len(vals) == 0 or max(vals) < math.inf):
            return None
    elif all(map(math.isfinite, vals)):
        return None
    for i, x in enumerate(vals):
        if x != x or (x in (math.inf, -math.inf) and not (is_lse and x == -math.inf)):
            bad = sum(1 for y in vals if y != y or y == math.inf or (y == -math.inf and not is_lse))
            return "%s: %d non-finite value(s), the first %r at flat index %d of shape %s" % (name, bad, x, i, shape)
    return None


def rel_err(got, ref, floor):
    """||got - ref|| / max(||ref||, floor); NaN turns into inf (NaN compares False everywhere)."""
    diff = math.sqrt(sum((a - c) ** 2 for a, c in zip(got, ref)))
    norm = max(math.sqrt(sum(c * c for c in ref)), floor)
    e = diff / norm if norm > 0 else (0.0 if diff == 0 else math.inf)
    return math.inf if e != e else e


class Head:
    """The rows of one (b, h), with per-query statistics recomputed (or read) on demand."""

    def __init__(self, t, pattern, scale, b, h, dims, spec_stats):
        B, N, H, D = dims
        self.pattern, self.scale, self.h, self.N, self.spec = pattern, scale, h, N, spec_stats
        rows = lambda x: [x[((b * N + p) * H + h) * D:((b * N + p) * H + h) * D + D] for p in range(N)]
        self.q, self.k, self.v = rows(t["q"][2]), rows(t["k"][2]), rows(t["v"][2])
        self.do, self.o = rows(t["do"][2]), rows(t["o"][2])
        self.lse = t["lse"][2][(b * H + h) * N:(b * H + h) * N + N]
        self.stats = {}

    def keys_of(self, p):
        m = [(j, multiplicity(self.pattern, self.h, p, j, self.N)) for j in range(self.N)]
        return [(j, c) for j, c in m if c]

    def row_stats(self, p):
        """(L(p), delta(p) = dO_p . O_p): from the spec in float64, or from the file's L and O."""
        if p not in self.stats:
            if self.spec:
                keys = self.keys_of(p)
                if not keys:
                    self.stats[p] = (-math.inf, 0.0)
                else:
                    s = [(j, c, self.scale * dot(self.q[p], self.k[j])) for j, c in keys]
                    mx = max(x for _, _, x in s)
                    w = [(j, c * math.exp(x - mx)) for j, c, x in s]
                    z = sum(x for _, x in w)
                    # delta = dO . O = sum_j P_j (dO . v_j)
                    delta = sum(x * dot(self.do[p], self.v[j]) for j, x in w) / z
                    self.stats[p] = (mx + math.log(z), delta)
            else:
                self.stats[p] = (float(self.lse[p]), dot(self.do[p], self.o[p]))
        return self.stats[p]

    def prob(self, p, j, c):
        L, _ = self.row_stats(p)
        if L == -math.inf:
            return 0.0
        return c * math.exp(self.scale * dot(self.q[p], self.k[j]) - L)

    def dq(self, p):
        """dQ_p = s sum_j P_pj (dO_p . v_j - delta_p) k_j."""
        _, delta = self.row_stats(p)
        acc = [0.0] * len(self.q[p])
        for j, c in self.keys_of(p):
            P = self.prob(p, j, c)
            ds = self.scale * P * (dot(self.do[p], self.v[j]) - delta)
            acc = [a + ds * x for a, x in zip(acc, self.k[j])]
        return acc

    def dkv(self, j):
        """dK_j = s sum_p P_pj (dO_p . v_j - delta_p) q_p,  dV_j = sum_p P_pj dO_p."""
        D = len(self.k[j])
        dk, dv = [0.0] * D, [0.0] * D
        for p in range(self.N):
            c = multiplicity(self.pattern, self.h, p, j, self.N)
            if not c:
                continue
            P = self.prob(p, j, c)
            if P == 0.0:
                continue
            _, delta = self.row_stats(p)
            ds = self.scale * P * (dot(self.do[p], self.v[j]) - delta)
            dk = [a + ds * x for a, x in zip(dk, self.q[p])]
            dv = [a + P * x for a, x in zip(dv, self.do[p])]
        return dk, dv


def sample(rng, n, count):
    """count distinct rows of range(n), always including the first and the last."""
    if count >= n:
        return list(range(n))
    rows = set([0, n - 1]) if count >= 2 else set()
    while len(rows) < count:
        rows.add(rng.randrange(n))
    return sorted(rows)


def check_gradients(t, pattern, scale, dims, args, rng):
    """Returns {tensor: (worst error, rows checked)}."""
    B, N, H, D = dims
    spec = args.grad_stats == "spec" or (args.grad_stats == "auto" and args.dtype != "bf16" and N <= SPEC_STATS_MAX_N)
    bhs = [(b, h) for b in range(B) for h in range(H)]
    if len(bhs) > args.grad_heads:
        bhs = sorted(rng.sample(bhs, args.grad_heads))
    got = {name: t[name][2] for name in ("dq", "dk", "dv")}
    rows = {"dq": [], "dk": [], "dv": []}  # (got row, ref row)
    for b, h in bhs:
        hd = Head(t, pattern, scale, b, h, dims, spec)
        at = lambda name, p: got[name][((b * N + p) * H + h) * D:((b * N + p) * H + h) * D + D]
        for p in sample(rng, N, args.grad_rows):
            rows["dq"].append((at("dq", p), hd.dq(p)))
        for j in sample(rng, N, args.grad_rows):
            dk, dv = hd.dkv(j)
            rows["dk"].append((at("dk", j), dk))
            rows["dv"].append((at("dv", j), dv))
    out = {}
    for name, pairs in rows.items():
        norms = [math.sqrt(sum(c * c for c in ref)) for _, ref in pairs]
        rms = math.sqrt(sum(x * x for x in norms) / len(norms)) if norms else 0.0
        worst = 0.0
        for g, ref in pairs:
            worst = max(worst, rel_err(g, ref, GRAD_FLOOR * rms))
        out[name] = (worst, len(pairs))
    return out, len(bhs), spec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--rows", type=int, default=40, help="sampled rows of O and L")
    ap.add_argument("--tol", type=float, default=None, help="O and L tolerance (default: by dtype)")
    ap.add_argument("--grad-rows", type=int, default=24, help="query rows (dQ) and key rows (dK, dV) per (b, h)")
    ap.add_argument("--grad-heads", type=int, default=16, help="at most this many (b, h) get gradient rows checked")
    ap.add_argument("--grad-tol", type=float, default=None, help="dQ, dK, dV tolerance (default: by dtype)")
    ap.add_argument("--grad-stats", choices=["auto", "spec", "file"], default="auto",
                    help="row statistics (L, delta) for the gradients: recomputed (spec), the file's L and O (file), "
                    "or auto: file for bf16, spec for fp32/fp64 up to N=%d" % SPEC_STATS_MAX_N)
    args = ap.parse_args()
    for flag, value in (("--rows", args.rows), ("--grad-rows", args.grad_rows), ("--grad-heads", args.grad_heads)):
        if value < 1:
            ap.error("%s must be at least 1 (got %d)" % (flag, value))
    fails, lines = [], []

    def report(ok, name, text):
        lines.append("%s %s: %s" % ("PASS" if ok else "FAIL", name, text))
        if not ok:
            fails.append(name)

    try:
        meta, t = load(args.file)
        for name in ("q", "k", "v", "o", "lse"):
            if name not in t:
                raise Bad("no tensor %s" % name)
        try:
            pattern = json.loads(meta["pattern"])["layer_attn"][0]
            scale = float(meta["scale"])
            dtype = meta["dtype"]
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise Bad("metadata pattern/scale/dtype missing or malformed (%s)" % e)
        if dtype not in TOL_OUT:
            raise Bad("metadata dtype %r is none of %s" % (dtype, ", ".join(TOL_OUT)))
        if not math.isfinite(scale):
            raise Bad("metadata scale %r is not finite" % meta["scale"])
        dims = t["q"][0]
        if len(dims) != 4:
            raise Bad("q has shape %s, not (B, N, H, D)" % dims)
        B, N, H, D = dims
        if min(dims) < 1:
            raise Bad("q has an empty shape %s" % dims)
        grads = [x for x in ("do", "dq", "dk", "dv") if x in t]
        if grads and len(grads) != 4:
            raise Bad("a backward file needs do, dq, dk and dv; it has only %s" % ", ".join(grads))
        for name in ["k", "v", "o"] + grads:
            if t[name][0] != dims:
                raise Bad("%s has shape %s, q has %s" % (name, t[name][0], dims))
        if t["lse"][0] != [B, H, N]:
            raise Bad("lse has shape %s, expected (B, H, N) = %s" % (t["lse"][0], [B, H, N]))
    except Bad as e:
        print("FAIL %s: %s" % (args.file, e))
        sys.exit(1)

    # 1. Every value finite (L: -inf allowed). NaN compares False everywhere, so it is looked for
    # explicitly rather than trusted to fail a tolerance.
    for name in sorted(t):
        why = finite_check(name, t[name][0], t[name][2], name == "lse")
        if why:
            report(False, name, why)

    # 2. O and L on sampled rows.
    q, k, v, o, lse = (t[x][2] for x in ("q", "k", "v", "o", "lse"))
    tol = args.tol if args.tol is not None else TOL_OUT[dtype]
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
        s = [(j, m, scale * dot(qp, at(k, j))) for j, m in keys]
        mx = max(x for _, _, x in s)
        z = sum(m * math.exp(x - mx) for _, m, x in s)
        ref_o = [sum(m * math.exp(x - mx) * at(v, j)[d] for j, m, x in s) / z for d in range(D)]
        ref_l = mx + math.log(z)
        err = max(rel_err(got_o, ref_o, 0.0), abs(got_l - ref_l) / max(1.0, abs(ref_l)))
        worst = max(worst, math.inf if err != err else err)
    report(worst <= tol, "o, lse", "%d rows vs the spec in float64: worst relative error %.3g (tol %.1g)"
           % (args.rows, worst, tol))
    summary = "o/lse %.3g (tol %.1g)" % (worst, tol)

    # 3. Gradients.
    if grads:
        gtol = args.grad_tol if args.grad_tol is not None else TOL_GRAD[dtype]
        args.dtype = dtype
        res, nbh, spec = check_gradients(t, pattern, scale, dims, args, rng)
        how = "L, delta from the spec" if spec else "L, delta from the file's lse and o"
        for name, (w, count) in res.items():
            kind = "query" if name == "dq" else "key"
            report(w <= gtol, name, "%d %s rows over %d (b, h) vs the spec in float64 (%s): worst relative error %.3g (tol %.1g)"
                   % (count, kind, nbh, how, w, gtol))
        summary += ", dq %.3g, dk %.3g, dv %.3g (tol %.1g)" % (res["dq"][0], res["dk"][0], res["dv"][0], gtol)
    else:
        summary += ", no gradients in the file"

    for line in lines:
        print(line)
    if fails:
        names = dict.fromkeys(x for f in fails for x in f.split(", "))
        print("FAIL %s: %s wrong: %s" % (args.file, ", ".join(names), summary))
        sys.exit(1)
    print("PASS %s: %s" % (args.file, summary))
    sys.exit(0)


main()
