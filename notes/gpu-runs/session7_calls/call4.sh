#!/bin/bash
# session 7 call 4: the warp-specialized backward (variant 3): correctness, sanitizers, then timed beside variant 0 and cuDNN
set -u
tar -xJf .carry/s7/v7.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c4.tgz build/logs; }
run() { local n=$1 lim=$2; shift 2; local t0=$SECONDS; timeout $lim "$@" > build/logs/$n.log 2>&1; echo "$n: exit $? $(grep -E '^[0-9]+ passed|SUMMARY' build/logs/$n.log | tail -1) $((SECONDS - t0)) s"; grep -m6 '^FAIL' build/logs/$n.log; }
run ws_small 60 b/test_attention --small --backend "bwd ws"
run ws_memcheck 90 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 b/test_attention --small --backend "bwd ws"
save
t0=$SECONDS; timeout 150 b/bench_attention --variants --out build/logs/bench_variants.md > build/logs/bench.log 2>&1; echo "bench --variants: exit $? $((SECONDS - t0)) s"
grep -v "^#" build/logs/bench.log | head -16; grep -E "bwd (wgmma|ws)" build/logs/bench.log | head -16
save
run ws_racecheck 90 compute-sanitizer --tool racecheck --error-exitcode 9 b/test_attention --small --backend "bwd ws"
run ws_synccheck 60 compute-sanitizer --tool synccheck --error-exitcode 9 b/test_attention --small --backend "bwd ws"
save
run ws_all 200 b/test_attention --backend "bwd ws"
save
