#!/bin/bash
# issue 22 v10: the control's checkpoint on 1M passkey items (one per depth) with and without log-n attention, side by side
set -u
T0=$SECONDS
source .carry/s5/setup.sh
M=${M:-dense128k-nope}
python3 - <<'PY'
import json
seen, out = set(), open('build/pk1m.jsonl', 'w')
for line in open('out/study/data/eval_1048576.jsonl'):
    it = json.loads(line)
    if it['task'] == 'passkey' and it['depth'] not in seen:
        seen.add(it['depth']); out.write(line)
PY
wc -l build/pk1m.jsonl
for v in logn plain; do
    extra=(); [ $v = logn ] && extra=(--logn-attn 131072)
    timeout 540 b/infer --device cuda --checkpoint out/study/$M --tasks build/pk1m.jsonl --ctx 1048576 --task-batch 5 "${extra[@]}" \
        --tasks-out build/rs/${M}_1m_$v > build/rs/${M}_1m_$v.log 2> build/rs/${M}_1m_$v.err &
done
wait
for v in logn plain; do echo "== 1M $v: $(grep -E '^tasks' build/rs/${M}_1m_$v.log)"; grep -E "^  (depth|0|1)" build/rs/${M}_1m_$v.log; tail -c 200 build/rs/${M}_1m_$v.err; echo; done
cat build/rs/${M}_1m_*_items.csv 2>/dev/null | cut -c1-200
echo "call time $((SECONDS - T0)) s"
tar -czf $OUT/rsB.tgz build/rs
