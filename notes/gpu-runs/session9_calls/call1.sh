#!/bin/bash
# session 9 call 1: main e5684ee + the ws dilated backward patch (p1) against session 8's call-5 build (old): dilated and dense A/B, then the GPU suite's tests half on p1
set -u
tar -xJf .carry/s9/p1.tar.xz; mkdir -p old && tar -C old -xJf .carry/s8/final.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c1.tgz build/logs build/ab build/suite.log 2>/dev/null; }
for r in 1 2; do for v in old/b b; do n=$(echo $v | tr '/' '_')_$r
  timeout 25 $v/bench_attention_dilated --max-n 1048576 --out build/ab/dil_$n.md > /dev/null 2>&1
  echo "$n: dil 1M $(grep '^1048576  dilated ' build/ab/dil_$n.md | awk '{print $3, $5}')"
done; done
timeout 30 b/bench_attention_dilated --max-n 1048576 --variants --out build/ab/dil_variants.md > build/logs/dil_variants.log 2>&1; grep -iE "bwd|backward" build/logs/dil_variants.log | head -12
save
for r in 1 2; do for v in old/b b; do n=$(echo $v | tr '/' '_')_$r
  timeout 40 $v/bench_attention --out build/ab/dense_$n.md > build/logs/dense_$n.log 2>&1
done; done
grep -v "^#" build/logs/dense_b_1.log | head -3; for f in build/ab/dense_*.md; do echo "== $f"; grep -E "^ *(1024|2048|4096|16384) " $f | cut -c1-110; done
save
t0=$SECONDS
PART=tests BIN=b CORPUS=b/test_corpus LOGS=build/logs timeout 430 tests/gpu/run_gpu_tests.sh > build/suite.log 2>&1; echo "suite exit $? in $((SECONDS - t0)) s"
save
grep -h '^FAIL' build/logs/*.log | head -20
tail -14 build/suite.log
