#!/bin/bash
# issue 22: per-position loss of dense32k-nope on the held-out long documents (against v1's dense 2K control)
set -u
T0=$SECONDS
source .carry/s5/setup.sh
export LEAD= LENGTHS="2048"
SHARDS="2048:512:1024 8192:512:2048 32768:512:4096" scripts/retrieval_study.sh data | tail -1
scripts/retrieval_study.sh train:dense32k-nope:6.3 | tail -2
left=$(( 585 - (SECONDS - T0) )); echo "positions get $left s"
timeout $left scripts/retrieval_study.sh positions:dense32k-nope | tail -2
cat build/rs/dense32k-nope_positions.csv
echo "call time $((SECONDS - T0)) s"
tar -czf $OUT/rsE.tgz build/rs
