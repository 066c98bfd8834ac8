#!/bin/bash
# session 10 call 1: v18 (p1: the causal diagonal by row index) against p0 (v17): dense A/B, LongNet 1M A/B, then test_attention in full on p1
set -u
tar -xJf .carry/s10/p1.tar.xz; mkdir -p old && tar -C old -xJf .carry/s10/p0.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c1.tgz build/logs build/ab 2>/dev/null; }
for r in 1 2; do for v in old/b b; do n=$(echo $v | tr '/' '_')_$r
  timeout 60 $v/bench_attention --out build/ab/dense_$n.md > build/logs/dense_$n.log 2>&1
  timeout 40 $v/bench_attention_dilated --max-n 1048576 --out build/ab/dil_$n.md > build/logs/dil_$n.log 2>&1
done; done
save
for f in build/ab/dense_*.md; do echo "== $f"; grep -E "^ *(1024|2048|4096|16384) " $f | cut -c1-100; done
for f in build/ab/dil_*.md; do echo "== $f"; grep -E "^1048576" $f | cut -c1-120; done
t0=$SECONDS; timeout 330 b/test_attention > build/logs/test_attention.log 2>&1; echo "test_attention: exit $? $((SECONDS - t0)) s"; tail -2 build/logs/test_attention.log; grep -E "^FAIL" build/logs/test_attention.log | head -5
save
