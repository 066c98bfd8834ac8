#!/bin/bash
# session 9 call 5: ncu on p2 (v15 + v16): block-sparse 1M, dense 16K, dense 1K
set -u
tar -xJf .carry/s9/p2.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/ncu; nvidia-smi --query-gpu=name --format=csv,noheader; which ncu
save() { tar -czf $OUT/c5.tgz build/ncu 2>/dev/null; }
T="b/attention_tool --device cuda --dtype bf16 --D 64 --causal --reps 1"
run() { name=$1; shift
  t0=$SECONDS
  timeout 150 ncu --clock-control none -k regex:attention_forward --launch-count 1 --set full -o build/ncu/$name "$@" > build/ncu/$name.log 2>&1
  echo "$name: ncu exit $? $((SECONDS - t0)) s"; tail -3 build/ncu/$name.log | cut -c1-200
  ncu -i build/ncu/$name.ncu-rep --page details > build/ncu/$name.details.txt 2>&1
  ncu -i build/ncu/$name.ncu-rep --page raw --csv > build/ncu/$name.raw.csv 2>&1
  rm -f build/ncu/$name.ncu-rep
  grep -E "Duration|Memory Throughput|Compute \(SM\) Throughput|L2 Hit Rate|DRAM Throughput|Warp Cycles Per Issued|Registers Per|Grid Size|Block Size" build/ncu/$name.details.txt | head -14
  save
}
run bs1m $T --pattern block-sparse --block 64 --window 2048 --global 128 --N 1048576 --H 12
run dense1k $T --pattern dense --B 64 --N 1024 --H 32
run dense16k $T --pattern dense --B 4 --N 16384 --H 32

