#!/bin/bash
# issue 22 v9 control: dense128k-nope (v8's recipe) trained alone in one piece to its end, scored to 128K
set -u
T0=$SECONDS
source .carry/s5/setup.sh
export LEAD=
M=dense128k-nope
scripts/retrieval_study.sh data | tail -1
scripts/retrieval_study.sh train:$M:${MIN:-7.3} | tail -2
grep -E '^step +[0-9]+/1200 \| loss' build/rs/${M}_train.log | awk 'NR % 3 == 0' | tail -8; grep -E '^done|^stopped' build/rs/${M}_train.log
tar -czf $OUT/rsA.tgz build/rs
scripts/retrieval_study.sh eval:$M table 2>&1 | tail -9; grep -E "^  (depth|0|1)" build/rs/${M}_eval.log
echo "call time $((SECONDS - T0)) s"
tar -czf $OUT/rsA.tgz build/rs
