#!/bin/bash
# session 8 call 4: v13 (causal bounds in one load; key-tile loads before the wait) against v12 in the same call: block-sparse, dilated, dense beside cuDNN; then the GPU suite's tests half
set -u
tar -xJf .carry/s8/v13.tar.xz; mkdir -p v12 && tar -C v12 -xJf .carry/s8/v12.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c4.tgz build/logs build/ab build/suite.log 2>/dev/null; }
for r in 1 2; do for v in v12/b b; do n=$(echo $v | tr '/' '_')_$r
  timeout 25 $v/bench_attention_block_sparse --max-n 1048576 --out build/ab/bs_$n.md > /dev/null 2>&1
  timeout 25 $v/bench_attention_dilated --max-n 1048576 --out build/ab/dil_$n.md > /dev/null 2>&1
  echo "$n: bs 1M $(grep '^1048576  b64' build/ab/bs_$n.md | awk '{print $8, $11}') | dil 1M $(grep '^1048576  dilated ' build/ab/dil_$n.md | awk '{print $3, $5}')"
done; done
save
t0=$SECONDS; timeout 60 b/bench_attention --out build/ab/bench_attention_cudnn.md > build/logs/bench.log 2>&1; echo "bench_attention (cuDNN beside): exit $? $((SECONDS - t0)) s"; grep -v "^#" build/logs/bench.log | head -16
save
t0=$SECONDS
PART=tests BIN=b CORPUS=b/test_corpus LOGS=build/logs timeout 420 tests/gpu/run_gpu_tests.sh > build/suite.log 2>&1; echo "suite exit $? in $((SECONDS - t0)) s"
save
grep -h '^FAIL' build/logs/*.log | head -20
tail -14 build/suite.log
