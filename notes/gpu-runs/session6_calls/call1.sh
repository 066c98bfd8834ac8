#!/bin/bash
# issue 23: the GPU suite (tests half) on the new build
set -u
source .carry/s6/setup.sh
t0=$SECONDS
PART=tests BIN=b CORPUS=b/test_corpus LOGS=build/logs timeout 560 tests/gpu/run_gpu_tests.sh > build/suite.log 2>&1; echo "suite exit $? in $((SECONDS - t0)) s"
tar -czf $OUT/logs1.tgz build/logs build/suite.log
tail -22 build/suite.log
