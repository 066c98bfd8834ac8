#!/bin/bash
# session 7 call 6: the GPU suite's tests half on the final kernels (the warp-specialized backward as variant 0)
set -u
tar -xJf .carry/s7/final.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/prof; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c6.tgz build/logs build/prof build/suite.log 2>/dev/null; }
save
t0=$SECONDS
PART=tests BIN=b CORPUS=b/test_corpus LOGS=build/logs timeout 500 tests/gpu/run_gpu_tests.sh > build/suite.log 2>&1; echo "suite exit $? in $((SECONDS - t0)) s"
save
tail -20 build/suite.log
