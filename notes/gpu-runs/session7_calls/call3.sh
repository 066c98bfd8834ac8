#!/bin/bash
# session 7 call 3: the GPU suite's tests half on the final kernels (the backward as c8992a3, the two defects fixed), and a source-level profile of the backward
set -u
tar -xJf .carry/s7/full.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/prof; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c3.tgz build/logs build/prof build/suite.log 2>/dev/null; }
for D in 128 64; do
  t0=$SECONDS; timeout 60 ncu --clock-control none --section SourceCounters --section WarpStateStats -k regex:dkdv_wgmma -c 1 -o build/prof/bwd$D b/attention_tool --device cuda --dtype bf16 --N 16384 --H 16 --D $D --backward --reps 1 > build/prof/ncu$D.log 2>&1; echo "ncu D=$D: exit $? $((SECONDS - t0)) s"
  ncu -i build/prof/bwd$D.ncu-rep --page source --csv --print-source cuda,sass > build/prof/sass$D.csv 2>&1; wc -c build/prof/sass$D.csv
done
save
t0=$SECONDS
PART=tests BIN=b CORPUS=b/test_corpus LOGS=build/logs timeout 500 tests/gpu/run_gpu_tests.sh > build/suite.log 2>&1; echo "suite exit $? in $((SECONDS - t0)) s"
save
tail -20 build/suite.log
