#!/usr/bin/env bash
# Multi-GPU scaling of whole training steps (issue 42): the job's tokens/s at P = 1, 2, 4 ... GPUs
# of this host (P up to the GPUs present, or SCALING_P="1 2 4"), each run through
# scripts/launch.sh, and the efficiency against P = 1 on the same machine in the same call:
#   dilated  the 91M model (12 x 768, LongNet 2048..32768), one window of 256K tokens per GPU
#            split over the GPUs (--cp P): weak scaling; a dilated token costs the same at any T
#   dense    the same model with dense causal attention, one window of 64K tokens per GPU (--cp P):
#            weak scaling, but a causal token at T costs more than at T/P, so efficiency is taken on
#            the model's FLOPs (below), not on tokens
#   strong   dense, one window of 128K tokens over P GPUs (--cp P): strong scaling
#   dp       T = 1024, 16 windows per GPU, data parallel (P groups of --cp 1), each block's
#            gradients summed during the backward (--grad-overlap on, the default)
#   dp_serial  the same with the gradients summed after the backward (--grad-overlap off)
# Each run trains STEPS (8) steps on $DATA (a prepared corpus whose train.bin holds at least
# 256K x P tokens; .carry/s14/corpus-long is one) and takes the median tokens/s of its metrics.csv
# rows after the first SKIP (3). FLOPs per token, forward + backward: 546M for the matrix products
# (6 x 91M: 12 blocks of width 768 and the 8192-word classifier) + 12 layers x 3.5 x the attention
# forward, 4 x 768 x the keys a query sees: T/2 causal dense; for the dilated branches (w, r)
# sum w / (2 r^2), since 1 query in r takes part in a branch (2020 keys here). Weak-scaling
# efficiency of the dilated run is the same on tokens and on FLOPs.
# Usage: DATA=dir BIN=dir bench/bench_scaling.sh [dilated dense strong dp dp_serial]; tables to $OUTDIR/scaling.md
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BIN=${BIN:-build}
OUTDIR=${OUTDIR:-build/bench}
DATA=${DATA:?DATA=a prepared corpus with at least 1M training tokens (e.g. .carry/s14/corpus-long)}
STEPS=${STEPS:-8} SKIP=${SKIP:-3}
mkdir -p "$OUTDIR/scaling"
# shellcheck source=scripts/gpu_lib_paths.sh
source scripts/gpu_lib_paths.sh "$(cd "$BIN" && pwd)"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$gpus" -ge 1 ] || { echo "bench_scaling: no GPU: nothing to run" >&2; exit 1; }
if [ -n "${SCALING_P:-}" ]; then read -r -a Ps <<< "$SCALING_P"; else Ps=(); for p in 1 2 4 8; do [ $p -le "$gpus" ] && Ps+=($p); done; fi
read -r -a kinds <<< "${*:-dilated dense strong dp dp_serial}"
model=(--layers 12 --width 768 --heads 12)
longnet=(--attn dilated --segments 2048,4096,8192,16384,32768 --dilations 1,2,4,6,12)
common=(--device cuda --data "$DATA" --steps "$STEPS" --warmup 2 --val-every 0 --val-batches 1 --ckpt-every 0
        --log-every 1 --sample-tokens 0)

run_one() {  # kind P: prints "tokens/s T" (median after SKIP steps) or "failed"
    local kind=$1 P=$2 T args dir
    case $kind in
        dilated) T=$((262144 * P)); args=("${longnet[@]}" --seq-len $T --batch 1 --cp "$P") ;;
        dense) T=$((65536 * P)); args=(--attn dense --seq-len $T --batch 1 --cp "$P") ;;
        strong) T=131072; args=(--attn dense --seq-len $T --batch 1 --cp "$P") ;;
        dp) T=1024; args=(--attn dense --seq-len $T --batch $((16 * P))) ;;
        dp_serial) T=1024; args=(--attn dense --seq-len $T --batch $((16 * P)) --grad-overlap off) ;;
        *) echo "unknown kind $kind"; return ;;
    esac
    dir=$OUTDIR/scaling/${kind}_p$P
    rm -rf "$dir"
    if [ "$P" -eq 1 ]; then
        "$BIN/train" "${common[@]}" "${model[@]}" "${args[@]}" --out "$dir" > "$dir.log" 2>&1
    else
        scripts/launch.sh "$P" "$BIN/train" "${common[@]}" "${model[@]}" "${args[@]}" --out "$dir" > "$dir.log" 2>&1
    fi
    local code=$?
    [ $code -eq 0 ] || { echo "failed (exit $code: $(grep -m1 'error' "$dir.log" | cut -c1-160))"; return; }
    awk -F, -v skip="$SKIP" -v T="$T" '$2 == "train" && $1 > skip { v[n++] = $6 }
        END { if (!n) { print "failed (no rows)"; exit }
              for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
              printf "%.0f %d\n", (n % 2 ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2), T }' "$dir/metrics.csv"
}

flops_per_token() {  # kind T: the model's FLOPs per token, forward + backward
    awk -v k="$1" -v T="$2" 'BEGIN {
        keys = T / 2
        if (k == "dilated") keys = 2048 / 2 + 4096 / 8 + 8192 / 32 + 16384 / 72 + 32768 / 288
        printf "%.0f", 546e6 + 12 * 3.5 * 4 * 768 * keys }'
}

{
    echo "# Scaling over GPUs: whole training steps (bench/bench_scaling.sh)"
    echo
    echo "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $gpus; $STEPS steps a run, median tokens/s after step $SKIP"
    echo
    echo "| run | P | window | tokens/s (job) | model TFLOP/s (job) | efficiency vs P = 1 |"
    echo "| --- | --- | --- | --- | --- | --- |"
} > "$OUTDIR/scaling.md"
for kind in "${kinds[@]}"; do
    base=""
    for P in "${Ps[@]}"; do
        read -r tps T rest <<< "$(run_one "$kind" "$P")"
        if [ "$tps" = failed ]; then
            echo "| $kind | $P | - | failed | - | $T $rest |" >> "$OUTDIR/scaling.md"; continue
        fi
        flops=$(awk -v t="$tps" -v f="$(flops_per_token "$kind" "$T")" 'BEGIN { printf "%.6e", t * f }')
        tf=$(awk -v x="$flops" 'BEGIN { printf "%.1f", x / 1e12 }')
        [ "$P" -eq 1 ] && base=$flops
        eff=$(awk -v a="$flops" -v b="$base" -v P="$P" 'BEGIN { if (b > 0) printf "%.1f%%", 100 * a / (P * b); else print "-" }')
        echo "| $kind | $P | $T | $tps | $tf | $eff |" >> "$OUTDIR/scaling.md"
    done
done
cat "$OUTDIR/scaling.md"
