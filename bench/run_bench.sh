#!/usr/bin/env bash
# `make bench`: the attention benchmark (ours and cuDNN side by side), dilated attention from 16K
# to 8M tokens, block-sparse attention from 16K to 1M, ring attention's per-rank compute and
# predicted ring time, the training throughput of the GPT-2 124M shape, and, where PyTorch is
# installed (as on the lent GPU machines), its peers: the PyTorch flash/cuDNN reference,
# FlexAttention on the block-sparse pattern and a PyTorch LongNet on the dilated one; on a host of
# several GPUs, the scaling of whole training steps (bench/bench_scaling.sh). One run;
# tables go to build/bench/ and the screen.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build}
OUTDIR=${OUTDIR:-build/bench}
mkdir -p "$OUTDIR"
# shellcheck source=scripts/gpu_lib_paths.sh
source scripts/gpu_lib_paths.sh "$(cd "$BIN" && pwd)"
"$BIN/bench_attention" --out "$OUTDIR/attention.md" ${BENCH_ATTENTION_ARGS:-}
"$BIN/bench_attention_dilated" --out "$OUTDIR/attention_dilated.md" ${BENCH_DILATED_ARGS:-}
"$BIN/bench_attention_block_sparse" --out "$OUTDIR/attention_block_sparse.md" ${BENCH_BLOCK_SPARSE_ARGS:-}
"$BIN/bench_train" --out "$OUTDIR/train_124m.md" --batches 8,16,32,64 ${BENCH_TRAIN_ARGS:-}
# Ring attention: per-rank compute measured here, the ring time predicted for a link (--bw)
"$BIN/bench_ring" --out "$OUTDIR/ring.md" ${BENCH_RING_ARGS:-}
if python3 -c "import torch" 2>/dev/null && [ -f scripts/check_attention_torch.py ]; then
    python3 scripts/check_attention_torch.py --out "$OUTDIR/attention_torch.md" ${BENCH_TORCH_ARGS:-}
    python3 scripts/bench_flex_attention.py --out "$OUTDIR/attention_block_sparse_flex.md"
    # A PyTorch LongNet on the dilated benchmark's problem (it checks itself against the spec first)
    python3 scripts/bench_longnet_torch.py --out "$OUTDIR/attention_dilated_torch.md"
fi
# Several GPUs on this host: whole training steps at P = 1, 2, 4 and the efficiency (issue 42);
# the long-document corpus (make data CORPUS=long) holds the 1M-token windows of 4 GPUs.
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
    DATA=${SCALING_DATA:-corpus-long} BIN=$BIN OUTDIR=$OUTDIR bench/bench_scaling.sh
fi
echo; for f in "$OUTDIR"/*.md; do echo "== $f"; cat "$f"; echo; done
