#!/bin/bash
# session 12 call 6: the fixed pattern's speed before (o = c5089b4: the wgmma kernels) and after (b = h8: the ws kernels),
# Sparse Transformer fixed, blocks of 2048 with a summary of 128, H = 12, D = 64, bf16, interleaved, 2 rounds
set -u
tar -xJf .carry/s12/h8.tar.xz; tar -xJf .carry/s12/oldtool.tar.xz
export LD_LIBRARY_PATH=$PWD/b:${LD_LIBRARY_PATH:-}
mkdir -p build/fixed; nvidia-smi --query-gpu=name --format=csv,noheader
for round in 1 2; do
  for v in o b; do
    for n in 32768 262144; do
      timeout 60 $v/attention_tool --device cuda --dtype bf16 --pattern fixed --stride 2048 --summary 128 --N $n --H 12 --D 64 --backward --reps 5 \
        > build/fixed/${v}_${n}_$round.log 2>&1 || echo "$v $n $round failed"
      echo "$v N=$n round $round: $(grep -i "ms" build/fixed/${v}_${n}_$round.log | tr '\n' ' ' | cut -c1-220)"
    done
  done
done
tar -czf $OUT/c6.tgz build/fixed
