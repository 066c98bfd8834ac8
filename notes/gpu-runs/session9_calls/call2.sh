#!/bin/bash
# session 9 call 2: p1 (main + ws dilated backward): the sanitizers half; block-sparse and dilated at 1M beside FlexAttention and PyTorch LongNet in the same call
set -u
tar -xJf .carry/s9/p1.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c2.tgz build/logs build/ab build/san.log 2>/dev/null; }
t0=$SECONDS
PART=sanitizers BIN=b LOGS=build/logs timeout 200 tests/gpu/run_gpu_tests.sh > build/san.log 2>&1; echo "sanitizers exit $? in $((SECONDS - t0)) s"; tail -12 build/san.log
save
timeout 30 b/bench_attention_block_sparse --max-n 1048576 --out build/ab/bs_p1.md > /dev/null 2>&1; grep -v '^#' build/ab/bs_p1.md | tail -2 | cut -c1-120
timeout 25 b/bench_attention_dilated --max-n 1048576 --out build/ab/dil_p1.md > /dev/null 2>&1; grep -v '^#' build/ab/dil_p1.md | tail -3 | cut -c1-120
save
t0=$SECONDS; timeout 100 python3 scripts/bench_longnet_torch.py --sizes 1048576 --out build/ab/longnet_torch.md > build/logs/longnet.log 2>&1; echo "longnet torch: exit $? $((SECONDS - t0)) s"; tail -3 build/logs/longnet.log | cut -c1-160
save
t0=$SECONDS; timeout 150 python3 scripts/bench_flex_attention.py --sizes 1048576 --out build/ab/flex.md > build/logs/flex.log 2>&1; echo "flex: exit $? $((SECONDS - t0)) s"; tail -3 build/logs/flex.log | cut -c1-160
save
