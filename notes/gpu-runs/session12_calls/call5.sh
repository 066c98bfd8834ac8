#!/bin/bash
# session 12 call 5: `make bench`'s script on the final build (h8), sizes cut to fit one call: dense beside cuDNN and PyTorch,
# dilated and block-sparse to 1M beside PyTorch LongNet and FlexAttention, GPT-2 124M training beside cuDNN, the ring (--quick)
set -u
tar -xJf .carry/s12/h8.tar.xz
export LD_LIBRARY_PATH=$PWD/b:${LD_LIBRARY_PATH:-}
mkdir -p build; nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
BIN=b OUTDIR=build/bench BENCH_DILATED_ARGS="--max-n 1048576" BENCH_BLOCK_SPARSE_ARGS="--max-n 1048576" BENCH_RING_ARGS="--quick" \
  timeout 330 tests/gpu/run_bench.sh > build/bench.log 2>&1; echo "run_bench exit $? in $((SECONDS - t0)) s"
tar -czf $OUT/c5.tgz build/bench build/bench.log
ls build/bench
