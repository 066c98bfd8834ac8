#!/bin/bash
# session 8 call 1: v11 (shared backward step; block-sparse on the ws kernels): the GPU suite's tests half
set -u
tar -xJf .carry/s8/v11.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c1.tgz build/logs build/suite.log 2>/dev/null; }
t0=$SECONDS
PART=tests BIN=b CORPUS=b/test_corpus LOGS=build/logs timeout 560 tests/gpu/run_gpu_tests.sh > build/suite.log 2>&1; echo "suite exit $? in $((SECONDS - t0)) s"
save
grep -h '^FAIL' build/logs/*.log | head -20
tail -14 build/suite.log
