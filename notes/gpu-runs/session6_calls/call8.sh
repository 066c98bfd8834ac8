#!/bin/bash
# issue 25 v4: persistent only for short rows: every test case with a block per tile, and the speed beside cuDNN
set -u
tar -xJf .carry/s6/bins8.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs $OUT/c8; nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS; timeout 90 b/bench_attention --out $OUT/c8/bench_attention.md > build/logs/bench.log 2>&1; echo "bench_attention: exit $? $((SECONDS - t0)) s"; grep -v "^#" build/logs/bench.log
t0=$SECONDS; timeout 240 b/test_attention --backend "a block per tile" > build/logs/ws_grid.log 2>&1; echo "test_attention (a block per tile): exit $? $(tail -1 build/logs/ws_grid.log) $((SECONDS - t0)) s"; grep -m4 '^FAIL' build/logs/ws_grid.log
cp build/logs/ws_grid.log $OUT/c8/
