#!/bin/bash
# session 11 call 5: the final build h4 (v25): dense beside cuDNN, block-sparse and dilated at 1M, then the GPU suite's tests half
set -u
tar -xJf .carry/s11/h4.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c5.tgz build/logs build/ab build/suite.log 2>/dev/null; }
timeout 60 b/bench_attention --out build/ab/attention.md > build/logs/bench_attention.log 2>&1; grep -v "^#" build/ab/attention.md | cut -c1-112
timeout 40 b/bench_attention_block_sparse --max-n 1048576 --out build/ab/block_sparse.md > /dev/null 2>&1; grep -v '^#' build/ab/block_sparse.md | tail -2 | cut -c1-120
timeout 25 b/bench_attention_dilated --max-n 1048576 --out build/ab/dilated.md > /dev/null 2>&1; grep -v '^#' build/ab/dilated.md | tail -3 | cut -c1-120
save
t0=$SECONDS
PART=tests BIN=b CORPUS=b/test_corpus LOGS=build/logs timeout 440 tests/gpu/run_gpu_tests.sh > build/suite.log 2>&1; echo "suite exit $? in $((SECONDS - t0)) s"
save
grep -h '^FAIL' build/logs/*.log | head -10
tail -14 build/suite.log
