#!/bin/bash
# session 10 call 9: ncu of the final build (v20, p3) for the next session: the dense forward (persistent) and backward at 1K, D = 64: details and per-instruction stall samples
set -u
tar -xJf .carry/s10/p3.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs; nvidia-smi --query-gpu=name --format=csv,noheader
for k in attention_forward_ws dkdv_ws; do n=${k}_N1024
  timeout 150 ncu --clock-control none -k regex:$k --launch-count 1 --set full -o build/logs/$n b/attention_tool --device cuda --dtype bf16 \
    --B 64 --N 1024 --H 32 --D 64 --backward --reps 1 > build/logs/$n.log 2>&1
  ncu -i build/logs/$n.ncu-rep --page details > build/logs/$n.details.txt 2>&1
  ncu -i build/logs/$n.ncu-rep --section SourceCounters --page source --csv --print-source sass 2>/dev/null | gzip > build/logs/$n.sass.csv.gz
  rm -f build/logs/$n.ncu-rep
  grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued" build/logs/$n.details.txt | head -4
done
tar -czf $OUT/c9.tgz build/logs
