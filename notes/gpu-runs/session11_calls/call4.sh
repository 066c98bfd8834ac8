#!/bin/bash
# session 11 call 4: v25 (h4: dilated branches add dQ by TMA reduce-add boxes at their step) against v24 (h3): LongNet 1M (D = 64) and a dilated D = 128 run, A/B; test_attention in full on h4
set -u; export PATH=$PATH:/usr/local/cuda/bin
tar -xJf .carry/s11/h4.tar.xz; mkdir -p old && tar -C old -xJf .carry/s11/h3.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c4.tgz build/logs build/ab 2>/dev/null; }
t0=$SECONDS; timeout 90 b/test_attention --small > build/logs/test_small.log 2>&1; echo "test_attention --small: exit $? $((SECONDS - t0)) s: $(tail -1 build/logs/test_small.log)"; grep -E "^FAIL" build/logs/test_small.log | head -3
for r in 1 2; do for v in old/b b; do n=$(echo $v | tr '/' '_')_$r
  timeout 40 $v/bench_attention_dilated --max-n 1048576 --out build/ab/dil_$n.md > build/logs/dil_$n.log 2>&1
  timeout 60 $v/attention_tool --device cuda --dtype bf16 --pattern dilated --N 262144 --H 8 --D 128 --backward --reps 10 > build/ab/dil128_$n.txt 2>&1
done; done
save
for f in build/ab/dil_*.md; do echo "== $f"; grep -E "^1048576 +dilated " $f | cut -c1-120; done
for f in build/ab/dil128_*.txt; do echo "== $f"; grep -i -E "ms|TFLOP" $f | head -4; done
t0=$SECONDS; timeout 300 b/test_attention > build/logs/test_attention.log 2>&1; echo "test_attention: exit $? $((SECONDS - t0)) s"; tail -2 build/logs/test_attention.log; grep -E "^FAIL" build/logs/test_attention.log | head -5
save
