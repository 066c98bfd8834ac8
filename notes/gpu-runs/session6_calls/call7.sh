#!/bin/bash
# issue 25 v3: the persistent warp-specialized forward: every test case, sanitizers, the model's GPU tests, speed beside cuDNN, training flash vs cuDNN
set -u
tar -xJf .carry/s6/bins7.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs $OUT/c7; nvidia-smi --query-gpu=name --format=csv,noheader
run() { local n=$1 lim=$2; shift 2; local t0=$SECONDS; timeout $lim "$@" > build/logs/$n.log 2>&1; echo "$n: exit $? $(grep -E '^[0-9]+ passed' build/logs/$n.log | tail -1) $((SECONDS - t0)) s"; grep -m4 '^FAIL' build/logs/$n.log; }
run ws_all 260 b/test_attention --backend "fwd ws"
run test_model 60 b/test_model
run test_kv_cache 60 b/test_kv_cache
run test_cp_train 60 b/test_cp_train
run test_resume_gpu 60 env BIN=b tests/gpu/test_resume_gpu.sh b/test_corpus
for tool in memcheck racecheck synccheck; do
  t0=$SECONDS; timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 b/test_attention --small --backend "fwd ws" > build/logs/ws_$tool.log 2>&1; echo "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' build/logs/ws_$tool.log | tail -1) $((SECONDS - t0)) s"
done
tar -czf $OUT/c7/logs.tgz build/logs
t0=$SECONDS; timeout 90 b/bench_attention --variants --out $OUT/c7/bench_variants.md > build/logs/bench.log 2>&1; echo "bench_attention: exit $? $((SECONDS - t0)) s"; grep -v "^#" build/logs/bench.log | grep -v "bwd\|mma.sync\|wg1"
for r in 1 2; do for a in flash cudnn; do
  timeout 60 b/bench_train --attention $a --batches 8,32 --steps 5 --out $OUT/c7/train_${a}_$r.md > /dev/null 2>&1; echo "train $a round $r: exit $? $(grep -E '^\| (flash|cudnn)' $OUT/c7/train_${a}_$r.md | tr '\n' ' ')"
done; done
