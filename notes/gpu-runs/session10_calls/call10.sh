#!/bin/bash
# session 10 call 10: p5 (v20 + the persistent forward on 3 blocks as a test backend; host and test code only): test_attention in full
set -u
tar -xJf .carry/s10/p5.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs; nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS; timeout 330 b/test_attention > build/logs/test_attention.log 2>&1; echo "test_attention: exit $? $((SECONDS - t0)) s"; tail -1 build/logs/test_attention.log
grep -E "^FAIL" build/logs/test_attention.log | head -5; grep -c "persistent on 3 blocks" build/logs/test_attention.log
tar -czf $OUT/c10.tgz build/logs
