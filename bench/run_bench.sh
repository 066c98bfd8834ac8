#!/usr/bin/env bash
# `make bench`: the attention benchmark (ours and cuDNN side by side), dilated attention from 16K
# to 8M tokens, block-sparse attention from 16K to 1M, ring attention's per-rank compute and
# predicted ring time, the training throughput of the GPT-2 124M shape and where its step and a
# decode step go, and, where PyTorch is
# installed (as on the lent GPU machines), its peers: the PyTorch flash/cuDNN reference,
# FlexAttention on the block-sparse pattern and a PyTorch LongNet on the dilated one; on a host of
# several GPUs, the scaling of whole training steps (bench/bench_scaling.sh). One run;
# tables go to build/bench/ and the screen.
# BENCH_PARTS=ours or peers runs only our benchmarks or only PyTorch's (the default, all, runs
# both): a machine that allows shorter jobs runs the two parts one after the other into the same
# OUTDIR, and the second part's peer table has every row.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build}
OUTDIR=${OUTDIR:-build/bench}
mkdir -p "$OUTDIR"
# shellcheck source=scripts/gpu_lib_paths.sh
source scripts/gpu_lib_paths.sh "$(cd "$BIN" && pwd)"
PARTS=${BENCH_PARTS:-all}
case $PARTS in all|ours|peers) ;; *) echo "error: BENCH_PARTS=$PARTS is unknown: use all, ours or peers" >&2; exit 2 ;; esac
if [ "$PARTS" != peers ]; then
    "$BIN/bench_attention" --out "$OUTDIR/attention.md" ${BENCH_ATTENTION_ARGS:-}
    "$BIN/bench_attention_dilated" --out "$OUTDIR/attention_dilated.md" ${BENCH_DILATED_ARGS:-}
    "$BIN/bench_attention_block_sparse" --out "$OUTDIR/attention_block_sparse.md" ${BENCH_BLOCK_SPARSE_ARGS:-}
    "$BIN/bench_train" --out "$OUTDIR/train_124m.md" --batches 8,16,32,64 ${BENCH_TRAIN_ARGS:-}
    # Where a training step and a decode step go: the GPT-2 shape's step by kind of op beside
    # its floor, each piece of a 1M-context decode step, and where the long-document corpus exists the
    # 91M dilated model's step at T = 256K (train --op-split) with no floor counted (its attention's
    # FLOPs depend on the branches).
    "$BIN/bench_train" --split on --batches 32 --attention flash,cudnn --out "$OUTDIR/train_split.md" > /dev/null
    "$BIN/bench_kv_cache" --breakdown > "$OUTDIR/decode_split.md"
    # The 1M-context targets: prefill, then decode averaged over a whole segment cycle, one sequence.
    "$BIN/bench_kv_cache" --contexts 1048576 --batches 1 --decode 32768 --graph-only --out "$OUTDIR/decode_1m.md" > /dev/null
    # The 91M model's dilated pattern at 256K, whole and branch by branch (its attention is half of
    # that model's step), without and with documents (training masks them: --doc-mask).
    "$BIN/bench_attention_dilated" --segments 2048,4096,8192,16384,32768 --dilations 1,2,4,6,12 --sizes 262144 --branches \
        --doc-tokens 65536 \
        --out "$OUTDIR/attention_dilated_91m.md" > /dev/null
    if [ -f "${SCALING_DATA:-corpus-long}/train.bin" ]; then
        "$BIN/train" --device cuda --data "${SCALING_DATA:-corpus-long}" --layers 12 --width 768 --heads 12 --attn dilated \
            --segments 2048,4096,8192,16384,32768 --dilations 1,2,4,6,12 --seq-len 262144 --batch 1 --steps 6 --warmup 2 \
            --val-every 0 --val-batches 1 --ckpt-every 0 --log-every 1 --sample-tokens 0 --op-split 5 --out "$OUTDIR/split_256k" \
            > "$OUTDIR/split_256k.log" 2>&1
        { echo "91M dilated model, T = 262144, its steps, then one step by kind of op (train --op-split 5):"; echo; echo '```'
          grep -E '^step +[0-9]+/[0-9]+ \| loss' "$OUTDIR/split_256k.log"; grep -A14 '^op split' "$OUTDIR/split_256k.log"; echo '```'; } \
            > "$OUTDIR/train_split_256k.md"
        rm -f "$OUTDIR"/split_256k/ckpt_*.safetensors  # weights and AdamW moments, over a gigabyte: the speed is what is kept
    fi
    # Ring attention: per-rank compute measured here, the ring time predicted for a link (--bw)
    "$BIN/bench_ring" --out "$OUTDIR/ring.md" ${BENCH_RING_ARGS:-}
fi
if [ "$PARTS" != ours ] && python3 -c "import torch" 2>/dev/null && [ -f scripts/check_attention_torch.py ]; then
    python3 scripts/check_attention_torch.py --out "$OUTDIR/attention_torch.md" ${BENCH_TORCH_ARGS:-}
    python3 scripts/bench_flex_attention.py --out "$OUTDIR/attention_block_sparse_flex.md"
    # A PyTorch LongNet on the dilated benchmark's problem (it checks itself against the spec first)
    python3 scripts/bench_longnet_torch.py --out "$OUTDIR/attention_dilated_torch.md"
fi
# Several GPUs on this host: whole training steps at P = 1, 2, 4 and the efficiency;
# the long-document corpus (make data CORPUS=long) holds the 1M-token windows of 4 GPUs.
if [ "$PARTS" != peers ] && [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
    DATA=${SCALING_DATA:-corpus-long} BIN=$BIN OUTDIR=$OUTDIR bench/bench_scaling.sh
fi
echo; for f in "$OUTDIR"/*.md; do echo "== $f"; cat "$f"; echo; done
# Last, each target's row, ours beside its peer from the tables above.
python3 bench/peer_table.py "$OUTDIR" --out "$OUTDIR/peer_table.md"
