#!/bin/bash
# session 11 call 2: v23 (h2: 128 queries a backward step at D = 64) against v22 (h1): dense, LongNet, block-sparse 1M and training A/B; test_attention in full on h2
set -u; export PATH=$PATH:/usr/local/cuda/bin
tar -xJf .carry/s11/h2.tar.xz; mkdir -p old && tar -C old -xJf .carry/s11/h1.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c2.tgz build/logs build/ab 2>/dev/null; }
t0=$SECONDS; timeout 90 b/test_attention --small > build/logs/test_small.log 2>&1; echo "test_attention --small: exit $? $((SECONDS - t0)) s: $(tail -1 build/logs/test_small.log)"; grep -E "^FAIL" build/logs/test_small.log | head -3
for r in 1 2; do for v in old/b b; do n=$(echo $v | tr '/' '_')_$r
  timeout 60 $v/bench_attention --out build/ab/dense_$n.md > build/logs/dense_$n.log 2>&1
  timeout 40 $v/bench_attention_dilated --max-n 1048576 --out build/ab/dil_$n.md > build/logs/dil_$n.log 2>&1
  timeout 40 $v/bench_attention_block_sparse --max-n 1048576 --out build/ab/bs_$n.md > build/logs/bs_$n.log 2>&1
done; done
for v in old/b b; do n=$(echo $v | tr '/' '_'); timeout 60 $v/bench_train --out build/ab/train_$n.md --batches 8,16 > build/logs/train_$n.log 2>&1; done
save
for f in build/ab/dense_*.md; do echo "== $f"; grep -E "^ *(1024|2048|4096|16384|65536) " $f | cut -c1-100; done
for f in build/ab/dil_*.md; do echo "== $f"; grep -E "^1048576 +dilated " $f | cut -c1-120; done
for f in build/ab/bs_*.md; do echo "== $f: $(grep '^1048576  b64' $f | awk '{print $8, $11}')"; done
for f in build/ab/train_*.md; do echo "== $f"; grep -v "^#" $f | head -6; done
t0=$SECONDS; timeout 300 b/test_attention > build/logs/test_attention.log 2>&1; echo "test_attention: exit $? $((SECONDS - t0)) s"; tail -2 build/logs/test_attention.log; grep -E "^FAIL" build/logs/test_attention.log | head -5
save
