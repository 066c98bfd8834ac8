#!/bin/bash
# session 9 call 3: ncu on the ws forward: block-sparse at 1M against dense 4K (persistent walk) and 16K (a block per tile), to find why a block-sparse tile costs 1.65x a dense-4K tile
set -u
tar -xJf .carry/s9/p1.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/ncu; nvidia-smi --query-gpu=name --format=csv,noheader; which ncu
save() { tar -czf $OUT/c3b.tgz build/ncu 2>/dev/null; }
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
#run dense4k $T --pattern dense --B 16 --N 4096 --H 32
#run dense16k $T --pattern dense --B 4 --N 16384 --H 32
run bs256k $T --pattern block-sparse --block 64 --window 2048 --global 0 --N 262144 --H 12
