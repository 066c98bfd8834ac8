#!/bin/bash
# issue 22 v9/v10: dense128k-nope-lead finished and scored if call 1 left it short; 1M passkey with and without log-n attention
set -u
T0=$SECONDS
source .carry/s5/setup.sh
M=dense128k-nope-lead
scripts/retrieval_study.sh data | tail -1
grep -q '^done:' build/rs/${M}_train.log 2>/dev/null || { scripts/retrieval_study.sh train:$M:4 | tail -3; }
[ -f build/rs/${M}_needles.csv ] || { scripts/retrieval_study.sh eval:$M table 2>&1 | tail -14; grep -E "^  (depth|0|1)" build/rs/${M}_eval.log; }
grep '"passkey"' out/study/data/eval_1048576.jsonl > build/pk1m.jsonl
for v in logn plain; do
    extra=(); [ $v = logn ] && extra=(--logn-attn 131072)
    b/infer --device cuda --checkpoint out/study/$M --tasks build/pk1m.jsonl --ctx 1048576 --task-batch 5 "${extra[@]}" \
        --tasks-out build/rs/${M}_1m_$v > build/rs/${M}_1m_$v.log 2> build/rs/${M}_1m_$v.err &
done
wait
for v in logn plain; do echo "== 1M $v: $(grep -E '^tasks' build/rs/${M}_1m_$v.log)"; grep -E "^  (depth|0|1)" build/rs/${M}_1m_$v.log; tail -2 build/rs/${M}_1m_$v.err; done
echo "call time $((SECONDS - T0)) s"
tar -czf $OUT/rs2.tgz build/rs
