#!/bin/bash
# session 9 call 9: ncu source counters (SASS) of the persistent dense forward at 1K and the block-sparse forward at 1M, p3: where the warps wait on short walks
set -u
tar -xJf .carry/s9/p3.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/ncu; nvidia-smi --query-gpu=name --format=csv,noheader
T="b/attention_tool --device cuda --dtype bf16 --D 64 --causal --reps 1"
run() { name=$1; shift
  t0=$SECONDS
  timeout 200 ncu --clock-control none -k regex:attention_forward --launch-count 1 --section SourceCounters --section WarpStateStats -o build/ncu/$name "$@" > build/ncu/$name.log 2>&1
  echo "$name: ncu exit $? $((SECONDS - t0)) s"
  ncu -i build/ncu/$name.ncu-rep --page source --csv --print-source sass > build/ncu/$name.sass.csv 2>build/ncu/$name.err
  echo "sass csv: $(wc -l < build/ncu/$name.sass.csv) lines"; head -c 600 build/ncu/$name.sass.csv; echo; head -3 build/ncu/$name.err
  gzip build/ncu/$name.sass.csv; rm -f build/ncu/$name.ncu-rep
  tar -czf $OUT/c9.tgz build/ncu
}
run dense1k $T --pattern dense --B 64 --N 1024 --H 32
run bs1m $T --pattern block-sparse --block 64 --window 2048 --global 128 --N 1048576 --H 12
