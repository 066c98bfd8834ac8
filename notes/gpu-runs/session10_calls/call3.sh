#!/bin/bash
# session 10 call 3: ncu of the dense backward (dkdv ws) at 16K D=64 and 1K D=64 (v18, p1): details and per-instruction stall samples
set -u
tar -xJf .carry/s10/p1.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs; nvidia-smi --query-gpu=name --format=csv,noheader
for shape in "4 16384 32 64" "64 1024 32 64"; do set -- $shape; n=bwd_N$2
  timeout 200 ncu --clock-control none -k regex:dkdv_ws --launch-count 1 --set full -o build/logs/$n b/attention_tool --device cuda --dtype bf16 \
    --B $1 --N $2 --H $3 --D $4 --backward --reps 1 > build/logs/$n.log 2>&1
  ncu -i build/logs/$n.ncu-rep --page details > build/logs/$n.details.txt 2>&1
  ncu -i build/logs/$n.ncu-rep --section SourceCounters --page source --csv --print-source sass 2>/dev/null | gzip > build/logs/$n.sass.csv.gz
  rm -f build/logs/$n.ncu-rep
  grep -E "Duration|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued" build/logs/$n.details.txt | head -12
done
tar -czf $OUT/c3.tgz build/logs
