#!/bin/bash
# session 8 call 3: v12 (block-sparse on the persistent ws forward; dilated branches on the ws forward): the GPU suite's tests half, then dilated and block-sparse with every variant
set -u
tar -xJf .carry/s8/v12.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c3.tgz build/logs build/ab build/suite.log 2>/dev/null; }
t0=$SECONDS; timeout 25 b/bench_attention_block_sparse --variants --max-n 1048576 --out build/ab/bs_variants.md > build/logs/bs.log 2>&1; echo "block-sparse: exit $? $((SECONDS - t0)) s"; grep -v '^#' build/ab/bs_variants.md | tail -10 | cut -c1-120
save
t0=$SECONDS; timeout 90 b/bench_attention_dilated --variants --max-n 1048576 --out build/ab/dil_variants.md > build/logs/dil.log 2>&1; echo "dilated: exit $? $((SECONDS - t0)) s"; grep -v '^#' build/ab/dil_variants.md | tail -14 | cut -c1-140
save
t0=$SECONDS
PART=tests BIN=b CORPUS=b/test_corpus LOGS=build/logs timeout 440 tests/gpu/run_gpu_tests.sh > build/suite.log 2>&1; echo "suite exit $? in $((SECONDS - t0)) s"
save
grep -h '^FAIL' build/logs/*.log | head -20
tail -14 build/suite.log
