#!/bin/bash
# session 7 call 5: the warp-specialized backward as variant 0: the sanitizers half of the suite, the model's GPU tests, then old (c8992a3) / new interleaved, new beside cuDNN, GPT-2 training flash vs cuDNN
set -u
tar -xJf .carry/s7/old.tar.xz && tar -xJf .carry/s7/v8.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c5.tgz build/logs build/ab build/san.log 2>/dev/null; }
run() { local n=$1 lim=$2; shift 2; local t0=$SECONDS; timeout $lim "$@" > build/logs/$n.log 2>&1; echo "$n: exit $? $(grep -E '^[0-9]+ passed|SUMMARY' build/logs/$n.log | tail -1) $((SECONDS - t0)) s"; grep -m6 '^FAIL' build/logs/$n.log; }
t0=$SECONDS
PART=sanitizers BIN=b LOGS=build/logs timeout 200 tests/gpu/run_gpu_tests.sh > build/san.log 2>&1; echo "sanitizers exit $? in $((SECONDS - t0)) s"; tail -12 build/san.log
save
run test_model 60 b/test_model
run test_kv_cache 60 b/test_kv_cache
run test_cp_train 60 b/test_cp_train
save
OLD=old/b NEW=b OUTDIR=build/ab BENCHES=attention ROUNDS=2 BENCH_ATTENTION_ARGS="--no-cudnn" timeout 150 scripts/bench_ab.sh 2>&1 | tail -16
save
t0=$SECONDS; timeout 60 b/bench_attention --out build/ab/bench_attention_cudnn.md > build/logs/bench.log 2>&1; echo "bench_attention (cuDNN beside): exit $? $((SECONDS - t0)) s"; grep -v "^#" build/logs/bench.log | head -16
save
for r in 1 2; do for a in flash cudnn; do
  timeout 40 b/bench_train --attention $a --batches 8 --steps 5 --out build/ab/train_${a}_$r.md > build/logs/train_${a}_$r.log 2>&1; echo "train $a round $r: exit $? $(grep -vE '^#' build/ab/train_${a}_$r.md | tail -1)"
done; timeout 40 old/b/bench_train --attention flash --batches 8 --steps 5 --out build/ab/train_oldflash_$r.md > /dev/null 2>&1; echo "train old flash round $r: $(grep -vE '^#' build/ab/train_oldflash_$r.md | tail -1)"; done
save
