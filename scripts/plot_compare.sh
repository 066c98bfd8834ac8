#!/usr/bin/env bash
# Plots the loss curves of several runs on one chart, against tokens seen:
#   scripts/plot_compare.sh OUT.png LABEL=RUN_DIR [LABEL=RUN_DIR ...]
# Each RUN_DIR holds the metrics.csv that train writes; tokens seen = step * tokens per step,
# read from the run's log line "N tokens per step" in RUN_DIR/train.log (train's stdout).
set -euo pipefail
out=${1:?usage: plot_compare.sh OUT.png LABEL=RUN_DIR ...}
shift
[ $# -ge 1 ] || { echo "error: give at least one LABEL=RUN_DIR" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "error: gnuplot not found: run scripts/install_deps.sh" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plots=() colors=('#1f77b4' '#d62728' '#2ca02c' '#9467bd')
xlabel="tokens seen (millions)"
i=0
for arg in "$@"; do
    label=${arg%%=*} dir=${arg#*=}
    [ -f "$dir/metrics.csv" ] || { echo "error: $dir/metrics.csv not found" >&2; exit 1; }
    per_step=$(grep -o -E '[0-9]+ tokens per step' "$dir/train.log" 2>/dev/null | head -1 | awk '{print $1}' || true)
    [ -n "$per_step" ] || { echo "error: $dir/train.log has no 'tokens per step' line: save train's output there" >&2; exit 1; }
    awk -F, -v k="$per_step" '$2 == "train" { print $1 * k / 1e6, $3 }' "$dir/metrics.csv" > "$tmp/$i.train"
    awk -F, -v k="$per_step" '$2 == "val" { print $1 * k / 1e6, $3 }' "$dir/metrics.csv" > "$tmp/$i.val"
    c=${colors[$((i % 4))]}
    plots+=("'$tmp/$i.train' using 1:2 with lines lw 1 lc rgb '$c' notitle")
    [ -s "$tmp/$i.val" ] && plots+=("'$tmp/$i.val' using 1:2 with linespoints pt 7 lw 2 lc rgb '$c' title '$label (validation; thin: train)'")
    i=$((i + 1))
done
joined=$(IFS=,; echo "${plots[*]}")
gnuplot <<GP
set terminal pngcairo size 900,540 font 'sans,11'
set output '$out.tmp'
set xlabel '$xlabel'
set ylabel 'cross-entropy (nats/token)'
set grid
set key top right
plot $joined
GP
mv "$out.tmp" "$out"
echo "wrote $out"
