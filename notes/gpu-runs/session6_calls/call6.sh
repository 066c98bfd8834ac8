#!/bin/bash
# issue 25 v2: GPT-2 124M training, the build before issue 23 (17e444f, wgmma forward) against today's (warp-specialized forward), interleaved, with the A/A control
set -u
tar -xJf .carry/s6/bins.tar.xz && tar -xJf .carry/s6/bins5.tar.xz && ls old/
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$SECONDS
OLD=old NEW=b AA=1 OUTDIR=build/bench_ab BENCHES=train ROUNDS=3 BENCH_TRAIN_ARGS="--attention flash --batches 8,32 --steps 5" timeout 200 scripts/bench_ab.sh 2>&1 | tail -12; echo "exit $? $((SECONDS - t0)) s"
mkdir -p $OUT/c6 && cp build/bench_ab/train_ab.md build/bench_ab/train_aa.md $OUT/c6/
