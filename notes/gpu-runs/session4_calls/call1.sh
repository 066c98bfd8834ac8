#!/bin/bash
# issue 23: the GPU suite without sanitizers; issue 22: the study's data, on the CPU alongside
set -u
source .carry/s4/setup.sh
nvidia-smi --query-gpu=name --format=csv,noheader
(scripts/retrieval_study.sh data > build/rs_data.log 2>&1) &
dp=$!
PART=tests BIN=b CORPUS=b/test_corpus LOGS=build/logs1 tests/gpu/run_gpu_tests.sh
wait $dp; tail -2 build/rs_data.log
tar -czf $OUT/logs1.tgz build/logs1 build/rs_data.log
