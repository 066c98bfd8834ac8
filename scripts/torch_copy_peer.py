#!/usr/bin/env python3
"""An independent peer for the copy loss: a plain GPT written in PyTorch, trained on the same token
shards as ours (the corpus's train.bin and a task shard mixed in), then scored on the very sequences
`infer --copy-loss --copy-out PREFIX` scored (PREFIX_tokens.csv): the loss per token over passage
tokens 1..P-1 of the first occurrence and of the repeat, by gap, as eval/copy_loss.h computes it.

If this model copies far better than ours at the same size, tokens and learning rate, our training
has a defect; if it pays the same, the budget does (notes/reading.md).

It is a peer, not a replica: the GPT a PyTorch user would write (pre-LayerNorm, GELU, rotary
embeddings pairing dimension i with i + D/2, a tied head, AdamW with weight decay on matrices,
linear warmup then cosine decay to --min-lr-frac, gradient clipping, bf16 autocast on the GPU,
PyTorch's fused attention), with windows drawn at random offsets of train.bin (no document mask)
and --mix's fraction of each batch from whole documents of the task shard.

  python3 scripts/torch_copy_peer.py --data CORPUS --mix SHARD:0.5 --copy-tokens PREFIX_tokens.csv \
      [--seq-len 2048 --batch 64 --steps 600 --layers 6 --width 384 --heads 6 --rope-theta 1e4 --lr 1.5e-3]

Our hybrid's shape: --nope-layers 1,3,5 --window 2048 --logn 512 --rope-theta 1e7. --moba 64,4 then
gives its NoPE layers blocks chosen by content (MoBA's gate: the query against each earlier block's
mean key), --moba 64,4,lagged one choice per query block as a tiled kernel would make it; --qk-conv 4
gives their queries and keys a causal depthwise convolution (Primer's), so that one head can match
several tokens; --diff-attn makes them differential (DIFF Transformer's: the weights of one half of
each head's query and key less lambda times those of the other half, noise common to both cancelled).
--pointer mixes a copy distribution into the output (a pointer-generator's): one more head over the
final states puts its weight on the tokens that followed states like the current one, and a gate
mixes that distribution with the language model's, so a copy can outweigh a confident language
model instead of adding a bounded push to one logit. Ideas tried here before our kernels carry them.

PyTorch is never a dependency of the project: this runs where it is installed (the GPU machines).
"""
import argparse
import csv
import math
import os
import struct
import sys
import time

SHARD_MAGIC = b"LNGSHARD"


def read_shard(path):
    """A token shard (data/FORMAT.md) mapped, not read: (tokens as a numpy array, document starts,
    vocabulary size). A corpus's train.bin may hold hundreds of millions of tokens."""
    import numpy as np
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 36 or head[:8] != SHARD_MAGIC:
            sys.exit(f"error: {path} is not a token shard (no LNGSHARD header): give a corpus's train.bin or a task shard")
        version, token_bytes, n_tokens, n_docs, vocab = struct.unpack_from("<IIQQI", head, 8)
        header = 64 if version >= 2 else 36
        f.seek(header)
        starts = list(struct.unpack("<%dQ" % n_docs, f.read(8 * n_docs)))
    dtype = {2: "<u2", 4: "<u4"}.get(token_bytes)
    offset = header + 8 * n_docs
    if dtype is None or os.path.getsize(path) != offset + token_bytes * n_tokens:
        sys.exit(f"error: {path} is cut short or malformed (token bytes {token_bytes}, {n_tokens} tokens): regenerate it")
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=(n_tokens,)), starts, vocab


def read_copy_tokens(path):
    """infer --copy-out's PREFIX_tokens.csv: one dict per sequence (gap, sample, first_at, repeat_at, passage, ids)."""
    rows = []
    with open(path) as f:
        header = f.readline()
        if header != "gap,sample,first_at,repeat_at,passage,tokens\n":
            sys.exit(f"error: {path} is not an infer --copy-out PREFIX_tokens.csv: run infer --copy-loss ... --copy-out PREFIX")
        for r in csv.reader(f):
            rows.append({"gap": int(r[0]), "sample": int(r[1]), "first_at": int(r[2]), "repeat_at": int(r[3]),
                         "passage": int(r[4]), "ids": [int(x) for x in r[5].split()]})
    return rows


def copy_score(row, token_losses):
    """(first, repeat, repeat's second half): mean loss over passage tokens 1..P-1 of each occurrence
    and P/2..P-1 of the repeat; token_losses[i] is the loss of predicting token i + 1 (eval/copy_loss.h)."""
    P = row["passage"]

    def mean(at, lo, hi):
        return sum(token_losses[at + j - 1] for j in range(lo, hi)) / (hi - lo)
    return mean(row["first_at"], 1, P), mean(row["repeat_at"], 1, P), mean(row["repeat_at"], P // 2, P)


def positions_rows(row, token_losses):
    """PREFIX_positions.csv's rows of one sequence, as infer --copy-out writes them (eval/copy_loss.h):
    passage token j = 1..P-1, its id, its loss at the first occurrence and at the repeat."""
    P, a, b = row["passage"], row["first_at"], row["repeat_at"]
    return [f"{row['gap']},{row['sample']},{j},{row['ids'][a + j]},{token_losses[a + j - 1]:.6f},{token_losses[b + j - 1]:.6f}"
            for j in range(1, P)]


def copy_table(rows, scores):
    """The table infer prints: a row per gap (in the order first seen), its samples averaged."""
    lines = ["       gap  samples  passage      first     repeat   repeat 2nd"]
    gaps = []
    for r in rows:
        if r["gap"] not in gaps:
            gaps.append(r["gap"])
    for g in gaps:
        mine = [s for r, s in zip(rows, scores) if r["gap"] == g]
        P = next(r["passage"] for r in rows if r["gap"] == g)
        avg = [sum(s[i] for s in mine) / len(mine) for i in range(3)]
        name = f"{g // 1024}K" if g >= 1024 and g % 1024 == 0 else str(g)
        lines.append(f"{name:>10} {len(mine):>8} {P:>8} {avg[0]:>10.4f} {avg[1]:>10.4f} {avg[2]:>12.4f}")
    return "\n".join(lines)


def process_lives(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True


def lr_at(step, warmup, total, max_lr, min_lr):
    if step < warmup:
        return max_lr * (step + 1) / warmup
    if total <= warmup:
        return max_lr
    p = min(1.0, (step - warmup) / (total - warmup))
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * p))


def window_mask(torch, T, window, device):
    """True where a query keeps a key: causal, and only the last `window` keys (as --window)."""
    i = torch.arange(T, device=device)
    return (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < window)


def moba_mask(torch, q, k, block, topk, lagged=False):
    """As MoBA: each query (B, H, T, D) keeps its own block of keys (causal) and the `topk` earlier
    blocks whose mean key it scores highest; the choice carries no gradient, as MoBA's gate.

    lagged: one choice per query block, as a tiled kernel would make it: block j keeps itself, block
    j - 1, and the `topk` blocks before j - 1 that the mean query of block j - 1 scores highest (a
    block's own queries would tell its earlier rows about later tokens; block j - 1's are all past)."""
    F = torch.nn.functional
    B, H, T, _ = k.shape
    nb = (T + block - 1) // block
    with torch.no_grad():
        kp = F.pad(k.float(), (0, 0, 0, nb * block - T))
        count = torch.full((nb,), float(block), device=k.device)
        count[-1] = T - (nb - 1) * block
        kmean = kp.view(B, H, nb, block, -1).sum(3) / count[:, None]
        blocks = torch.arange(nb, device=k.device)
        if lagged:  # a choice per query block j from the mean query of block j - 1
            qmean = F.pad(q.float(), (0, 0, 0, nb * block - T)).view(B, H, nb, block, -1).sum(3) / count[:, None]
            query = F.pad(qmean, (0, 0, 1, 0))[:, :, :nb]  # row j: block j - 1's mean query (row 0: zeros)
            own, before = blocks, blocks[None, :] < blocks[:, None] - 1  # (nb, nb): blocks before j - 1
        else:  # a choice per query
            query = q.float()
            own = torch.arange(T, device=k.device) // block
            before = blocks[None, :] < own[:, None]  # (T, nb)
        score = (query @ kmean.transpose(-1, -2)).masked_fill(~before, float("-inf"))
        keep = torch.zeros(score.shape, dtype=torch.bool, device=k.device)
        if topk > 0 and nb > 1:
            # A row with fewer candidate blocks than topk also picks -inf ones: its own block or later
            # (lagged: from j - 1 on), which the kept blocks below and the causal mask settle.
            keep.scatter_(-1, score.topk(min(topk, nb - 1), dim=-1).indices, True)
        keep |= blocks[None, :] == own[:, None]
        if lagged:
            keep |= blocks[None, :] == own[:, None] - 1
            keep = keep.repeat_interleave(block, dim=-2)[..., :T, :]
        token = keep.repeat_interleave(block, dim=-1)[..., :T]
        i = torch.arange(T, device=k.device)
        return token & (i[None, :] <= i[:, None])


def attend(torch, q, k, v, mask):
    """Softmax attention of q, k (B, H, T, E) over v (B, H, T, Ev), scaled by 1 / sqrt(E); mask
    (T, T, True where a query sees a key) or None for causal."""
    F = torch.nn.functional
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)
    T = q.shape[2]  # PyTorch before 2.0
    if mask is None:
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    s = ((q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])).masked_fill(~mask, float("-inf"))
    return s.softmax(-1) @ v


def diff_attend(torch, q, k, v, mask, lam, subln, lambda_init):
    """Differential attention (DIFF Transformer) of q, k, v (B, H, T, D): (A1 - lam A2) v, A1 and A2
    the softmax weights of the first and the second half of each head's query and key; each head's
    output RMS-normalized over its D values, times subln (D) and 1 - lambda_init."""
    h = q.shape[-1] // 2

    def half(lo):  # v in two halves as wide as the query's half: the shapes fused attention serves
        return torch.cat([attend(torch, q[..., lo:lo + h], k[..., lo:lo + h], v[..., i:i + h], mask) for i in (0, h)], -1)
    y = half(0) - lam.to(v.dtype) * half(h)
    y = y.to(torch.promote_types(y.dtype, torch.float32))  # the norm's sums in at least fp32
    return (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5) * subln * (1 - lambda_init)).to(v.dtype)


def pointer_token_losses(torch, q, k, tokens, lm_logits, gate_logit, targets):
    """-log p(targets) (B, T) of the pointer-generator mixture, 0 where a target is -1 (none).

    q, k (B, T, Dp): the pointer's query at each position t and its key for each position s (the
    model makes k[:, s] from position s - 1's state, so a query matches the state the token at s
    followed); tokens (B, T) the inputs; lm_logits (B, T, V); gate_logit (B, T); targets (B, T).
      a_t       = softmax over {null} and {s : 1 <= s <= t} of (0, q_t . k_s / sqrt(Dp))
      p_copy(v) = sum over 1 <= s <= t of a_ts [tokens_s == v]    (the null key copies nothing)
      p(v)      = (1 - g_t) softmax(lm_logits_t)(v) + g_t p_copy(v),  g_t = sigmoid(gate_logit_t)
    The null key lets a query that matches nothing keep its copy mass off every token."""
    F = torch.nn.functional
    B, T, Dp = q.shape
    dt = torch.promote_types(q.dtype, torch.float32)
    with torch.autocast(q.device.type, enabled=False):  # the scores and the mixture in at least fp32
        s = (q.to(dt) @ k.to(dt).transpose(1, 2)) / math.sqrt(Dp)
        pos = torch.arange(T, device=q.device)
        keep = (pos[None, :] <= pos[:, None]) & (pos[None, :] >= 1)
        s = torch.cat([torch.zeros(B, T, 1, dtype=dt, device=q.device), s.masked_fill(~keep, float("-inf"))], dim=2)
        a = s.softmax(-1)[..., 1:]
        y = targets.clamp(min=0)
        p_copy = (a * (tokens[:, None, :] == y[:, :, None]).to(dt)).sum(-1)
        lm = F.log_softmax(lm_logits.to(dt), -1).gather(-1, y[..., None])[..., 0]
        g = gate_logit.to(dt)
        logp = torch.logaddexp(F.logsigmoid(-g) + lm, F.logsigmoid(g) + torch.log(p_copy.clamp(min=1e-30)))
        return torch.where(targets >= 0, -logp, torch.zeros_like(logp))


def causal_depthwise_conv(torch, x, weight):
    """x (B, T, C), weight (C, 1, W): out[t, c] = sum_j weight[c, 0, j] x[t - (W - 1) + j, c], positions
    before 0 read as 0 (causal: a position mixes itself and the W - 1 before it, channel by channel)."""
    F = torch.nn.functional
    W = weight.shape[-1]
    return F.conv1d(F.pad(x.transpose(1, 2), (W - 1, 0)), weight.to(x.dtype), groups=x.shape[2]).transpose(1, 2)


def build_model(torch, vocab, args):
    nn, F = torch.nn, torch.nn.functional
    D = args.width // args.heads
    nope_layers = {int(i) for i in args.nope_layers.split(",") if i}

    class Rotary:
        def __init__(self, T, device):
            inv = args.rope_theta ** (-torch.arange(0, D // 2, dtype=torch.float64, device=device) * 2 / D)
            ang = torch.arange(T, dtype=torch.float64, device=device)[:, None] * inv[None, :]
            self.cos, self.sin = ang.cos().float(), ang.sin().float()

        def __call__(self, x):  # x: B, H, T, D; pairs (i, i + D/2)
            T = x.shape[2]
            c, s = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
            a, b = x[..., : D // 2], x[..., D // 2:]
            return torch.cat([a * c - b * s, a * s + b * c], dim=-1)

    class Block(nn.Module):
        def __init__(self, layer, nope):
            super().__init__()
            C = args.width
            self.ln1, self.ln2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C, eps=1e-5)
            self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.fc, self.fc_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
            # --qk-conv W: each channel of q and k mixes its own value at the W - 1 positions before
            # (Primer's depthwise convolution, on q and k only), so that a key can carry the tokens
            # before it and a query the tokens it ends, and one head can match several tokens
            # instead of one. Starts as the identity (the weight on the position itself 1).
            self.qconv = self.kconv = None
            if args.qk_conv and nope:
                w = torch.zeros(C, 1, args.qk_conv)
                w[:, 0, -1] = 1.0
                self.qconv, self.kconv = nn.Parameter(w.clone()), nn.Parameter(w.clone())
            # --diff-attn: the head's query and key halves make two softmaxes over the same keys; the
            # output is (A1 - lambda A2) V, so weight both spread over unrelated keys cancels (DIFF
            # Transformer). lambda = exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init, lambda_init rising
            # with depth as the paper sets it; each head's output RMS-normalized, scaled by 1 - lambda_init.
            self.diff = bool(args.diff_attn and nope)
            if self.diff:
                self.lambda_init = 0.8 - 0.6 * math.exp(-0.3 * layer)
                self.lq1, self.lk1, self.lq2, self.lk2 = (nn.Parameter(0.1 * torch.randn(D // 2)) for _ in range(4))
                self.subln = nn.Parameter(torch.ones(D))

        def attention(self, x, rope, nope):
            B, T, C = x.shape
            q, k, v = self.qkv(x).split(C, dim=2)
            if nope and self.qconv is not None:
                q, k = causal_depthwise_conv(torch, q, self.qconv), causal_depthwise_conv(torch, k, self.kconv)
            q, k, v = (t.view(B, T, args.heads, D).transpose(1, 2) for t in (q, k, v))
            if nope:
                if args.logn:  # as --logn-attn: a query at position p >= N scaled by ln(p + 1) / ln N
                    p = torch.arange(T, device=x.device, dtype=torch.float32)
                    q = q * (torch.log(p + 1) / math.log(args.logn)).clamp(min=1.0).to(q.dtype)[:, None]
                if args.moba:
                    block, topk = (int(v) for v in args.moba.split(",")[:2])
                    mask = moba_mask(torch, q, k, block, topk, lagged=args.moba.endswith(",lagged"))
                else:
                    mask = None
            else:
                q, k = rope(q), rope(k)
                mask = window_mask(torch, T, args.window, x.device) if args.window else None
            if self.diff:
                lam = torch.exp((self.lq1 * self.lk1).sum()) - torch.exp((self.lq2 * self.lk2).sum()) + self.lambda_init
                y = diff_attend(torch, q, k, v, mask, lam, self.subln, self.lambda_init)
            else:
                y = attend(torch, q, k, v, mask)
            return self.proj(y.transpose(1, 2).reshape(B, T, C))

        def forward(self, x, rope, nope):
            x = x + self.attention(self.ln1(x), rope, nope)
            return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, args.width)
            # --prev-embed: each position also reads an embedding of the token before it (the first
            # position of a window has none), so a key can carry its predecessor without a layer
            # having to move it there: the first half of an induction circuit given as input.
            self.wprev = nn.Embedding(vocab, args.width) if args.prev_embed else None
            self.blocks = nn.ModuleList(Block(i, i in nope_layers) for i in range(args.layers))
            self.ln_f = nn.LayerNorm(args.width, eps=1e-5)
            # --pointer: the copy head (query and key of one head's size) and the gate, over the final states.
            self.ptr_q = self.ptr_k = self.ptr_gate = None
            if args.pointer:
                self.ptr_q, self.ptr_k = nn.Linear(args.width, D, bias=False), nn.Linear(args.width, D, bias=False)
                self.ptr_gate = nn.Linear(args.width, 1)
            self.rope = None
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * args.layers) if name.endswith(("proj.weight", "fc_proj.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)
            if self.ptr_gate is not None:  # the gate starts nearly shut: the language model learns first
                nn.init.constant_(self.ptr_gate.bias, -3.0)

        def token_losses(self, idx, targets):
            """The loss of each target (B, T), 0 where it is -1: the language model's, or with --pointer the mixture's."""
            h = self.hidden(idx)
            logits = h @ self.wte.weight.t()
            if self.ptr_q is None:
                losses = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-1,
                                                           reduction="none")
                return losses.view_as(targets)  # 0 where the target is -1
            k = torch.nn.functional.pad(self.ptr_k(h)[:, :-1], (0, 0, 1, 0))  # key s from the state at s - 1
            return pointer_token_losses(torch, self.ptr_q(h), k, idx, logits, self.ptr_gate(h)[..., 0], targets)

        def forward(self, idx):
            return self.hidden(idx) @ self.wte.weight.t()  # the tied head

        def hidden(self, idx):
            T = idx.shape[1]
            if self.rope is None or self.rope.cos.shape[0] < T:
                self.rope = Rotary(max(T, args.seq_len), idx.device)
            x = self.wte(idx)
            if self.wprev is not None:
                x = x + torch.nn.functional.pad(self.wprev(idx[:, :-1]), (0, 0, 1, 0))
            for i, b in enumerate(self.blocks):
                x = b(x, self.rope, i in nope_layers)
            return self.ln_f(x)

    return GPT()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="corpus directory with train.bin")
    ap.add_argument("--mix", default="", help="SHARD:FRACTION, a task shard whose whole documents fill that fraction of each batch")
    ap.add_argument("--copy-tokens", required=True, help="infer --copy-out's PREFIX_tokens.csv: the sequences to score")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--width", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--rope-theta", type=float, default=1e4)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--prev-embed", action="store_true", help="add an embedding of the previous token to each position's input")
    ap.add_argument("--nope-layers", default="", help="layers (0-based, comma-separated) without rotary embedding, as our hybrid's 1,3,5")
    ap.add_argument("--window", type=int, default=0, help="the rotary layers keep only the last N keys (a sliding window, as --window)")
    ap.add_argument("--logn", type=int, default=0, help="the NoPE layers' queries at position p >= N scaled by ln(p + 1) / ln N (as --logn-attn N)")
    ap.add_argument("--moba", default="", help="BLOCK,TOPK[,lagged]: the NoPE layers keep their own block and the TOPK earlier blocks their "
                    "query scores highest against the block's mean key (as MoBA); lagged: one choice per query block, from the "
                    "block before's mean query (as a tiled kernel would choose)")
    ap.add_argument("--qk-conv", type=int, default=0, help="W: the NoPE layers' queries and keys each pass a causal depthwise "
                    "convolution of W positions (Primer's), started as the identity, so that a head can match several tokens")
    ap.add_argument("--diff-attn", action="store_true", help="the NoPE layers' attention differential (DIFF Transformer): "
                    "(softmax of the query and key halves' first - lambda x their second) V, each head RMS-normalized")
    ap.add_argument("--pointer", action="store_true", help="mix a copy distribution into the output (a pointer-generator): one head over the "
                    "final states weighs the tokens that followed states like the current one, a gate mixes it with the language model's")
    ap.add_argument("--positions-out", default="", help="write each passage token's loss at either occurrence here, as infer "
                    "--copy-out's PREFIX_positions.csv (for scripts/copy_positions.py)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--wait-pid", type=int, default=0, help="after training, wait for --copy-tokens while this process (the run that writes it) lives")
    args = ap.parse_args()
    if not all(x.isdigit() and int(x) < args.layers for x in args.nope_layers.split(",") if x):
        sys.exit(f"error: --nope-layers {args.nope_layers} is not a comma list of layers below --layers {args.layers}: say 1,3,5")
    if args.window < 0 or (args.logn != 0 and args.logn < 2):
        sys.exit(f"error: --window {args.window} / --logn {args.logn}: a window is 0 (none) or a count of keys, a log-n base 0 "
                 "(none) or at least 2")
    if (args.moba or args.logn or args.qk_conv or args.diff_attn) and not args.nope_layers:
        sys.exit("error: --moba, --logn, --qk-conv and --diff-attn act on the NoPE layers only: give --nope-layers (say 1,3,5)")
    if args.diff_attn and args.moba:
        sys.exit("error: --diff-attn with --moba: the block choice is made from one query and key; give one of them")
    if args.qk_conv < 0 or args.qk_conv == 1:
        sys.exit(f"error: --qk-conv {args.qk_conv} is not a convolution's width: give 0 (none) or at least 2 (say 4)")
    moba = args.moba.split(",")
    if args.moba and (len(moba) not in (2, 3) or not all(x.isdigit() for x in moba[:2]) or int(moba[0]) < 1
                      or moba[2:] not in ([], ["lagged"])):
        sys.exit(f"error: --moba {args.moba} is not BLOCK,TOPK or BLOCK,TOPK,lagged (say 64,4): give a block size and a count")
    if args.width % args.heads or (args.width // args.heads) % 2:
        sys.exit(f"error: --width {args.width} is not --heads {args.heads} heads of an even size: give a width that divides")

    import torch
    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    import numpy as np
    train, _, vocab = read_shard(f"{args.data}/train.bin")
    mix, frac = None, 0.0
    if args.mix:
        path, _, f = args.mix.rpartition(":")
        frac = float(f)
        mtok, mstarts, mvocab = read_shard(path)
        if mvocab != vocab:
            sys.exit(f"error: --mix {path} has a vocabulary of {mvocab}, the corpus {vocab}: give a shard of this corpus")
        ends = mstarts[1:] + [len(mtok)]
        docs = [(s, e) for s, e in zip(mstarts, ends) if e - s >= args.seq_len]
        if not docs:
            sys.exit(f"error: --mix {path} has no document of --seq-len {args.seq_len} tokens: give its window's shard")
        mix = (mtok, docs)
    model = build_model(torch, vocab, args).to(dev)
    # Decay on the matrices only: the convolutions' identity start is not pulled toward zero.
    decay = [p for p in model.parameters() if p.dim() == 2]
    rest = [p for p in model.parameters() if p.dim() != 2]
    opt_kw = {"fused": True} if dev.type == "cuda" else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay}, {"params": rest, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, **opt_kw)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"peer: PyTorch {torch.__version__}, {args.layers} layers, width {args.width}, {args.heads} heads, vocab {vocab}"
          f"{', previous-token embedding' if args.prev_embed else ''}"
          f"{f', NoPE layers {args.nope_layers}' if args.nope_layers else ''}{f', rotary window {args.window}' if args.window else ''}"
          f"{f', log-n {args.logn}' if args.logn else ''}{f', MoBA {args.moba}' if args.moba else ''}"
          f"{f', q/k convolution {args.qk_conv}' if args.qk_conv else ''}{', differential attention' if args.diff_attn else ''}"
          f"{', pointer' if args.pointer else ''}: "
          f"{n_params / 1e6:.2f}M parameters, on {dev}", flush=True)
    g = torch.Generator().manual_seed(args.seed)
    T, B = args.seq_len, args.batch
    n_mix = int(round(B * frac)) if mix else 0
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if dev.type == "cuda" else torch.autocast("cpu", enabled=False)
    t0 = time.time()
    for step in range(args.steps):
        xs, ys = [], []
        for i in range(B):
            if i < n_mix:  # a whole task document: its last token has no target
                s, _ = mix[1][int(torch.randint(len(mix[1]), (1,), generator=g))]
                w = np.asarray(mix[0][s:s + T], dtype=np.int64)
                xs.append(w)
                ys.append(np.append(w[1:], -1))
            else:
                s = int(torch.randint(len(train) - T - 1, (1,), generator=g))
                w = np.asarray(train[s:s + T + 1], dtype=np.int64)
                xs.append(w[:-1])
                ys.append(w[1:])
        x, y = torch.from_numpy(np.stack(xs)).to(dev), torch.from_numpy(np.stack(ys)).to(dev)
        lr = lr_at(step, args.warmup, args.steps, args.lr, args.lr * args.min_lr_frac)
        for group in opt.param_groups:
            group["lr"] = lr
        with autocast:
            losses = model.token_losses(x, y)
        loss = losses.float().sum() / (y >= 0).sum().clamp(min=1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            el = time.time() - t0
            print(f"step {step + 1:5d}/{args.steps} | loss {loss.item():.6f} | lr {lr:.2e} | {(step + 1) * B * T / el:9.0f} tok/s",
                  flush=True)
    print(f"done: {args.steps} steps, {args.steps * B * T / (time.time() - t0):.0f} tokens/s", flush=True)

    while not os.path.exists(args.copy_tokens) and args.wait_pid > 0 and process_lives(args.wait_pid):
        time.sleep(2)
    if not os.path.exists(args.copy_tokens):
        sys.exit(f"error: --copy-tokens {args.copy_tokens} does not exist (its writer ended without it): run infer --copy-loss "
                 "... --copy-out PREFIX first")
    rows = read_copy_tokens(args.copy_tokens)
    model.eval()
    scores, positions = [], ["gap,sample,position,token,first_loss,repeat_loss"]
    with torch.no_grad():
        for r in rows:
            ids = torch.tensor(r["ids"], dtype=torch.int64, device=dev)[None]
            with autocast:
                losses = model.token_losses(ids[:, :-1], ids[:, 1:])[0].float()
            scores.append(copy_score(r, losses.tolist()))
            positions += positions_rows(r, losses.tolist())
    if args.positions_out:
        with open(args.positions_out + ".tmp", "w") as f:
            f.write("\n".join(positions) + "\n")
        os.replace(args.positions_out + ".tmp", args.positions_out)
    print("copy loss by gap (nats/token over passage tokens 1..P-1; second half: P/2..P-1)")
    print(copy_table(rows, scores))


if __name__ == "__main__":
    main()
