#!/usr/bin/env python3
"""A PyTorch LongNet: the peer of bench/bench_attention_dilated.cu, run in the same
device call by `make bench`. PyTorch is never a dependency of the project: this script only runs
where it is installed.

What it computes is docs/attention-spec.md#dilated, causal: branch i cuts the sequence into
segments of w_i' = min(w_i, N); in a segment, head h keeps the rows whose offset from the segment's
start is h mod r_i, and attends causally over that "virtual sequence"; the branches merge by their
log-sum-exps, L = log sum_i exp(L_i), O = sum_i exp(L_i - L) O_i. As a LongNet implementation in
PyTorch does it (torchscale's): each (branch, head class) is gathered into a batch of virtual
sequences and run through one of PyTorch's fused attentions that return the log-sum-exp with the
output: flash (FlashAttention-2, aten._scaled_dot_product_flash_attention) or cuDNN's
(aten._scaled_dot_product_cudnn_attention). Both are timed and the faster is the peer: the
strongest LongNet a user could write from PyTorch's parts. The backward is the spec's generic one:
for every branch, the backend's backward with the MERGED output and log-sum-exp in place of the
branch's own (P = exp(S - L) and delta = rowsum(dO * O) are then the merged softmax's), the
per-branch dQ, dK, dV added up. Autograd through the branch LSEs would drop their gradient
(PyTorch marks them non-differentiable), so this is a custom autograd.Function.

First it checks itself, with each backend, against a float64 dense reference that applies the
spec's multiplicity m(p, k) (the number of branches in which p and k share a segment and head h's
class) as log m added to the scores, forward and backward, on odd sizes with a class that no head
keeps (r > H); a failed check prints FAIL and exits 1 before any timing. A backend this PyTorch or
GPU does not offer (the op raises) is skipped with a SKIP line; flash must run.

Benchmark (the same problem as ours): B = 1, H = 12, D = 64, bf16, causal, (w, r) = (2048, 1),
(4096, 2), (8192, 4), N = 16K .. 1M. FLOPs 4*B*D*pairs_kept, x3.5 for forward + backward, with
pairs_kept counted in closed form (the table prints it; ours counts the same). Times: median of
--reps runs after --warmup (CUDA events); the forward with autograd on (a training forward).

    python3 scripts/bench_longnet_torch.py [--out FILE] [--sizes 16384,...] [--reps 5] [--check-only]
"""
import argparse
import math
import sys

BRANCHES = ((2048, 1), (4096, 2), (8192, 4))


def pairs_kept(n, h, branches):
    """Causal pairs (p, k) kept per head and branch, summed (DilatedPattern::pairs_kept)."""
    total = 0
    for w, r in branches:
        w = min(w, n)
        for start in range(0, n, w):
            seg = min(w, n - start)
            for head in range(h):
                c = head % r
                rows = (seg - c + r - 1) // r if c < seg else 0
                total += rows * (rows + 1) // 2
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--sizes", default="16384,65536,262144,1048576")
    ap.add_argument("--check-only", action="store_true")
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"SKIP bench_longnet_torch: {e}")
        return 0
    if not torch.cuda.is_available():
        print("SKIP bench_longnet_torch: no CUDA device")
        return 0
    flash_fwd = torch.ops.aten._scaled_dot_product_flash_attention
    flash_bwd = torch.ops.aten._scaled_dot_product_flash_attention_backward

    # Each backend: forward (q, k, v (batch, heads, m, D) contiguous, scale) -> (O, L (batch, heads,
    # m) fp32, what its backward needs); backward (dO, q, k, v, O, L, that, scale) -> dQ, dK, dV.
    def flash_forward(q, k, v, scale):
        res = flash_fwd(q, k, v, 0.0, True, False, scale=scale)
        return res[0], res[1][..., :q.shape[2]], tuple(res[2:8])

    def flash_backward(do, q, k, v, o, lse, saved, scale):
        cq, ck, mq, mk, seed, offset = saved
        return flash_bwd(do, q, k, v, o, lse, cq, ck, mq, mk, 0.0, True, seed, offset, scale=scale)

    def cudnn_forward(q, k, v, scale):
        res = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, attn_bias=None, compute_log_sumexp=True,
                                                                 dropout_p=0.0, is_causal=True, return_debug_mask=False,
                                                                 scale=scale)
        lse = res[1]
        trailing = lse.dim() == 4  # some versions keep cuDNN's (batch, heads, m, 1) statistics
        return res[0], (lse[..., 0] if trailing else lse).float(), (res[2], res[3], res[4], res[5], res[6], res[7], trailing)

    def cudnn_backward(do, q, k, v, o, lse, saved, scale):
        cq, ck, mq, mk, seed, offset, trailing = saved
        return torch.ops.aten._scaled_dot_product_cudnn_attention_backward(
            do, q, k, v, o, logsumexp=lse.unsqueeze(-1) if trailing else lse, philox_seed=seed, philox_offset=offset,
            attn_bias=None, cum_seq_q=cq, cum_seq_k=ck, max_q=mq, max_k=mk, dropout_p=0.0, is_causal=True, scale=scale)

    BACKENDS = {"flash": (flash_forward, flash_backward), "cudnn": (cudnn_forward, cudnn_backward)}

    def geometry(n, w, r):
        w = min(w, n)
        nseg = -(-n // w)
        m = -(-w // r)  # virtual rows per segment and class (the last ones padding when r does not divide w)
        return w, nseg, m

    def to_classes(x, n, w, r, fill=0.0):
        """(B, N, H, ...) -> (B, nseg, m, r, H, ...): segment s, virtual row t, class c is position
        s*w + c + t*r; positions past a segment's end or past N are `fill` (they come after every
        real row of their virtual sequence, so the causal mask keeps them out of real rows)."""
        w, nseg, m = geometry(n, w, r)
        tail = x.shape[2:]
        flat = (0, 0) * len(tail)
        x = F.pad(x, flat + (0, nseg * w - n), value=fill)
        x = x.reshape(x.shape[0], nseg, w, *tail)
        x = F.pad(x, flat + (0, m * r - w), value=fill)
        return x.reshape(x.shape[0], nseg, m, r, *tail)

    def from_classes(y, n, w, r):
        w, nseg, m = geometry(n, w, r)
        y = y.reshape(y.shape[0], nseg, m * r, *y.shape[4:])[:, :, :w]
        return y.reshape(y.shape[0], nseg * w, *y.shape[3:])[:, :n]

    def heads_of(c, r, h, device):
        return torch.arange(c, h, r, device=device)

    def gather(xc, c, hs):
        """(B, nseg, m, r, H, D) -> (B*nseg, Hc, m, D): class c's virtual sequences, heads hs."""
        y = xc.select(3, c).index_select(3, hs)  # (B, nseg, m, Hc, D)
        return y.reshape(-1, *y.shape[2:]).transpose(1, 2).contiguous()

    def scatter(buf, c, hs, y, bsz, nseg):
        """Adds y (B*nseg, Hc, m, D) into buf (B, nseg, m, r, H, D) at class c, heads hs."""
        hc, m = y.shape[1], y.shape[2]
        y = y.transpose(1, 2).reshape(bsz, nseg, m, hc, *y.shape[3:])  # (B, nseg, m, Hc, D)
        buf.select(3, c).index_add_(3, hs, y.to(buf.dtype))

    class LongNet(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, branches, scale, backend):  # (B, N, H, D) each
            sdpa_forward = BACKENDS[backend][0]
            bsz, n, h, d = q.shape
            outs, lses, saved = [], [], []
            for w, r in branches:
                _, nseg, m = geometry(n, w, r)
                qc, kc, vc = (to_classes(x, n, w, r) for x in (q, k, v))
                ob = torch.zeros(bsz, nseg, m, r, h, d, device=q.device, dtype=torch.float32)
                lb = torch.full((bsz, nseg, m, r, h, 1), -math.inf, device=q.device, dtype=torch.float32)
                for c in range(min(r, h)):
                    hs = heads_of(c, r, h, q.device)
                    gq, gk, gv = gather(qc, c, hs), gather(kc, c, hs), gather(vc, c, hs)
                    o, lse, kept = sdpa_forward(gq, gk, gv, scale)
                    scatter(ob, c, hs, o, bsz, nseg)
                    # (B*nseg, Hc, m) -> (B, nseg, m, Hc, 1), copied (not added: the buffer holds -inf)
                    lb.select(3, c).index_copy_(3, hs, lse.reshape(bsz, nseg, -1, m).transpose(2, 3).unsqueeze(-1)
                                                .float().contiguous())
                    saved.append((w, r, c, gq, gk, gv, kept))
                outs.append(from_classes(ob, n, w, r))
                lses.append(from_classes(lb, n, w, r)[..., 0])
            lse_all = torch.stack(lses, -1)                        # (B, N, H, branches)
            lse = torch.logsumexp(lse_all, -1)                     # (B, N, H)
            wts = torch.where(torch.isinf(lse)[..., None], torch.zeros_like(lse_all), torch.exp(lse_all - lse[..., None]))
            out = sum(wts[..., i, None] * outs[i] for i in range(len(outs)))
            out = out.to(q.dtype)
            ctx.saved = saved
            ctx.shape, ctx.scale, ctx.backend = (bsz, n, h, d), scale, backend
            ctx.save_for_backward(out, lse)
            ctx.mark_non_differentiable(lse)
            return out, lse

        @staticmethod
        def backward(ctx, dout, dlse_unused):
            out, lse = ctx.saved_tensors
            bsz, n, h, d = ctx.shape
            dq = torch.zeros(bsz, n, h, d, device=out.device, dtype=torch.float32)
            dk, dv = torch.zeros_like(dq), torch.zeros_like(dq)
            dout = dout.to(out.dtype).contiguous()
            per_branch = {}
            sdpa_backward = BACKENDS[ctx.backend][1]
            for (w, r, c, gq, gk, gv, kept) in ctx.saved:
                _, nseg, m = geometry(n, w, r)
                if (w, r) not in per_branch:
                    # The merged O, L and dO in this branch's classes; padded rows: L = 0, O = dO = 0,
                    # so they add nothing (dS = P * (dP - delta) = 0 there).
                    per_branch[(w, r)] = (to_classes(out, n, w, r), to_classes(lse[..., None], n, w, r),
                                          to_classes(dout, n, w, r),
                                          [torch.zeros(bsz, nseg, m, r, h, d, device=out.device, dtype=torch.float32)
                                           for _ in range(3)])
                oc, lc, doc, acc = per_branch[(w, r)]
                hs = heads_of(c, r, h, out.device)
                go, gdo = gather(oc, c, hs), gather(doc, c, hs)
                gl = gather(lc, c, hs)[..., 0].float().contiguous()  # (B*nseg, Hc, m)
                gdq, gdk, gdv = sdpa_backward(gdo, gq, gk, gv, go, gl, kept, ctx.scale)[:3]
                for a, g in zip(acc, (gdq, gdk, gdv)):
                    scatter(a, c, hs, g, bsz, nseg)
            for (w, r), (_, _, _, acc) in per_branch.items():
                dq += from_classes(acc[0], n, w, r)
                dk += from_classes(acc[1], n, w, r)
                dv += from_classes(acc[2], n, w, r)
            return dq.to(out.dtype), dk.to(out.dtype), dv.to(out.dtype), None, None, None

    def longnet(q, k, v, branches, backend):
        return LongNet.apply(q, k, v, branches, 1.0 / math.sqrt(q.shape[-1]), backend)

    # ---- the self-check against a float64 dense reference with the spec's multiplicity
    def reference(q, k, v, branches):
        bsz, n, h, d = q.shape
        pos = torch.arange(n, device=q.device)
        mult = torch.zeros(h, n, n, device=q.device, dtype=torch.float64)
        for w, r in branches:
            w = min(w, n)
            seg, off = pos // w, pos % w
            same = (seg[:, None] == seg[None, :]) & (pos[None, :] <= pos[:, None])
            for head in range(h):
                cls = off % r == head % r
                mult[head] += (same & cls[:, None] & cls[None, :]).double()
        # Written so that no gradient meets a NaN: masked scores are -inf only where a row has
        # keys (their softmax weight is then exactly 0), and a row with none is all zeros, then
        # zeroed by the mask (O = 0, L = -inf, as the spec says).
        mask = mult > 0                                                             # (H, N, N)
        logm = torch.where(mask, torch.log(mult.clamp_min(1.0)), torch.full_like(mult, -math.inf))
        s = torch.einsum("bphd,bkhd->bhpk", q, k) / math.sqrt(d) + logm[None]
        has_keys = mask.any(-1)[None, ..., None]                                    # (1, H, N, 1)
        s = torch.where(has_keys, s, torch.zeros_like(s))
        lse = torch.logsumexp(s, -1)                                                # (B, H, N)
        p = torch.exp(s - lse[..., None]) * mask[None]
        lse = torch.where(has_keys[..., 0], lse, torch.full_like(lse, -math.inf))
        return torch.einsum("bhpk,bkhd->bphd", p, v), lse.transpose(1, 2)

    def rel(a, b):
        return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()

    def check(n, h, d, branches, seed, backend):
        g = torch.Generator(device="cuda").manual_seed(seed)
        x = [torch.randn(1, n, h, d, device="cuda", generator=g).to(torch.bfloat16) for _ in range(4)]
        q, k, v, do = x
        q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
        o_ref, l_ref = reference(q64, k64, v64, branches)
        o_ref.backward(do.double())
        qb, kb, vb = (t.clone().requires_grad_() for t in (q, k, v))
        o, lse = longnet(qb, kb, vb, branches, backend)
        o.backward(do)
        kept = torch.isfinite(l_ref)
        errs = {"O": rel(o, o_ref), "L": (lse - l_ref).abs()[kept].max().item(),
                "dQ": rel(qb.grad, q64.grad), "dK": rel(kb.grad, k64.grad), "dV": rel(vb.grad, v64.grad)}
        empty_ok = bool((o.float()[~kept[..., None].expand_as(o)] == 0).all()) and bool(torch.isinf(lse[~kept]).all())
        ok = errs["O"] < 2e-2 and errs["L"] < 2e-2 and max(errs["dQ"], errs["dK"], errs["dV"]) < 3e-2 and empty_ok
        what = ", ".join(f"{k_} {v_:.2e}" for k_, v_ in errs.items())
        print(f"{'PASS' if ok else 'FAIL'} PyTorch LongNet ({backend}) vs float64 spec, N={n} H={h} D={d} {branches}: {what}"
              f"{'' if empty_ok else ', rows kept by no branch not empty'}")
        return ok

    ok, backends = True, []
    for backend in BACKENDS:
        try:
            good = check(1000, 6, 64, ((64, 1), (128, 2), (256, 4), (100, 7)), 1, backend)  # r = 7 > H: class 6 kept by no head
            good = check(777, 4, 64, ((256, 2), (96, 3)), 2, backend) and good             # no r = 1 branch: empty rows
            good = check(2048, 12, 64, BRANCHES, 3, backend) and good                      # the benchmark's branches
        except (RuntimeError, TypeError) as e:  # the op is missing here, or refuses this GPU or shape
            if backend == "flash":
                raise
            print(f"SKIP PyTorch LongNet ({backend}): {str(e).splitlines()[0][:200]}")
            continue
        ok = ok and good
        backends.append(backend)
    if not ok:
        print("FAIL bench_longnet_torch: the self-check failed; no timings")
        return 1
    if args.check_only:
        return 0

    from check_attention_torch import median_ms  # the same timing as our other PyTorch peer (CUDA events, median)

    B, H, D = 1, 12, 64
    lines = [f"# PyTorch LongNet ({' and '.join(backends)} attention per branch and class, merged by LSE; the peer: the faster "
             f"f+b), causal, bf16, B={B} H={H} D={D}, "
             f"(w,r) = {BRANCHES}, {torch.cuda.get_device_name()}, torch {torch.__version__}\n",
             "# TF/s = 4*B*D*pairs_kept / time (x3.5 for fwd+bwd); pairs_kept per head summed over heads; * the peer (faster f+b)\n",
             f"{'N':<8} {'pattern':<13} {'fwd ms':>9} {'fwd TF/s':>9} {'f+b ms':>9} {'f+b TF/s':>10} {'pairs_kept':>14}\n"]
    print("".join(lines), end="")
    for n in (int(s) for s in args.sizes.split(",")):
        g = torch.Generator(device="cuda").manual_seed(n)
        q, k, v, do = (torch.randn(B, n, H, D, device="cuda", generator=g).to(torch.bfloat16) for _ in range(4))
        q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
        flops = 4 * B * D * pairs_kept(n, H, BRANCHES)
        times = {}
        for backend in backends:
            try:
                fwd = median_ms(lambda: longnet(q, k, v, BRANCHES, backend), args.warmup, args.reps)

                def fb():
                    o, _ = longnet(q, k, v, BRANCHES, backend)
                    o.backward(do)
                times[backend] = (fwd, median_ms(fb, args.warmup, args.reps))
            except torch.cuda.OutOfMemoryError:
                lines.append(f"# N = {n}, {backend}: out of memory\n")
                print(lines[-1], end="")
                torch.cuda.empty_cache()
        if not times:
            lines.append(f"# N = {n}: out of memory with every backend, stop\n")
            print(lines[-1], end="")
            break
        peer = min(times, key=lambda b: times[b][1])
        for backend, (fwd, fb_ms) in times.items():
            name = f"torch {backend}" + (" *" if backend == peer and len(times) > 1 else "")
            lines.append(f"{n:<8} {name:<13} {fwd:9.3f} {flops / fwd * 1e-9:9.1f} {fb_ms:9.3f} "
                         f"{3.5 * flops / fb_ms * 1e-9:10.1f} {pairs_kept(n, H, BRANCHES):14d}\n")
            print(lines[-1], end="")
        sys.stdout.flush()
        del q, k, v, do
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            f.writelines(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
