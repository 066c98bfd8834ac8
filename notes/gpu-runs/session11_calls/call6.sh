#!/bin/bash
# session 11 call 6: the final build h4 (v25): the sanitizers half; the peers at 1M (FlexAttention, PyTorch LongNet) and GPT-2 124M training (ours and cuDNN)
set -u
tar -xJf .carry/s11/h4.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c6.tgz build/logs build/ab build/san.log 2>/dev/null; }
t0=$SECONDS
PART=sanitizers BIN=b LOGS=build/logs timeout 200 tests/gpu/run_gpu_tests.sh > build/san.log 2>&1; echo "sanitizers exit $? in $((SECONDS - t0)) s"; tail -12 build/san.log
save
t0=$SECONDS; timeout 100 python3 scripts/bench_flex_attention.py --sizes 1048576 --out build/ab/flex.md > build/logs/flex.log 2>&1; echo "flex: exit $? $((SECONDS - t0)) s"; tail -1 build/ab/flex.md | cut -c1-160
t0=$SECONDS; timeout 60 python3 scripts/bench_longnet_torch.py --sizes 1048576 --out build/ab/longnet_torch.md > build/logs/longnet.log 2>&1; echo "longnet torch: exit $? $((SECONDS - t0)) s"; tail -1 build/ab/longnet_torch.md | cut -c1-160
save
t0=$SECONDS; timeout 150 b/bench_train --out build/ab/train_124m.md --batches 8,16,32,64 > build/logs/train.log 2>&1; echo "bench_train: exit $? $((SECONDS - t0)) s"; grep -v "^#" build/ab/train_124m.md | head -12
save
