#!/bin/bash
# issue 25: v2 (a block per tile, call 5's build) against v4 (today's) in one call, interleaved: bench_attention's forward and f+b
set -u
mkdir -p v2 v4 && tar -xJf .carry/s6/bins5.tar.xz -C v2 ./b/bench_attention ./b/libsentencepiece.so.0 && tar -xJf .carry/s6/bins8.tar.xz -C v4 ./b/bench_attention
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/v2/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name --format=csv,noheader
OLD=v2/b NEW=v4/b OUTDIR=build/ab BENCHES=attention ROUNDS=2 BENCH_ATTENTION_ARGS="--no-cudnn" timeout 200 scripts/bench_ab.sh 2>&1 | tail -18
mkdir -p $OUT/c9 && cp build/ab/attention_ab.md $OUT/c9/
