#!/bin/bash
# session 8 call 5: the final build (v12's forward + v13's causal bounds): the sanitizers half, test_attention in full, block-sparse and dilated at 1M, the PyTorch LongNet peer
set -u
tar -xJf .carry/s8/final.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c5.tgz build/logs build/ab build/san.log 2>/dev/null; }
t0=$SECONDS
PART=sanitizers BIN=b LOGS=build/logs timeout 170 tests/gpu/run_gpu_tests.sh > build/san.log 2>&1; echo "sanitizers exit $? in $((SECONDS - t0)) s"; tail -12 build/san.log
save
t0=$SECONDS; timeout 250 b/test_attention > build/logs/test_attention_final.log 2>&1; echo "test_attention: exit $? $((SECONDS - t0)) s: $(grep -cE '^PASS' build/logs/test_attention_final.log) PASS lines, $(grep -cE '^FAIL' build/logs/test_attention_final.log) FAIL lines"; tail -2 build/logs/test_attention_final.log
save
timeout 25 b/bench_attention_block_sparse --max-n 1048576 --out build/ab/bs_final.md > /dev/null 2>&1; grep -v '^#' build/ab/bs_final.md | tail -2 | cut -c1-120
timeout 25 b/bench_attention_dilated --max-n 1048576 --out build/ab/dil_final.md > /dev/null 2>&1; grep -v '^#' build/ab/dil_final.md | tail -3 | cut -c1-120
save
t0=$SECONDS; timeout 90 python3 scripts/bench_longnet_torch.py --sizes 1048576 --out build/ab/longnet_torch.md > build/logs/longnet.log 2>&1; echo "longnet torch: exit $? $((SECONDS - t0)) s"; tail -4 build/logs/longnet.log | cut -c1-160
save
