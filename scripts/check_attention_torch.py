#!/usr/bin/env python3
"""Independent reference timings for bench/bench_attention.cu: PyTorch's scaled_dot_product_attention
with its flash backend (FlashAttention-2) and its cuDNN backend, on the same problems (causal, bf16,
B*N = 64K tokens, H = 2048/D, Q/K/V as strided views of one (B, N, 3, H, D) buffer), printed in the
same table format. Run on the GPU machine (PyTorch is never a dependency of the project):

    python3 scripts/check_attention_torch.py [--out FILE] [--reps 5] [--max-n 65536]

FLOPs: forward 4*B*H*N^2*D/2, forward+backward 3.5x that. Time: median of --reps runs (CUDA events)
after warm-up.
"""
import argparse
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def median_ms(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--max-n", type=int, default=65536)
    args = ap.parse_args()
    tokens = 65536
    name = torch.cuda.get_device_name()
    lines = [f"# torch {torch.__version__} SDPA, causal, bf16, B*N = {tokens} tokens, H = 2048/D, {name}",
             f"{'backend':8s} {'N':>6s} {'D':>4s} {'B':>4s} {'H':>4s} {'fwd ms':>10s} {'fwd TF/s':>10s} "
             f"{'f+b ms':>10s} {'f+b TF/s':>10s}"]
    print("\n".join(lines), flush=True)
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]
    for D in (64, 128):
        H = 2048 // D
        N = 1024
        while N <= args.max_n:
            B = max(1, tokens // N)
            qkv = torch.randn(B, N, 3, H, D, device="cuda", dtype=torch.bfloat16)
            # (B, H, N, D) views of the packed buffer, as SDPA wants them.
            q, k, v = (qkv[:, :, i].transpose(1, 2).detach().requires_grad_(True) for i in range(3))
            dout = torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16)
            fwd_flops = 4.0 * B * H * N * N * D / 2
            for bname, backend in backends:
                try:
                    with sdpa_kernel(backend):
                        def fwd():
                            with torch.no_grad():
                                F.scaled_dot_product_attention(q, k, v, is_causal=True)

                        def fwd_bwd():
                            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                            torch.autograd.backward(o, dout)
                        tf = median_ms(fwd, args.warmup, args.reps)
                        tfb = median_ms(fwd_bwd, args.warmup, args.reps)
                    line = (f"{bname:8s} {N:6d} {D:4d} {B:4d} {H:4d} {tf:10.3f} {fwd_flops / tf * 1e-9:10.1f} "
                            f"{tfb:10.3f} {3.5 * fwd_flops / tfb * 1e-9:10.1f}")
                except Exception as e:  # a backend may refuse a shape: say so, keep going
                    line = f"{bname:8s} {N:6d} {D:4d} {B:4d} {H:4d} unavailable: {str(e).splitlines()[0][:80]}"
                lines.append(line)
                print(line, flush=True)
                q.grad = k.grad = v.grad = None
            del qkv, q, k, v, dout
            torch.cuda.empty_cache()
            N *= 2
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
