#!/bin/bash
# session 10 call 8: v21 (p4: a persistent backward for short walks) against p3 (v20): dense in one binary (--bwd-persistent 0 against the default), LongNet and block-sparse 1M against p3, then test_attention in full on p4
set -u
tar -xJf .carry/s10/p4.tar.xz; mkdir -p old && tar -C old -xJf .carry/s10/p3.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c8.tgz build/logs build/ab 2>/dev/null; }
for r in 1 2; do for v in old/b b; do n=$(echo $v | tr '/' '_')_$r
  timeout 60 b/bench_attention $( [ $v = b ] || echo --bwd-persistent 0 ) --out build/ab/dense_$n.md > build/logs/dense_$n.log 2>&1
  timeout 40 $v/bench_attention_dilated --max-n 1048576 --out build/ab/dil_$n.md > build/logs/dil_$n.log 2>&1
  timeout 40 $v/bench_attention_block_sparse --max-n 1048576 --out build/ab/bs_$n.md > build/logs/bs_$n.log 2>&1
done; done
save
for f in build/ab/dense_*.md; do echo "== $f"; grep -E "^ *(1024|2048|4096|16384|65536) " $f | cut -c1-100; done
for f in build/ab/dil_*.md; do echo "== $f"; grep -E "^1048576 +dilated " $f | cut -c1-120; done
for f in build/ab/bs_*.md; do echo "== $f: $(grep '^1048576  b64' $f | awk '{print $8, $11}')"; done
t0=$SECONDS; timeout 330 b/test_attention > build/logs/test_attention.log 2>&1; echo "test_attention: exit $? $((SECONDS - t0)) s"; tail -2 build/logs/test_attention.log; grep -E "^FAIL" build/logs/test_attention.log | head -5
save
