#!/bin/bash
# session 8 call 2: v11: the sanitizers half; dense A/B against ec6d745 (old10); block-sparse ours (every variant) at 1M and FlexAttention
set -u
tar -xJf .carry/s8/v11.tar.xz; tar -xJf .carry/s8/old10.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c2.tgz build/logs build/ab build/san.log 2>/dev/null; }
t0=$SECONDS
PART=sanitizers BIN=b LOGS=build/logs timeout 200 tests/gpu/run_gpu_tests.sh > build/san.log 2>&1; echo "sanitizers exit $? in $((SECONDS - t0)) s"; tail -12 build/san.log
save
t0=$SECONDS; timeout 200 python3 scripts/bench_flex_attention.py --sizes 1048576 --out build/ab/flex.md > build/logs/flex.log 2>&1; echo "flex exit $? $((SECONDS - t0)) s"; tail -6 build/logs/flex.log
save
t0=$SECONDS; timeout 120 b/bench_attention_block_sparse --variants --out build/ab/bs_variants.md > build/logs/bs.log 2>&1; echo "block-sparse: exit $? $((SECONDS - t0)) s"; grep -v '^#' build/ab/bs_variants.md | head -30
save
OLD=old/b NEW=b OUTDIR=build/ab BENCHES=attention ROUNDS=2 BENCH_ATTENTION_ARGS="--no-cudnn" timeout 150 scripts/bench_ab.sh 2>&1 | tail -16
save
