#!/usr/bin/env bash
# bench/bench_scaling.sh on the CPU with stand-ins: a fake nvidia-smi (4 GPUs) and a fake train
# that writes the metrics.csv rows a real run would, at a tokens/s the test chooses per run. The
# table must give the median after the skipped steps, the model FLOPs, and the efficiency
# against P = 1 (on FLOPs, so a causal dense window that grows with P is not flattered), run
# every rank through scripts/launch.sh, and show a failed run as failed.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/lib.sh
source tests/lib.sh
work=$PWD/build/test_bench_scaling
rm -rf "$work" && mkdir -p "$work/bin" "$work/path" "$work/data"
cat > "$work/path/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
if [ "${1:-}" = -L ]; then for i in 0 1 2 3; do echo "GPU $i: Stand-in GPU (UUID: GPU-$i)"; done; else echo "Stand-in GPU"; fi
EOF
# The fake train: rank 0 (or a lone process) writes 6 rows; tokens/s = 1000 x P x the run's
# factor, except step 1 (slow, must be skipped) and one outlier the median must ignore.
cat > "$work/bin/train" <<'EOF'
#!/usr/bin/env bash
cp=1 batch=1 T=0 out="" attn=""
while [ $# -gt 0 ]; do case $1 in --cp) cp=$2; shift;; --batch) batch=$2; shift;; --seq-len) T=$2; shift;;
    --out) out=$2; shift;; --attn) attn=$2; shift;; --grad-overlap) [ "$2" = off ] && FACTOR=0.45; shift;;
    --shard-update) [ "$2" = on ] && FACTOR=0.3; shift;; esac; shift; done
P=${WORLD_SIZE:-1}
[ "$attn" = dense ] && [ "$T" = 131072 ] && [ "$P" = 2 ] && { echo "error: stand-in out of memory" >&2; exit 1; }
[ "${RANK:-0}" = 0 ] || exit 0
factor=${FACTOR:-1}
mkdir -p "$out"
{ echo "step,split,loss,lr,norm,tokens_per_s,elapsed_s"
  for s in 1 2 3 4 5 6; do
      v=$(awk -v P="$P" -v f="$factor" -v s="$s" 'BEGIN { x = 1000 * P * f; if (s == 1) x /= 10; if (s == 5) x *= 3; printf "%.1f", x }')
      echo "$s,train,5.0,1e-3,1.0,$v,$s.0"
  done; } > "$out/metrics.csv"
# rank 0's log lines as train --time-comm prints them (wait 1, 2, ... ms: the median after step 1 is 4)
[ "$cp" -gt 1 ] && echo "ring: per forward, 123.456 MB of K/V sent per rank (a plain ring: 999 MB); 8 of 64 chunk pairs computed"
for s in 1 2 3 4 5 6; do echo "step     $s/6 | loss 5.0 | lr 1e-3 | norm 1.0 |  1000 tok/s | ETA 0m01s | step $((10 * s)).0 ms, comm wait $s.0 ms"; done
EOF
chmod +x "$work/path/nvidia-smi" "$work/bin/train"
# The fake's tokens/s is 1000 x P x 0.9 at every P: the same per-GPU rate, 100% for weak scaling.
PATH=$work/path:$PATH STEPS=6 SKIP=1 FACTOR=0.9 SCALING_P="1 2 4" BIN=$work/bin OUTDIR=$work/out DATA=$work/data \
    bench/bench_scaling.sh dilated dp dense dp_serial dp_sharded > "$work/out.log" 2>&1
code=$?
table=$(cat "$work/out/scaling.md" 2>/dev/null)
row() { grep -qE -- "$1" <<< "$table"; }
check "the bench exits 0 (exit $code)" test $code -eq 0
# P = 1: steps 2..6 = {900, 900, 900, 2700, 900}, median 900 tokens/s; P = 2: 1800; P = 4: 3600.
check "P = 1: the median after the skipped step (900 tokens/s; step 1 and the outlier ignored)" row '^\| dilated \| 1 \| 262144 \| 900 \|'
check "the time split: median step 40.0 ms, wait 4.0 ms after the skipped step; the ring's K/V MB (0 at P = 1)" row '^\| dilated \| 1 \| 262144 \| 900 \| [0-9.]+ \| 100.0% \| 40.0 \| 4.0 \| 0 \|$'
check "P = 4 reads the ring's K/V line: 123 MB" row '^\| dilated \| 4 \| 1048576 \| 3600 \| [0-9.]+ \| 100.0% \| 40.0 \| 4.0 \| 123 \|$'
check "dilated P = 2: a window of 2 x 256K, twice the tokens/s, is 100% (weak scaling)" row '^\| dilated \| 2 \| 524288 \| 1800 \| [0-9.]+ \| 100.0% \|'
check "dilated P = 4: 100%" row '^\| dilated \| 4 \| 1048576 \| 3600 \| [0-9.]+ \| 100.0% \|'
check "data parallel P = 4: 100%" row '^\| dp \| 4 \| 1024 \| 3600 \| [0-9.]+ \| 100.0% \|'
check "dp_serial passes --grad-overlap off (the stand-in halves its rate for it: 900 x 4 / 2)" row '^\| dp_serial \| 4 \| 1024 \| 1800 \|'
check "dp_sharded passes --shard-update on (the stand-in's rate 300 x 4)" row '^\| dp_sharded \| 4 \| 1024 \| 1200 \|'
# Dense causal: the P = 4 window is 4x longer, so a token costs more FLOPs, and 4x the tokens/s is
# more than 100% on FLOPs. Model FLOPs per token at T: 546M + 12 x 3.5 x 4 x 768 x T/2.
f1=$(awk 'BEGIN { printf "%.1f", 900 * (546e6 + 12 * 3.5 * 4 * 768 * 32768) / 1e12 }')
f4=$(awk 'BEGIN { printf "%.1f", 3600 * (546e6 + 12 * 3.5 * 4 * 768 * 131072) / 1e12 }')
e4=$(awk 'BEGIN { printf "%.1f%%", 100 * 3600 * (546e6 + 12 * 3.5 * 4 * 768 * 131072) / (4 * 900 * (546e6 + 12 * 3.5 * 4 * 768 * 32768)) }')
check "dense P = 1: $f1 model TFLOP/s" row "^\| dense \| 1 \| 65536 \| 900 \| $f1 \|"
check "dense P = 4: the efficiency on FLOPs ($e4), not on tokens" row "^\| dense \| 4 \| 262144 \| 3600 \| $f4 \| $e4 \|"
check "a failed run is a failed row naming its error, and the others still run" row '^\| dense \| 2 \| - \| failed \|.*stand-in out of memory'
# LAUNCHER starts the ranks of P > 1 (scripts/sim_hosts.sh for simulated hosts): a stand-in that
# notes its call, then hands over to scripts/launch.sh; the table names it.
cat > "$work/bin/launcher" <<EOF
#!/usr/bin/env bash
echo "\$1" >> "$work/launcher_calls"
exec "$PWD/scripts/launch.sh" "\$@"
EOF
chmod +x "$work/bin/launcher"
PATH=$work/path:$PATH STEPS=6 SKIP=1 SCALING_P="1 2" BIN=$work/bin OUTDIR=$work/out_launcher DATA=$work/data \
    LAUNCHER=$work/bin/launcher bench/bench_scaling.sh dilated > "$work/out_launcher.log" 2>&1
check "LAUNCHER starts the P = 2 run (and only it), the table names it" \
    test "$(cat "$work/launcher_calls" 2>/dev/null)" = 2 -a "$(grep -c "started by $work/bin/launcher" "$work/out_launcher/scaling.md")" -eq 1
table=$(cat "$work/out_launcher/scaling.md" 2>/dev/null)
check "the run it started is in the table" row '^\| dilated \| 2 \| 524288 \| 2000 \|'
# No GPU: one line, a non-zero exit.
err=$(PATH=/usr/bin:/bin DATA=$work/data BIN=$work/bin OUTDIR=$work/none bench/bench_scaling.sh dilated 2>&1)
code=$?
check "no GPU: one line and a non-zero exit: $err" test $code -ne 0 -a "$(grep -c . <<< "$err")" -eq 1
finish
