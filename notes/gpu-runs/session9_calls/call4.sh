#!/bin/bash
# session 9 call 4: v15 (block-sparse element mask: block rules per row as bits) and v16 (dense rows in L2 launch-order groups), p2, against p1: block-sparse A/B, dense with and without groups (one binary), then test_attention in full on p2
set -u
tar -xJf .carry/s9/p2.tar.xz; mkdir -p old && tar -C old -xJf .carry/s9/p1.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c4.tgz build/logs build/ab 2>/dev/null; }
for r in 1 2; do for v in old/b b; do n=$(echo $v | tr '/' '_')_$r
  timeout 40 $v/bench_attention_block_sparse --max-n 1048576 --out build/ab/bs_$n.md > /dev/null 2>&1
  echo "$n: bs 1M fwd, f+b ms: $(grep '^1048576  b64' build/ab/bs_$n.md | awk '{print $8, $11}')"
done; done
save
for r in 1 2; do for bud in 0 33554432; do n=l2_${bud}_$r
  timeout 60 b/bench_attention --l2-budget $bud --out build/ab/dense_$n.md > build/logs/dense_$n.log 2>&1
done; done
for f in build/ab/dense_l2_*.md; do echo "== $f"; grep -E "^ *(1024|4096|16384|65536) " $f | cut -c1-112; done
save
t0=$SECONDS; timeout 330 b/test_attention > build/logs/test_attention.log 2>&1; echo "test_attention: exit $? $((SECONDS - t0)) s"; tail -3 build/logs/test_attention.log; grep -E "^FAIL" build/logs/test_attention.log | head -5
save
