#!/usr/bin/env bash
# Plots the training and validation loss of a run: scripts/plot_loss.sh METRICS.csv OUT.png
# [UNIGRAM_BASELINE]. The baseline (nats/token) is read from corpus/manifest.txt when not given.
# Needs gnuplot (scripts/install_deps.sh installs gnuplot-nox).
set -euo pipefail
metrics=${1:?usage: plot_loss.sh METRICS.csv OUT.png [UNIGRAM_BASELINE]}
out=${2:?usage: plot_loss.sh METRICS.csv OUT.png [UNIGRAM_BASELINE]}
baseline=${3:-}
[ -f "$metrics" ] || { echo "error: $metrics not found: train first (make train)" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "error: gnuplot not found: run scripts/install_deps.sh" >&2; exit 1; }
if [ -z "$baseline" ] && [ -f corpus/manifest.txt ]; then
    baseline=$(awk '/^unigram_baseline_nats:/ { print $2 }' corpus/manifest.txt)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk -F, '$2 == "train" { print $1, $3 }' "$metrics" > "$tmp/train.dat"
awk -F, '$2 == "val" { print $1, $3 }' "$metrics" > "$tmp/val.dat"
[ -s "$tmp/train.dat" ] || { echo "error: $metrics holds no training rows" >&2; exit 1; }
baseline_cmd=""
if [ -n "$baseline" ]; then
    baseline_cmd=", $baseline with lines dt 2 lc rgb '#888888' title 'unigram baseline ($baseline)'"
fi
val_cmd=""
if [ -s "$tmp/val.dat" ]; then
    val_cmd=", '$tmp/val.dat' using 1:2 with linespoints pt 7 lw 2 lc rgb '#d62728' title 'validation'"
fi
gnuplot <<GP
set terminal pngcairo size 900,540 font 'sans,11'
set output '$out.tmp'
set title 'loss: $(basename "$(dirname "$metrics")")'
set xlabel 'step'
set ylabel 'cross-entropy (nats/token)'
set grid
plot '$tmp/train.dat' using 1:2 with lines lc rgb '#1f77b4' title 'train' $val_cmd $baseline_cmd
GP
mv "$out.tmp" "$out"
echo "wrote $out"
