#!/bin/bash
# issue 22 v6: model $M trained alone, then scored; test_ring (full and memcheck --small) under the training's load
set -u
source .carry/s4/setup.sh
mkdir -p build/logsX
scripts/retrieval_study.sh data | tail -1
(scripts/retrieval_study.sh train:$M:${MIN:-8} > build/t.log 2>&1) &
tp=$!
if [ -n "${TESTS:-}" ]; then
    sleep 20
    b/test_ring > build/logsX/test_ring.log 2>&1; echo "test_ring (under load): exit $? $(tail -1 build/logsX/test_ring.log)"; grep ^FAIL build/logsX/test_ring.log | head -5
    b/test_attention_two_sided > build/logsX/two_sided.log 2>&1; echo "two_sided (under load): exit $? $(tail -1 build/logsX/two_sided.log)"
    compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 b/test_ring --small > build/logsX/memcheck_ring.log 2>&1
    echo "memcheck test_ring --small (under load): exit $? $(grep -E 'passed|ERROR SUMMARY' build/logsX/memcheck_ring.log | tr '\n' ' ')"
fi
wait $tp; tail -4 build/t.log
scripts/retrieval_study.sh eval:$M table 2>&1 | tail -12
tar -czf $OUT/logsX_$M.tgz build/logsX build/rs
