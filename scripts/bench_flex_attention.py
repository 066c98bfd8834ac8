#!/usr/bin/env python3
"""PyTorch FlexAttention on the block-sparse benchmark's pattern: the peer of
bench/bench_attention_block_sparse.cu, run in the same device call by `make bench`.

Pattern (the same as ours): causal, a local window of W = 2048 tokens, G = 128 global tokens
(every row sees keys k < G; rows q < G see every key they may), as a mask_mod and a BlockMask of
128 x 128 blocks built from block-level rules (checked equal to create_block_mask's at 16K;
FlexAttention skips empty blocks and applies the mask_mod only to partial ones, as our tile lists
do). B = 1, H = 12, D = 64, bf16, layout (B, H, N, D).
Times: median of --reps runs after --warmup (CUDA events); forward with autograd on (the
training forward, which saves what the backward needs) and forward + backward. FLOPs over the
pairs kept, counted here in closed form (the same count as our pairs_kept: the table prints it
so the two can be compared). Memory: peak allocated during forward + backward per 1K tokens.
PyTorch is never a dependency of the project: this script only runs where it is installed.
"""
import argparse
import sys


def pairs_kept(n, h, w, g):
    # Row q keeps its window min(q+1, w), plus the global keys k < g further back than the window,
    # or every key k <= q when q itself is global.
    total = 0
    for q in range(n):
        if q < g:
            total += q + 1
        else:
            total += min(q + 1, w) + max(0, min(g, q - w + 1))
    return total * h


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--sizes", default="16384,65536,262144,1048576")
    args = ap.parse_args()
    try:
        import torch
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError as e:
        print(f"SKIP bench_flex_attention: {e}")
        return 0
    if not torch.cuda.is_available():
        print("SKIP bench_flex_attention: no CUDA device")
        return 0
    B, H, D, W, G = 1, 12, 64, 2048, 128

    def mask_mod(b, h, q, kv):
        return (kv <= q) & ((q - kv < W) | (kv < G) | (q < G))

    flex = torch.compile(flex_attention, dynamic=False)
    BS = 128
    from torch.nn.attention.flex_attention import BlockMask

    def window_global_block_mask(n):
        # The BlockMask of mask_mod from block-level rules (create_block_mask evaluates all N^2
        # pairs): block (i, j), j <= i, holds a kept pair if the window reaches it or it is global;
        # it is full (no mask_mod needed) below the diagonal when every pair is kept.
        nb = (n + BS - 1) // BS
        i = torch.arange(nb, device="cuda")[:, None]
        j = torch.arange(nb, device="cuda")[None, :]
        gap = (i - j) * BS  # q - k of the blocks' first rows
        any_kept = (j <= i) & ((gap - (BS - 1) < W) | (j * BS < G) | (i * BS < G))
        full = (j < i) & ((gap + BS - 1 < W) | ((j + 1) * BS <= G) | ((i + 1) * BS <= G))
        partial = any_kept & ~full

        def lists(m):
            num = m.sum(-1, dtype=torch.int32)
            idx = torch.argsort(m.to(torch.int8), dim=-1, descending=True, stable=True).to(torch.int32)
            return num[None, None], idx[None, None]

        kv_num, kv_idx = lists(partial)
        full_num, full_idx = lists(full)
        return BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=BS, mask_mod=mask_mod, seq_lengths=(n, n))

    def median_ms(f, warmup, reps):
        for _ in range(warmup):
            f()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            f()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        times.sort()
        return times[len(times) // 2]

    lines = [
        f"# PyTorch {torch.__version__} FlexAttention (torch.compile, BlockMask 128x128, full blocks unmasked), causal window {W} + {G} global, "
        f"bf16, B={B} H={H} D={D}, {torch.cuda.get_device_name()}",
        "# TF/s = 4*B*D*pairs_kept / time (x3.5 for fwd+bwd); Mtok/s = N / time; MiB/1K = peak allocated in fwd+bwd (inputs, outputs, gradients) per 1K tokens",
        f"{'N':<8} {'pairs kept':>12} {'fwd ms':>9} {'fwd Mt/s':>9} {'fwd TF/s':>9} {'f+b ms':>9} {'f+b Mt/s':>9} "
        f"{'f+b TF/s':>9} {'MiB/1K':>8}",
    ]
    print("\n".join(lines), flush=True)
    for n in [int(x) for x in args.sizes.split(",")]:
        torch.cuda.empty_cache()
        bm = window_global_block_mask(n)
        if n <= 16384:  # the block lists against FlexAttention's own builder (which is slow at 1M)
            ref = create_block_mask(mask_mod, None, None, n, n, device="cuda", BLOCK_SIZE=BS)
            if not torch.equal(ref.to_dense(), bm.to_dense()) or not torch.equal(
                ref.full_kv_num_blocks, bm.full_kv_num_blocks
            ):
                print(f"FAIL bench_flex_attention: the block mask differs from create_block_mask at N = {n}")
                return 1
            del ref
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        do = torch.randn(B, H, n, D, device="cuda", dtype=torch.bfloat16)

        def fwd():
            return flex(q, k, v, block_mask=bm)

        def fwd_bwd():
            q.grad = k.grad = v.grad = None
            fwd().backward(do)

        fwd_bwd()
        torch.cuda.synchronize()
        mib_per_1k = (torch.cuda.max_memory_allocated() - base) / 2**20 / (n / 1024)
        t_f = median_ms(fwd, args.warmup, args.reps)
        t_fb = median_ms(fwd_bwd, args.warmup, args.reps)
        flops = 4.0 * B * D * pairs_kept(n, H, W, G)
        line = (f"{n:<8} {pairs_kept(n, H, W, G):>12.4g} {t_f:>9.3f} {n / t_f * 1e-3:>9.3f} {flops / t_f * 1e-9:>9.1f} "
                f"{t_fb:>9.3f} {n / t_fb * 1e-3:>9.3f} {3.5 * flops / t_fb * 1e-9:>9.1f} {mib_per_1k:>8.2f}")
        print(line, flush=True)
        lines.append(line)
        del q, k, v, do, bm
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
