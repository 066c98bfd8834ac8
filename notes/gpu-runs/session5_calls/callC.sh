#!/bin/bash
# issue 22 v11: ln-r4 against ln-r16 (r <= H against r > H in the 32K branch), scored off the grid
set -u
T0=$SECONDS
source .carry/s5/setup.sh
export LEAD= LENGTHS="2000 8000 30000"
SHARDS="2048:512:1024 32768:512:4096" scripts/retrieval_study.sh data | tail -1
for M in ln-r4 ln-r16; do scripts/retrieval_study.sh train:$M:${MIN:-3.6} | tail -2; done
for M in ln-r4 ln-r16; do scripts/retrieval_study.sh eval:$M 2>&1 | tail -3; grep -E "^  (depth|0|1)" build/rs/${M}_eval.log; done
scripts/retrieval_study.sh table
echo "call time $((SECONDS - T0)) s"
tar -czf $OUT/rsC.tgz build/rs
