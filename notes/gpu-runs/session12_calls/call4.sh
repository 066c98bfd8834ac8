#!/bin/bash
# session 12 call 4: the final build h8 (= h7: two-sided launches and the fixed pattern on the ws kernels, positions computed,
# the row-space mask for two-sided rows): the whole GPU suite's tests, then the sanitizers
set -u
tar -xJf .carry/s12/h8.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c4.tgz build/logs build/suite.log build/san.log 2>/dev/null; }
t0=$SECONDS
PART=tests BIN=b CORPUS=b/test_corpus LOGS=build/logs timeout 420 tests/gpu/run_gpu_tests.sh > build/suite.log 2>&1; echo "suite exit $? in $((SECONDS - t0)) s"
save
grep -h '^FAIL' build/logs/*.log | head -10
tail -14 build/suite.log
t0=$SECONDS
PART=sanitizers BIN=b LOGS=build/logs timeout 160 tests/gpu/run_gpu_tests.sh > build/san.log 2>&1; echo "sanitizers exit $? in $((SECONDS - t0)) s"; tail -12 build/san.log
save
