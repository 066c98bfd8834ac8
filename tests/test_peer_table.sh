#!/usr/bin/env bash
# bench/peer_table.py on tables in the formats the benchmarks write (bench_attention,
# bench_attention_block_sparse, scripts/bench_flex_attention.py, bench_attention_dilated,
# scripts/bench_longnet_torch.py, train --op-split, bench_train, bench_kv_cache), numbers chosen so
# that each ratio and each target's verdict is known here: every row must show its own figures
# beside its peer's, and a table that is missing must say "not run", not a number.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/lib.sh
source tests/lib.sh
work=$PWD/build/test_peer_table
rm -rf "$work" && mkdir -p "$work/all" "$work/some"
cat > "$work/all/attention.md" <<'EOF'
# flash attention (ours), causal, bf16, B*N = 65536 tokens, H = 2048/D, NVIDIA H200, L2 groups of dense rows: 16 MiB
N         D    B    H     fwd ms   fwd TF/s     f+b ms   f+b TF/s   bwd TF/s    cudnn fwd    cudnn f+b
1024     64   64   32      1.549      177.5      5.919      240.0      157.3        352.0        300.0
2048     64   32   32      2.503      219.6      9.393      300.0      199.5        412.1        300.0
4096     64   16   32      4.511      243.7     16.523      380.0      228.8        445.2        400.0
8192     64    8   32      8.724      252.1     31.103      420.0      245.7        467.7        420.0
16384    64    4   32     16.864      500.0     60.766      430.0      250.4        400.0        430.0
32768    64    2   32     31.700      277.5    116.567      440.0      259.1        455.3        440.0
65536    64    1   32     62.981      279.3    230.161      450.0      263.1        457.2        450.0
1024    128   64   16      1.421      193.5      4.862      300.0      199.7        484.9        400.0
2048    128   32   16      2.212      248.5      7.577      380.0      256.2        564.8        400.0
4096    128   16   16      3.793      289.9     13.628      400.0      279.5        618.0        400.0
8192    128    8   16      7.459      294.8     25.897      500.0      298.2        652.3        500.0
16384   128    4   16     13.237      600.0     46.963      500.0      326.0        666.0        500.0
32768   128    2   16     25.409      346.2     90.725      500.0      336.7        591.9        500.0
65536   128    1   16     49.899      352.6    179.359      450.0      339.7        597.2        500.0
EOF
cat > "$work/all/attention_block_sparse.md" <<'EOF'
# block-sparse attention, causal window 2048 + 128 global tokens, bf16, B=1 H=16 D=128, NVIDIA H200
N        pattern          pairs kept   tiles    cut    fwd ms  fwd Mt/s  fwd TF/s    f+b ms  f+b Mt/s  f+b TF/s   MiB/1K
1048576  b64 w2048 g128     3.586e+10  0.21%   3.1%    25.000    41.943     367.3    80.000    13.107     401.6    12.50
1048576  b128 w2048 g128    3.586e+10  0.23%   3.0%    24.000    43.690     382.6    84.000    12.483     382.5    12.50
EOF
cat > "$work/all/attention_block_sparse_flex.md" <<'EOF'
# PyTorch 2.11.0 FlexAttention (torch.compile, BlockMask 128x128, full blocks unmasked), causal window 2048 + 128 global, bf16, B=1 H=16 D=128, NVIDIA H200
N          pairs kept    fwd ms  fwd Mt/s  fwd TF/s    f+b ms  f+b Mt/s  f+b TF/s   MiB/1K
1048576     3.586e+10    30.000    34.953     306.1   100.000    10.486     321.3    14.00
EOF
cat > "$work/all/attention_dilated.md" <<'EOF'
# dilated attention, causal, bf16, B=1 H=12 D=64, (w,r) = (2048,1),(4096,2),(8192,4), NVIDIA H200
N        pattern          fwd ms  fwd TF/s    f+b ms   f+b TF/s Mtok/s f+b  us/1Ktok  bwd TF/s    MiB/1K
1048576  dilated          22.102     261.3    74.621      270.9      14.05     72.87     274.9     12.33
1048576  dilated det      22.807     253.2   107.760      187.6       9.73    105.23     170.0     12.33
EOF
cat > "$work/all/attention_dilated_torch.md" <<'EOF'
# PyTorch LongNet (flash and cudnn attention per branch and class, merged by LSE; the peer: the faster f+b), causal, bf16
N        pattern          fwd ms  fwd TF/s    f+b ms   f+b TF/s     pairs_kept
1048576  torch flash      96.794      59.7   279.411       72.3    22559588352
1048576  torch cudnn *    90.063      64.1   245.179       82.4    22559588352
EOF
cat > "$work/all/train_split_256k.md" <<'EOF'
91M dilated model, T = 262144, its steps, then one step by kind of op (train --op-split 5):

```
step     1/6 | loss 9.100000 | lr 1.00e-04 | norm  1.000 |  100000 tok/s | ETA 0m05s
step     2/6 | loss 9.000000 | lr 2.00e-04 | norm  1.000 |  300000 tok/s | ETA 0m04s
step     3/6 | loss 8.900000 | lr 3.00e-04 | norm  1.000 |  480000 tok/s | ETA 0m03s
step     4/6 | loss 8.800000 | lr 3.00e-04 | norm  1.000 |  500000 tok/s | ETA 0m02s
step     5/6 | loss 8.700000 | lr 3.00e-04 | norm  1.000 |  200000 tok/s | ETA 0m01s
step     6/6 | loss 8.600000 | lr 3.00e-04 | norm  1.000 |  520000 tok/s | ETA 0m00s
op split of step 5 (560.0 ms on the GPU, 1310.720 ms on the host's clock):
  attention       300.000 ms   53.6%
step     5/6 | loss 8.700000 | lr 3.00e-04 | norm  1.000 |  200000 tok/s | ETA 0m01s
step     6/6 | loss 8.600000 | lr 3.00e-04 | norm  1.000 |  520000 tok/s | ETA 0m00s
```
EOF
cat > "$work/all/train_124m.md" <<'EOF'
training step, NVIDIA H200: 12 layers, width 768, 12 heads, vocab 50257, T = 1024, bf16

| attention | batch | tokens/step | ms/step | tokens/s | peak GPU memory (GiB) |
| --- | --- | --- | --- | --- | --- |
| flash | 32 | 32768 | 62.0 | 660000 | 12.9 |
| flash | 64 | 65536 | 122.7 | 500000 | 22.9 |
| cudnn | 32 | 32768 | 62.0 | 600000 | 12.9 |
| cudnn | 64 | 65536 | 122.7 | 500000 | 22.9 |
EOF
cat > "$work/all/decode_1m.md" <<'EOF'
KV cache inference, NVIDIA H200: 12 layers, width 768, 12 heads, vocab 8192, dilated w 2048..32768 r 1..12, chunk 8192; decoding 32768 tokens from position context + 2

| context | batch | prefill s | prefill tokens/s | decode tokens/s (graph) | decode tokens/s (launch per kernel) | KV cache GiB | unpacked rows GiB |
| --- | --- | --- | --- | --- | --- | --- | --- |
| 1048576 | 1 | 0.800 | 1310720 | 2500.0 | - | 0.398 | 0.012 |
EOF
cp "$work/all/attention.md" "$work/some/"
t=$(python3 bench/peer_table.py "$work/all" --out "$work/all/peer.md" 2>&1)
row() { grep -F "| $1 |" <<< "$t"; }
# expect_row TITLE PATTERN WHAT: the row titled TITLE matches the glob PATTERN (its cells after the title).
expect_row() {
    local r; r=$(row "$1")
    # shellcheck disable=SC2053  # $2 is a glob on purpose
    [[ $r == "| $1 | "$2 ]] && pass "$3" || fail "$3: '$r'"
}
expect_row "dense causal f+b, D = 64, 1K-4K (TF/s)" "240 / 300 / 380 | 300 / 300 / 400 | 0.80 / 1.00 / 0.95 (worst) | >= 0.95x cuDNN | no |" \
    "dense f+b at 1K-4K: ours and cuDNN's TF/s, each ratio, judged by the worst"
expect_row "dense causal f+b, D = 64, 8K-64K (TF/s)" "*| 1.00 / 1.00 / 1.00 / 1.00 (worst) | >= 1.00x cuDNN | yes |" \
    "dense f+b at 8K-64K equal to cuDNN: met"
expect_row "dense causal f+b, D = 128, 8K-64K (TF/s)" "*| 1.00 / 1.00 / 1.00 / 0.90 (worst) |*| no |" "one N below cuDNN misses the target"
expect_row "dense forward 16K, D = 64 (TF/s)" "500.0 | 400.0 | 1.25x | >= 1.0x cuDNN | yes |" "the forward at 16K against cuDNN's"
expect_row "block-sparse 1M, window 2048 + 128 global, forward (ms)" "25.00 | 30.00 | 1.20x | >= 1.2x FlexAttention | yes |" \
    "block-sparse forward at 1M: our faster block size (by f+b) against FlexAttention's time"
expect_row "block-sparse 1M, window 2048 + 128 global, f+b (ms)" "80.00 | 100.00 | 1.25x | >= 1.5x FlexAttention | no |" \
    "block-sparse f+b at 1M, the same block size"
expect_row "LongNet 1M, f+b (ms) against the PyTorch LongNet" "74.62 | 245.18 | 3.29x | >= 4x | no |" \
    "LongNet: ours against the starred (faster) PyTorch backend, not the other"
expect_row "LongNet 1M, f+b (TF/s)" "270.9 | - | 0.82 of 330 | >= 330 TF/s | no |" "LongNet TF/s against its target"
expect_row "91M dilated model, T = 256K, one GPU (tokens/s)" "500,000 | - | 1.02 of 490K |*| yes |" \
    "the 91M model's tokens/s: the median of its steps after the warm-up, the op-split step left out, a repeated step once"
expect_row "GPT-2 124M shape, T = 1024, batch 32 (tokens/s)" "660,000 | 600,000 | 1.10x | >= 1.1x cuDNN's | yes |" \
    "GPT-2 shape: our attention's tokens/s against the cuDNN backend's"
expect_row "1M context, batch 1: decode averaged over 32K positions (tokens/s)" "2,500 | - | 0.50 of 5,000 |*| no |" \
    "decode at 1M against its target"
expect_row "1M context, batch 1: prefill (s)" "0.800 | - | 0.75 of the target's speed |*| no |" "prefill at 1M against its target"
[ "$(cat "$work/all/peer.md")" = "$t" ] && pass "--out writes the table printed" || fail "--out: $(head -3 "$work/all/peer.md")"
t=$(python3 bench/peer_table.py "$work/some" 2>&1)
[ "$(grep -c 'not run' <<< "$t")" -eq 9 ] && grep -qF "| 240 / 300 / 380 |" <<< "$t" &&
    pass "missing tables: nine rows say not run, the dense ones keep their figures" || fail "missing tables: $t"
expect_row "LongNet 1M, f+b (ms) against the PyTorch LongNet" "- | - | not run | >= 4x | - |" "a missing table's row: no figures, no verdict"
# A table that printed a time of 0 (a run that did not happen): no ratio, no division by zero.
mkdir -p "$work/zero" && sed 's/    74.621 /     0.000 /' "$work/all/attention_dilated.md" > "$work/zero/attention_dilated.md"
cp "$work/all/attention_dilated_torch.md" "$work/zero/"
t=$(python3 bench/peer_table.py "$work/zero" 2>&1)
expect_row "LongNet 1M, f+b (ms) against the PyTorch LongNet" "0.00 | 245.18 | not run | >= 4x | - |" "a time of 0: the row has no ratio, no exception"
expect_error "peer_table: not a directory" "is not a directory" python3 bench/peer_table.py "$work/none"
summary
