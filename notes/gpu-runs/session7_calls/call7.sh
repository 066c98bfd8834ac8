#!/bin/bash
# session 7 call 7: v9 (dQ by TMA reduce-add boxes): tests and sanitizers of the backward, then v8 (final so far) / v9 interleaved, v9 beside cuDNN, training
set -u
tar -xJf .carry/s7/v9.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c7.tgz build/logs build/ab; }
run() { local n=$1 lim=$2; shift 2; local t0=$SECONDS; timeout $lim "$@" > build/logs/$n.log 2>&1; echo "$n: exit $? $(grep -E '^[0-9]+ passed|SUMMARY' build/logs/$n.log | tail -1) $((SECONDS - t0)) s"; grep -m6 '^FAIL' build/logs/$n.log; }
run ws_small 60 b/test_attention --small --backend "bwd ws"
run ws_memcheck 90 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 b/test_attention --small --backend "bwd ws"
run ws_racecheck 90 compute-sanitizer --tool racecheck --error-exitcode 9 b/test_attention --small --backend "bwd ws"
run ws_synccheck 60 compute-sanitizer --tool synccheck --error-exitcode 9 b/test_attention --small --backend "bwd ws"
save
OLD=v8/b NEW=b OUTDIR=build/ab BENCHES=attention ROUNDS=2 BENCH_ATTENTION_ARGS="--no-cudnn" timeout 150 scripts/bench_ab.sh 2>&1 | tail -16
save
t0=$SECONDS; timeout 60 b/bench_attention --out build/ab/bench_attention_cudnn.md > build/logs/bench.log 2>&1; echo "bench_attention (cuDNN beside): exit $? $((SECONDS - t0)) s"; grep -v "^#" build/logs/bench.log | head -16
save
for r in 1 2; do for a in flash cudnn; do
  timeout 40 b/bench_train --attention $a --batches 8 --steps 5 --out build/ab/train_${a}_$r.md > build/logs/train_${a}_$r.log 2>&1; echo "train $a round $r: exit $? $(grep -vE '^#' build/ab/train_${a}_$r.md | tail -1)"
done; done
save
run ws_all 200 b/test_attention --backend "bwd ws"
run test_model 60 b/test_model
save
