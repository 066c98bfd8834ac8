#!/bin/bash
# issue 22 v9: data (with the lead shards), dense128k-nope-lead trained alone, the log-n GPU tests under its load, eval to 128K
set -u
source .carry/s5/setup.sh
scripts/retrieval_study.sh data | tail -1
(scripts/retrieval_study.sh train:dense128k-nope-lead:${MIN:-6} > build/t.log 2>&1) &
tp=$!
sleep 5
b/test_ops --filter rope > build/logs/ops_rope.log 2>&1; echo "test_ops --filter rope: exit $? $(tail -1 build/logs/ops_rope.log)"; grep -E '^FAIL' build/logs/ops_rope.log | head -3
b/test_model > build/logs/model.log 2>&1; echo "test_model: exit $? $(tail -1 build/logs/model.log)"; grep -E 'log-n|^FAIL' build/logs/model.log | head -4
b/test_kv_cache > build/logs/kv.log 2>&1; echo "test_kv_cache: exit $? $(tail -1 build/logs/kv.log)"; grep -E 'log-n|^FAIL' build/logs/kv.log | head -4
wait $tp; tail -3 build/t.log
tar -czf $OUT/logs1.tgz build/logs build/rs
scripts/retrieval_study.sh eval:dense128k-nope-lead table 2>&1 | tail -14
grep -E "^  (depth|0|1)" build/rs/dense128k-nope-lead_eval.log
tar -czf $OUT/rs1.tgz build/rs build/logs
