#!/bin/bash
# issue 22 v6: dense32k and dense32k-nope trained side by side; the GPU tests of the change meanwhile
set -u
source .carry/s4/setup.sh
mkdir -p build
scripts/retrieval_study.sh data | tail -1
(scripts/retrieval_study.sh train:dense32k:${MIN:-7.6} > build/t1.log 2>&1) &
(scripts/retrieval_study.sh train:dense32k-nope:${MIN:-7.6} > build/t2.log 2>&1) &
mkdir -p build/logsA
for t in "test_ops --filter rope" test_model test_kv_cache test_ring test_cp_train; do
    set -- $t; b/$1 "${@:2}" > build/logsA/$1.log 2>&1; echo "$t: exit $? $(tail -1 build/logsA/$1.log)"; grep ^FAIL build/logsA/$1.log | head -5
done
compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 b/test_ring --small > build/logsA/memcheck_ring.log 2>&1
echo "memcheck test_ring --small: exit $? $(grep -E 'passed|ERROR SUMMARY' build/logsA/memcheck_ring.log | tr '\n' ' ')"
wait
tail -3 build/t1.log build/t2.log
tar -czf $OUT/logsA.tgz build/logsA build/rs
