#!/bin/bash
# session 7 call 8: v10 (final candidate: dQ by TMA boxes at D = 128, atomics at D = 64): the GPU suite's tests half, then the table beside cuDNN and training
set -u
tar -xJf .carry/s7/final10.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c8.tgz build/logs build/ab build/suite.log 2>/dev/null; }
t0=$SECONDS
PART=tests BIN=b CORPUS=b/test_corpus LOGS=build/logs timeout 470 tests/gpu/run_gpu_tests.sh > build/suite.log 2>&1; echo "suite exit $? in $((SECONDS - t0)) s"
save
tail -14 build/suite.log
t0=$SECONDS; timeout 40 b/bench_attention --out build/ab/bench_attention_cudnn.md > build/logs/bench.log 2>&1; echo "bench_attention (cuDNN beside): exit $? $((SECONDS - t0)) s"; grep -v "^#" build/logs/bench.log | head -16
save
for a in flash cudnn; do timeout 25 b/bench_train --attention $a --batches 8 --steps 5 --out build/ab/train_$a.md > build/logs/train_$a.log 2>&1; echo "train $a: exit $? $(grep -vE '^#' build/ab/train_$a.md | tail -1)"; done
save
