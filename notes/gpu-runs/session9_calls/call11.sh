#!/bin/bash
# session 9 call 11: v17 with the backward's row rule on cut pairs only (p5) against p3: block-sparse A/B at 1M, then test_attention in full on p5
set -u
tar -xJf .carry/s9/p5.tar.xz; mkdir -p old && tar -C old -xJf .carry/s9/p3.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c11.tgz build/logs build/ab 2>/dev/null; }
for r in 1 2; do for v in old/b b; do n=$(echo $v | tr '/' '_')_$r
  timeout 40 $v/bench_attention_block_sparse --max-n 1048576 --out build/ab/bs_$n.md > /dev/null 2>&1
  echo "$n: bs 1M fwd, f+b ms: $(grep '^1048576  b64' build/ab/bs_$n.md | awk '{print $8, $11}')"
done; done
save
t0=$SECONDS; timeout 330 b/test_attention > build/logs/test_attention.log 2>&1; echo "test_attention: exit $? $((SECONDS - t0)) s"; tail -1 build/logs/test_attention.log; grep -E "^FAIL" build/logs/test_attention.log | head -5
save
