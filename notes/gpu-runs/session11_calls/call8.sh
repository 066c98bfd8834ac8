#!/bin/bash
# session 11 call 8: the final build h4 (v25) on an H100 (the card issue 25's forward targets name): dense beside cuDNN, block-sparse and LongNet at 1M beside FlexAttention and PyTorch LongNet
set -u
tar -xJf .carry/s11/h4.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c8.tgz build/logs build/ab 2>/dev/null; }
timeout 60 b/bench_attention --out build/ab/attention.md > build/logs/bench_attention.log 2>&1; grep -v "^#" build/ab/attention.md | cut -c1-112
timeout 40 b/bench_attention_block_sparse --max-n 1048576 --out build/ab/block_sparse.md > /dev/null 2>&1; grep -v '^#' build/ab/block_sparse.md | tail -2 | cut -c1-120
timeout 25 b/bench_attention_dilated --max-n 1048576 --out build/ab/dilated.md > /dev/null 2>&1; grep -v '^#' build/ab/dilated.md | tail -3 | cut -c1-120
save
timeout 100 python3 scripts/bench_flex_attention.py --sizes 1048576 --out build/ab/flex.md > build/logs/flex.log 2>&1; echo "flex: exit $?"; tail -1 build/ab/flex.md | cut -c1-160
timeout 60 python3 scripts/bench_longnet_torch.py --sizes 1048576 --out build/ab/longnet_torch.md > build/logs/longnet.log 2>&1; echo "longnet torch: exit $?"; tail -1 build/ab/longnet_torch.md | cut -c1-160
save
