#!/usr/bin/env bash
# Multi-GPU scaling of whole training steps: the job's tokens/s at P = 1, 2, 4 ... GPUs
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
#   dp_sharded  dp with each rank applying AdamW to 1/P of the weights and sending them on
#            (--shard-update on, model/update_shard.h; by default every rank updates every weight)
# Each run trains STEPS (8) steps on $DATA (a prepared corpus whose train.bin holds at least
# 256K x P tokens; .carry/s14/corpus-long is one) and takes the median tokens/s of its metrics.csv
# rows after the first SKIP (3). FLOPs per token, forward + backward: 546M for the matrix products
# (6 x 91M: 12 blocks of width 768 and the 8192-word classifier) + 12 layers x 3.5 x the attention
# forward, 4 x 768 x the keys a query sees: T/2 causal dense; for the dilated branches (w, r)
# sum w / (2 r^2), since 1 query in r takes part in a branch (2020 keys here). Weak-scaling
# efficiency of the dilated run is the same on tokens and on FLOPs.
# Usage: DATA=dir BIN=dir [LAUNCHER=scripts/sim_hosts.sh] bench/bench_scaling.sh [dilated dense strong dp dp_serial dp_sharded]; tables to $OUTDIR/scaling.md
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BIN=${BIN:-build}
OUTDIR=${OUTDIR:-build/bench}
DATA=${DATA:?DATA=a prepared corpus with at least 1M training tokens (e.g. .carry/s14/corpus-long)}
STEPS=${STEPS:-8} SKIP=${SKIP:-3}
# How P > 1 ranks start: scripts/launch.sh (one host, NVLink) or scripts/sim_hosts.sh (P simulated
# hosts, NCCL over sockets). The table names it.
LAUNCHER=${LAUNCHER:-scripts/launch.sh}
mkdir -p "$OUTDIR/scaling"
# shellcheck source=scripts/gpu_lib_paths.sh
source scripts/gpu_lib_paths.sh "$(cd "$BIN" && pwd)"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$gpus" -ge 1 ] || { echo "bench_scaling: no GPU: nothing to run" >&2; exit 1; }
if [ -n "${SCALING_P:-}" ]; then read -r -a Ps <<< "$SCALING_P"; else Ps=(); for p in 1 2 4 8; do [ $p -le "$gpus" ] && Ps+=($p); done; fi
read -r -a kinds <<< "${*:-dilated dense strong dp dp_serial dp_sharded}"
model=(--layers 12 --width 768 --heads 12)
longnet=(--attn dilated --segments 2048,4096,8192,16384,32768 --dilations 1,2,4,6,12)
common=(--device cuda --data "$DATA" --steps "$STEPS" --warmup 2 --val-every 0 --val-batches 1 --ckpt-every 0
        --log-every 1 --sample-tokens 0 --time-comm)

run_one() {  # kind P: prints "tokens/s T wait_ms step_ms kv_mb" (median after SKIP steps) or "failed ..."
    local kind=$1 P=$2 T args dir
    case $kind in
        dilated) T=$((262144 * P)); args=("${longnet[@]}" --seq-len $T --batch 1 --cp "$P") ;;
        dense) T=$((65536 * P)); args=(--attn dense --seq-len $T --batch 1 --cp "$P") ;;
        strong) T=131072; args=(--attn dense --seq-len $T --batch 1 --cp "$P") ;;
        dp) T=1024; args=(--attn dense --seq-len $T --batch $((16 * P))) ;;
        dp_serial) T=1024; args=(--attn dense --seq-len $T --batch $((16 * P)) --grad-overlap off) ;;
        dp_sharded) T=1024; args=(--attn dense --seq-len $T --batch $((16 * P)) --shard-update on) ;;
        *) echo "unknown kind $kind"; return ;;
    esac
    dir=$OUTDIR/scaling/${kind}_p$P
    rm -rf "$dir"
    if [ "$P" -eq 1 ]; then
        "$BIN/train" "${common[@]}" "${model[@]}" "${args[@]}" --out "$dir" > "$dir.log" 2>&1
    else
        "$LAUNCHER" "$P" "$BIN/train" "${common[@]}" "${model[@]}" "${args[@]}" --out "$dir" > "$dir.log" 2>&1
    fi
    local code=$?
    [ $code -eq 0 ] || { echo "failed (exit $code: $(grep -m1 'error' "$dir.log" | cut -c1-160))"; return; }
    # rank 0's step lines: "| step X ms, comm wait Y ms" (train --time-comm), medians after SKIP;
    # its ring line: "per forward, Z MB of K/V sent per rank"
    local split kv
    split=$(grep -E 'step +[0-9]+/[0-9]+ \|.*comm wait' "$dir.log" | sed -E 's/.*step +([0-9]+)\/.*\| step ([0-9.]+) ms, comm wait ([0-9.]+) ms.*/\1 \2 \3/' |
        awk -v skip="$SKIP" '$1 > skip { s[n] = $2; w[n++] = $3 }
            function med(a, n,   i, j, t) { for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                          return n % 2 ? a[int(n / 2)] : (a[n / 2 - 1] + a[n / 2]) / 2 }
            END { if (n) printf "%.1f %.1f", med(w, n), med(s, n); else printf "- -" }')
    kv=$(grep -oE 'per forward, [0-9.]+ MB of K/V' "$dir.log" | head -1 | grep -oE '[0-9.]+' | head -1)
    awk -F, -v skip="$SKIP" -v T="$T" -v sp="$split" -v kv="${kv:-0}" '$2 == "train" && $1 > skip { v[n++] = $6 }
        END { if (!n) { print "failed (no rows)"; exit }
              for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
              printf "%.0f %d %s %.0f\n", (n % 2 ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2), T, sp, kv }' "$dir/metrics.csv"
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
    echo "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $gpus; $STEPS steps a run, median tokens/s after step $SKIP; P > 1 started by $LAUNCHER"
    echo
    echo "Step and wait: rank 0's median step time and the part its compute stream (and host, for the"
    echo "loss sum) waited for communication (train --time-comm); K/V: MB each rank sends per forward."
    echo
    echo "| run | P | window | tokens/s (job) | model TFLOP/s (job) | efficiency vs P = 1 | step ms | wait ms | K/V MB |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
} > "$OUTDIR/scaling.md"
for kind in "${kinds[@]}"; do
    base=""
    for P in "${Ps[@]}"; do
        read -r tps T wait step kv rest <<< "$(run_one "$kind" "$P")"
        if [ "$tps" = failed ]; then
            echo "| $kind | $P | - | failed | - | $T $wait $step $kv $rest | | | |" >> "$OUTDIR/scaling.md"; continue
        fi
        flops=$(awk -v t="$tps" -v f="$(flops_per_token "$kind" "$T")" 'BEGIN { printf "%.6e", t * f }')
        tf=$(awk -v x="$flops" 'BEGIN { printf "%.1f", x / 1e12 }')
        [ "$P" -eq 1 ] && base=$flops
        eff=$(awk -v a="$flops" -v b="$base" -v P="$P" 'BEGIN { if (b > 0) printf "%.1f%%", 100 * a / (P * b); else print "-" }')
        echo "| $kind | $P | $T | $tps | $tf | $eff | $step | $wait | $kv |" >> "$OUTDIR/scaling.md"
    done
done
cat "$OUTDIR/scaling.md"
