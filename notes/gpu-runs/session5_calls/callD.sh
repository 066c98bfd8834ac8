#!/bin/bash
# issue 22 v9 control: dense128k-nope resumed from callA's step 1050 to its end, scored to 128K (run inline as one command)
source .carry/s5/setup.sh; export LEAD=; M=dense128k-nope
scripts/retrieval_study.sh train:$M:5.6 | tail -2; grep -E '^done|^stopped' build/rs/${M}_train.log | tail -2
rm -f build/rs/${M}_needles*; scripts/retrieval_study.sh eval:$M table 2>&1 | tail -9; grep -E "^  (depth|0|1)" build/rs/${M}_eval.log
tar -czf $OUT/rsD.tgz build/rs
