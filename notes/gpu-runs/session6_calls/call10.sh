#!/bin/bash
# issue 25 v5: the one-tile kernel and the persistent one sharing their per-tile code: v2 (call 5's build) against v5 interleaved, then the tests of both
set -u
mkdir -p v2 && tar -xJf .carry/s6/bins5.tar.xz -C v2 ./b/bench_attention ./b/libsentencepiece.so.0 && tar -xJf .carry/s6/bins10.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs $OUT/c10; nvidia-smi --query-gpu=name --format=csv,noheader
OLD=v2/b NEW=b OUTDIR=build/ab BENCHES=attention ROUNDS=2 BENCH_ATTENTION_ARGS="--no-cudnn" timeout 120 scripts/bench_ab.sh 2>&1 | tail -18
cp build/ab/attention_ab.md $OUT/c10/v2_vs_v5_ab.md
t0=$SECONDS; timeout 30 b/test_attention --small --backend "fwd ws" > build/logs/ws_small.log 2>&1; echo "test_attention --small (both kernels): exit $? $(tail -1 build/logs/ws_small.log) $((SECONDS - t0)) s"; grep -m4 '^FAIL' build/logs/ws_small.log
t0=$SECONDS; timeout 220 b/test_attention --backend "a block per tile" > build/logs/ws_grid.log 2>&1; echo "test_attention (a block per tile): exit $? $(tail -1 build/logs/ws_grid.log) $((SECONDS - t0)) s"; grep -m4 '^FAIL' build/logs/ws_grid.log
cp build/logs/ws_*.log $OUT/c10/
