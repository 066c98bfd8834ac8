#!/bin/bash
# issue 23: sanitizers (in the background); issue 22: train fixwin32
set -u
source .carry/s4/setup.sh
mkdir -p build
(PART=sanitizers BIN=b LOGS=build/logs2 tests/gpu/run_gpu_tests.sh > build/san.log 2>&1) &
sp=$!
mkdir -p build; scripts/retrieval_study.sh data | tail -3
scripts/retrieval_study.sh train:fixwin32:${MIN:-7.5}
wait $sp; tail -16 build/san.log
tar -czf $OUT/logs2.tgz build/logs2 build/san.log build/rs
