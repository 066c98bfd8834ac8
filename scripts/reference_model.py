#!/usr/bin/env python3
"""The model of a longnet-gpt checkpoint in plain numpy, float64, from the file alone.

Reads a checkpoint that build/train wrote (a safetensors file, parsed here by hand: an 8-byte
little-endian header length, the JSON header, the tensors' raw bytes), takes every hyperparameter
from its metadata ("config" and "forward", docs/training.md) and computes the logits of a prompt.
One function per layer kind, named as in layers/*.h; each attention pattern is the mask that
docs/attention-spec.md gives it. No KV cache, no document masks (infer applies none to one prompt).

  scripts/reference_model.py CKPT --tokens 1,87,5          the logits of the last position
  scripts/reference_model.py CKPT --tokens-file IDS.txt    ids separated by spaces, commas or lines
  scripts/reference_model.py CKPT --compare L.safetensors  the prompt and logits that
        `infer --checkpoint CKPT --logits-out L.safetensors --prompt ...` wrote: prints the largest
        difference over every position relative to the logits' scale, exits 1 above --tol (1e-4)

--break WHAT computes a deliberately wrong model, so that a test can see the comparison fail:
eps (LayerNorm epsilon 1e-6), rotary (no rotary embedding in layer 0), pairing (rotate
neighbouring dimensions, 2i with 2i+1), logn (no log-n scaling), mask (every layer dense causal),
qkconv (the q/k convolution's taps reversed: the weight of the token itself on the oldest), qkswap
(q's convolution weights on k and k's on q), sink (the attention sinks left out), slope (the
learned log-n slopes left out: the fixed factor instead).
numpy comes from Debian's python3-numpy (scripts/install_deps.sh).
"""
import argparse
import json
import math
import struct
import sys

try:
    import numpy as np
except ImportError:
    sys.exit("error: reference_model.py needs numpy: install Debian's python3-numpy (scripts/install_deps.sh) "
             "and run it with a python3 that has it")

BROKEN = set()  # --break: the deliberate mistakes asked for

# ---- the file ------------------------------------------------------------------------------

DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "BF16": "<u2"}


def read_safetensors(path):
    """(metadata, {name: float64 or int array}) of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        raw = np.frombuffer(data[begin:end], dtype=DTYPES[t["dtype"]])
        if t["dtype"] == "BF16":  # the top half of a float32
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = raw.reshape(t["shape"]).astype(np.int64 if t["dtype"] == "I32" else np.float64)
    return meta, tensors


def forward_record(meta, config):
    """The checkpoint's "forward" record; a checkpoint written before it implies these values."""
    if "forward" in meta:
        return json.loads(meta["forward"])
    nope = config.get("nope_layers", [])
    logn = config.get("logn_attn", 0)
    print("note: the checkpoint has no \"forward\" record (written before it): using the values it implies",
          file=sys.stderr)
    return {"layernorm_eps": 1e-5, "activation": "gelu_tanh", "rotary": "half_split", "lm_head": "tied_to_wte",
            "attn_scale": 1 / math.sqrt(config["n_embd"] // config["n_head"]),
            "layers": [{"rotary_base": 0 if l in nope else config["rope_theta"], "logn_base": logn if l in nope else 0}
                       for l in range(config["n_layer"])]}


# ---- the layers (layers/*.h) ---------------------------------------------------------------

def encoder(wte, tokens):  # (T) -> (T, C)
    return wte[tokens]


def layernorm(x, weight, bias, eps):  # over the last dimension
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def matmul(x, weight, bias):  # weight (out, in), as PyTorch's Linear
    return x @ weight.T + bias


def gelu(x, form):
    if form == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    sys.exit(f"error: activation {form!r} is not one this script knows")


def rope(x, positions, base, pairing):
    """x (T, H, D): dimension i paired with i + D/2 (half_split) or 2i with 2i + 1 (interleaved),
    the pair rotated by pos * base^(-2i/D). Base 0: no rotation (NoPE)."""
    if base == 0:
        return x
    D = x.shape[-1]
    i = np.arange(D // 2)
    angle = positions[:, None] * base ** (-2.0 * i / D)  # (T, D/2)
    c, s = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    if pairing == "half_split":
        a, b = x[..., :D // 2], x[..., D // 2:]
        return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)
    if pairing == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
        return out
    sys.exit(f"error: rotary {pairing!r} is not one this script knows")


def qk_conv(x, weight, broken=False):
    """x (T, C): a causal depthwise convolution, out[t] = sum_j weight[j] * x[t - j] (weight (W, C),
    row 0 the token itself; tokens before 0 read as 0). layers/qk_conv.h."""
    if broken:
        weight = weight[::-1]
    out = np.zeros_like(x)
    for j in range(weight.shape[0]):
        out[j:] += weight[j] * x[:x.shape[0] - j]
    return out


def logn_scale(q, positions, base, slope=None):
    """Queries at position p scaled by ln(p + 1) / ln(base) where p + 1 > base (base 0: none); with
    learned slopes (slope[h], layers/rope.h logn_slope_scale) by 1 + slope[h] ln((p + 1) / base)."""
    if base == 0:
        return q
    past = positions + 1 > base
    if slope is None:
        scale = np.where(past, np.log(positions + 1.0) / math.log(base), 1.0)
        return q * scale[:, None, None]
    scale = np.where(past[:, None], 1.0 + slope[None, :] * np.log((positions[:, None] + 1.0) / base), 1.0)
    return q * scale[:, :, None]


# ---- the attention patterns (docs/attention-spec.md): m[p, k] for one head --------------------

def dense_mask(pattern, head, P, K, N):
    return np.ones_like(P)


def dilated_mask(pattern, head, P, K, N):
    """#dilated: the branches in which p and k share a segment and head's class."""
    m = np.zeros_like(P)
    for w, r in zip(pattern["segments"], pattern["dilations"]):
        w = min(w, N)
        start = P // w * w
        c = head % r
        m += (K // w == P // w) & ((P - start) % r == c) & ((K - start) % r == c)
    return m


def random_block(seed, head, qb, i, count):
    """#block-sparse random blocks: splitmix64 of (seed, head, query block, draw), the bits mixed
    as layers/patterns/block_sparse.h mixes them (the spec names the hash, not its constants)."""
    mask = (1 << 64) - 1
    z = seed ^ (head << 40) ^ (qb << 16) ^ i
    z = (z + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return (z ^ (z >> 31)) % count


def block_sparse_mask(pattern, head, P, K, N):
    """#block-sparse: 1 where any builder keeps the pair (token rules, then block rules)."""
    b, causal = pattern["block"], pattern["causal"]
    keep = np.zeros(P.shape, dtype=bool)
    if pattern["window"]:
        W = pattern["window"]
        keep |= (P - K >= 0) & (P - K < W) if causal else np.abs(P - K) < W
    if pattern["global"]:
        keep |= (K < pattern["global"]) | (P < pattern["global"])
    QB, KB = P // b, K // b
    if pattern["dilated_r"]:
        d = QB - KB if causal else np.abs(QB - KB)
        keep |= (d >= 0) & (d % pattern["dilated_r"] == 0) & (d * b < pattern["dilated_window"])
    blocks = np.zeros((QB.max() + 1, KB.max() + 1), dtype=bool)  # (query block, key block) active
    for qb in range(blocks.shape[0]):
        count = qb + 1 if causal else -(-N // b)
        for i in range(pattern["random_count"]):
            blocks[qb, random_block(pattern["random_seed"], head, qb, i, count)] = True
    layout = pattern.get("layout")
    if layout:  # CSR rows per (head if per-head, query block); blocks past it keep nothing
        n, heads = layout["n_blocks"], layout["heads"]
        if heads == 1 or head < heads:
            for qb in range(min(n, blocks.shape[0])):
                row = (0 if heads == 1 else head) * n + qb
                for kb in layout["cols"][layout["row_ptr"][row]:layout["row_ptr"][row + 1]]:
                    if kb < blocks.shape[1]:
                        blocks[qb, kb] = True
    keep |= blocks[QB, KB]
    return keep.astype(P.dtype)


def fixed_mask(pattern, head, P, K, N):
    """#fixed: k in p's block of `stride` tokens, or k among the last `summary` of any block."""
    l, c = pattern["stride"], pattern["summary"]
    return ((K // l == P // l) | (K % l >= l - c)).astype(P.dtype)


PATTERNS = {"dense": dense_mask, "dilated": dilated_mask, "block-sparse": block_sparse_mask, "fixed": fixed_mask}


def multiplicity(pattern, head, N):
    """m(p, k) of #common: the pattern's count, then the causal mask (k > p: 0)."""
    P, K = np.meshgrid(np.arange(N), np.arange(N), indexing="ij")
    if "mask" in BROKEN:
        pattern = {"kind": "dense", "causal": True}
    kind = pattern["kind"]
    if kind not in PATTERNS:
        sys.exit(f"error: attention pattern {kind!r} is not one this script knows")
    m = PATTERNS[kind](pattern, head, P, K, N).astype(np.float64)
    if pattern["causal"]:
        m[K > P] = 0
    return m


def attention(q, k, v, pattern, scale, sink=None):
    """#common's one formula per head: O(p) = sum_k m(p,k) exp(s q_p.k_k - L(p)) v_k; a row with
    no key gives O = 0. #sink: sink[h] is one more score in every row of head h, of value zero."""
    T, H, D = q.shape
    out = np.zeros_like(q)
    for h in range(H):
        m = multiplicity(pattern, h, T)
        s = scale * q[:, h] @ k[:, h].T
        s = np.where(m > 0, s, -np.inf)
        top = s.max(-1, keepdims=True)
        if sink is not None:
            top = np.maximum(top, sink[h])
        top[~np.isfinite(top)] = 0
        w = m * np.exp(s - top)
        total = w.sum(-1, keepdims=True)
        if sink is not None:
            total = total + np.exp(sink[h] - top)
        out[:, h] = np.divide(w, total, out=np.zeros_like(w), where=total > 0) @ v[:, h]
    return out


# ---- the model (model/gpt.h) ---------------------------------------------------------------

def block(x, w, l, config, fwd, positions):
    """One pre-LayerNorm block: attention of layer l's pattern, then the MLP."""
    C, H = config["n_embd"], config["n_head"]
    T, D = x.shape[0], C // H
    eps = 1e-6 if "eps" in BROKEN else fwd["layernorm_eps"]
    layer = fwd["layers"][l]
    p = f"blocks.{l}."
    qkv = matmul(layernorm(x, w[p + "ln1.weight"], w[p + "ln1.bias"], eps), w[p + "attn.qkv.weight"], w[p + "attn.qkv.bias"])
    if layer.get("qk_conv", 0):  # a NoPE layer's q/k convolution: weight (W, 2C), q's channels then k's
        conv = w[p + "attn.qk_conv.weight"]
        if "qkswap" in BROKEN:
            conv = np.concatenate([conv[:, C:], conv[:, :C]], axis=1)
        broken = "qkconv" in BROKEN
        qkv = np.concatenate([qk_conv(qkv[:, :C], conv[:, :C], broken), qk_conv(qkv[:, C:2 * C], conv[:, C:], broken),
                              qkv[:, 2 * C:]], axis=1)
    q, k, v = (qkv[:, i * C:(i + 1) * C].reshape(T, H, D) for i in range(3))
    base = 0 if ("rotary" in BROKEN and l == 0) else layer["rotary_base"]
    pairing = "interleaved" if "pairing" in BROKEN else fwd["rotary"]
    q, k = rope(q, positions, base, pairing), rope(k, positions, base, pairing)
    slope = w[p + "attn.logn_slope"] if layer.get("logn_slope", False) and "slope" not in BROKEN else None
    q = logn_scale(q, positions, 0 if "logn" in BROKEN else layer["logn_base"], slope)
    sink = w[p + "attn.sink"] if layer.get("attn_sink", False) and "sink" not in BROKEN else None
    a = attention(q, k, v, config["layer_attn"][l], fwd["attn_scale"], sink).reshape(T, C)
    x = x + matmul(a, w[p + "attn.proj.weight"], w[p + "attn.proj.bias"])  # residual
    h = gelu(matmul(layernorm(x, w[p + "ln2.weight"], w[p + "ln2.bias"], eps), w[p + "mlp.fc.weight"], w[p + "mlp.fc.bias"]),
             fwd["activation"])
    return x + matmul(h, w[p + "mlp.proj.weight"], w[p + "mlp.proj.bias"])


def gpt_logits(meta, w, tokens):
    """(T, vocab) logits of tokens at positions 0..T-1."""
    config = json.loads(meta["config"])
    fwd = forward_record(meta, config)
    if fwd["lm_head"] != "tied_to_wte":
        sys.exit(f"error: LM head {fwd['lm_head']!r} is not one this script knows")
    if "pointer" in fwd:  # its output is a mixture of distributions, not logits (layers/pointer.h)
        sys.exit("error: the checkpoint's model has a pointer, whose copy this script does not compute: compare a model without --pointer")
    if len(fwd["layers"]) != config["n_layer"] or len(config["layer_attn"]) != config["n_layer"]:
        sys.exit("error: the checkpoint's forward record or layer_attn does not list every layer")
    positions = np.arange(len(tokens), dtype=np.float64)
    x = encoder(w["wte"], tokens)
    for l in range(config["n_layer"]):
        x = block(x, w, l, config, fwd, positions)
    eps = 1e-6 if "eps" in BROKEN else fwd["layernorm_eps"]
    return layernorm(x, w["lnf.weight"], w["lnf.bias"], eps) @ w["wte"].T  # classifier, tied to the embedding


# ---- the command line ----------------------------------------------------------------------

def read_tokens(path):
    with open(path, "rb") as f:
        head = f.read(16)
    if len(head) > 8 and head[8:9] == b"{":  # a safetensors file: infer --logits-out's "tokens"
        return read_safetensors(path)[1]["tokens"]
    with open(path) as f:
        return np.array([int(t) for t in f.read().replace(",", " ").split()], dtype=np.int64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--tokens", help="token ids, e.g. 1,87,5 (BOS is not added)")
    ap.add_argument("--tokens-file", help="token ids in a text file, or infer --logits-out's file")
    ap.add_argument("--compare", help="infer --logits-out's file: compare its logits (and take its tokens)")
    ap.add_argument("--tol", type=float, default=1e-4, help="--compare: the largest relative difference accepted")
    ap.add_argument("--all", action="store_true", help="print the logits of every position, not only the last")
    ap.add_argument("--break", dest="broken", action="append", default=[],
                    choices=["eps", "rotary", "pairing", "logn", "mask", "qkconv", "qkswap", "sink", "slope"], help="compute a deliberately wrong model")
    a = ap.parse_args()
    BROKEN.update(a.broken)
    meta, w = read_safetensors(a.checkpoint)
    if meta.get("format") != "longnet-gpt/1":
        sys.exit(f"error: {a.checkpoint} is not a longnet-gpt/1 checkpoint (format {meta.get('format')!r})")
    if a.tokens:
        tokens = np.array([int(t) for t in a.tokens.split(",")], dtype=np.int64)
    elif a.tokens_file or a.compare:
        tokens = read_tokens(a.tokens_file or a.compare)
    else:
        sys.exit("error: give the prompt: --tokens, --tokens-file or --compare")
    vocab = w["wte"].shape[0]
    if len(tokens) == 0 or tokens.min() < 0 or tokens.max() >= vocab:
        sys.exit(f"error: the prompt must be token ids in [0, {vocab})")
    logits = gpt_logits(meta, w, tokens)
    if a.compare:
        theirs = read_safetensors(a.compare)[1]["logits"]
        if theirs.shape != logits.shape:
            sys.exit(f"error: {a.compare} holds logits of shape {theirs.shape}, the reference computes {logits.shape}")
        diff = np.abs(logits - theirs).max()
        scale = np.abs(logits).max()
        rel = diff / scale
        print(f"{len(tokens)} positions: max |reference - infer| = {diff:.3e}, logit scale {scale:.3f}, "
              f"relative {rel:.3e} (tolerance {a.tol:g})")
        sys.exit(0 if rel <= a.tol else 1)
    for row in logits if a.all else logits[-1:]:
        print(" ".join(f"{v:.9g}" for v in row))


if __name__ == "__main__":
    main()
