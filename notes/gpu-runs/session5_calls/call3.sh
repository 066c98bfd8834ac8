#!/bin/bash
# issue 22 v9/v10: dense128k-nope-lead to its end (resume), scored to 128K; 1M passkey with and without log-n, each under a time guard
set -u
T0=$SECONDS
source .carry/s5/setup.sh
M=dense128k-nope-lead
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,temperature.gpu,power.draw,clocks_throttle_reasons.active --format=csv
scripts/retrieval_study.sh data | tail -1
grep -q '^done:' build/rs/${M}_train.log 2>/dev/null || scripts/retrieval_study.sh train:$M:${MIN:-2.5} | tail -4
grep -E '^step +1[12][0-9]{2}/1200 \| loss|^done' build/rs/${M}_train.log | tail -3
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw,clocks_throttle_reasons.active --format=csv,noheader
rm -f build/rs/${M}_needles*
scripts/retrieval_study.sh eval:$M table 2>&1 | tail -9; grep -E "^  (depth|0|1)" build/rs/${M}_eval.log
tar -czf $OUT/rs3a.tgz build/rs
grep '"passkey"' out/study/data/eval_1048576.jsonl > build/pk1m.jsonl
left=$(( 560 - (SECONDS - T0) ))
echo "1M runs get $left s"
for v in logn plain; do
    extra=(); [ $v = logn ] && extra=(--logn-attn 131072)
    timeout $left b/infer --device cuda --checkpoint out/study/$M --tasks build/pk1m.jsonl --ctx 1048576 --task-batch 5 "${extra[@]}" \
        --tasks-out build/rs/${M}_1m_$v > build/rs/${M}_1m_$v.log 2> build/rs/${M}_1m_$v.err &
done
wait
for v in logn plain; do echo "== 1M $v: $(grep -E '^tasks' build/rs/${M}_1m_$v.log)"; grep -E "^  (depth|0|1)" build/rs/${M}_1m_$v.log; tail -c 200 build/rs/${M}_1m_$v.err; echo; done
echo "call time $((SECONDS - T0)) s"
tar -czf $OUT/rs3.tgz build/rs
