#!/bin/bash
# issue 25 v2: the warp-specialized forward as the default: the model's GPU tests, the main benchmark beside cuDNN, training flash vs cuDNN
set -u
tar -xJf .carry/s6/bins5.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs $OUT/c5; nvidia-smi --query-gpu=name --format=csv,noheader
run() { local n=$1; shift; local t0=$SECONDS; timeout 120 "$@" > build/logs/$n.log 2>&1; echo "$n: exit $? $(grep -E '^[0-9]+ passed' build/logs/$n.log | tail -1) $((SECONDS - t0)) s"; grep -m3 '^FAIL' build/logs/$n.log; }
run test_model b/test_model
run test_kv_cache b/test_kv_cache
run test_cp_train b/test_cp_train
run test_resume_gpu env BIN=b tests/gpu/test_resume_gpu.sh b/test_corpus
run test_infer_gpu env BIN=b tests/gpu/test_infer_gpu.sh b/test_corpus
run wgmma_rung b/test_attention --small --backend "fwd wgmma wg2"
run ws_small b/test_attention --small --backend "fwd ws"
cp build/logs/*.log $OUT/c5/
t0=$SECONDS; timeout 120 b/bench_attention --out $OUT/c5/bench_attention.md > build/logs/bench.log 2>&1; echo "bench_attention: exit $? $((SECONDS - t0)) s"; grep -v "^#" build/logs/bench.log
for r in 1 2; do for a in flash cudnn; do
  timeout 60 b/bench_train --attention $a --batches 8 --steps 5 --out $OUT/c5/train_${a}_$r.md > build/logs/train_${a}_$r.log 2>&1; echo "train $a round $r: exit $? $(grep -vE '^#' $OUT/c5/train_${a}_$r.md | tail -1)"
done; done
