#!/usr/bin/env bash
# Plots mean loss against position inside a document, one curve per CSV written by
# `infer --perplexity FILE --per-position CSV` (log-spaced position buckets):
#   scripts/plot_positions.sh OUT.png LABEL=positions.csv [LABEL=positions.csv ...]
# Needs gnuplot (scripts/install_deps.sh installs gnuplot-nox).
set -euo pipefail
out=${1:?usage: plot_positions.sh OUT.png LABEL=positions.csv [LABEL=positions.csv ...]}
shift
[ $# -ge 1 ] || { echo "error: give at least one LABEL=positions.csv" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "error: gnuplot not found: run scripts/install_deps.sh" >&2; exit 1; }
plots=()
for arg in "$@"; do
    label=${arg%=*} csv=${arg##*=}  # the last =: labels may hold one
    [ -f "$csv" ] || { echo "error: $csv not found: write it with infer --perplexity FILE --per-position $csv" >&2; exit 1; }
    [ "$(head -1 "$csv")" = "bucket_start,bucket_end,tokens,mean_loss" ] || { echo "error: $csv is not a --per-position CSV" >&2; exit 1; }
    # x: the bucket's geometric middle (position 0..1 plotted at 1)
    plots+=("'< tail -n +2 $csv' using (\$1 < 1 ? 1 : sqrt(\$1 * (\$2 + 1))):4 with linespoints lw 2 pt 7 title '$label'")
done
joined=$(IFS=,; echo "${plots[*]}")
gnuplot <<GP
set terminal pngcairo size 900,540 font 'sans,11'
set output '$out.tmp'
set datafile separator ','
set title 'mean loss by position in the document'
set xlabel 'position (tokens, log scale)'
set ylabel 'loss (nats/token)'
set logscale x 2
set grid
set key top right
plot $joined
GP
mv "$out.tmp" "$out"
