#!/bin/bash
# issue 22 v8 (dense128k-nope) trained and scored; the whole GPU suite and the sanitizers alongside (issue 23/24)
set -u
T0=$SECONDS
source .carry/s4/setup.sh
mkdir -p build
scripts/retrieval_study.sh data | tail -1
(scripts/retrieval_study.sh train:dense128k-nope:${MIN:-8.2} > build/t.log 2>&1) &
tp=$!
(PART=tests BIN=b CORPUS=b/test_corpus LOGS=build/logsZ tests/gpu/run_gpu_tests.sh > build/suite.log 2>&1;
 PART=sanitizers BIN=b LOGS=build/logsZ tests/gpu/run_gpu_tests.sh > build/san.log 2>&1) &
sp=$!
wait $tp; tail -3 build/t.log
scripts/retrieval_study.sh eval:dense128k-nope table 2>&1 | tail -14
grep -E "^  (depth|0|1)" build/rs/dense128k-nope_eval.log
tar -czf $OUT/rsZ.tgz build/rs
while kill -0 $sp 2>/dev/null && [ $((SECONDS - T0)) -lt 575 ]; do sleep 2; done
tail -15 build/suite.log; tail -12 build/san.log 2>/dev/null
tar -czf $OUT/logsZ.tgz build/logsZ build/suite.log build/san.log 2>/dev/null
