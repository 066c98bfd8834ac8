#!/bin/bash
# session 11 call 7: every kernel of one forward + backward, ours (v25, h4) and cuDNN's, with its duration (ncu), dense causal 1K and 16K; then the stall samples of our backward's main kernel at 16K, D = 64
set -u
tar -xJf .carry/s11/h4.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs; nvidia-smi --query-gpu=name --format=csv,noheader
for shape in "64 1024 32 64" "4 16384 32 64" "4 16384 16 128"; do set -- $shape
  for be in flash cudnn; do n=${be}_N$2_D$4
    timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv b/attention_tool --device cuda --dtype bf16 --backend $be \
      --B $1 --N $2 --H $3 --D $4 --backward --reps 1 > build/logs/$n.csv 2> build/logs/$n.err
    echo "== $n"; python3 - build/logs/$n.csv <<'PY'
import csv,sys,collections
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]
h=rows[0]; i=h.index("Kernel Name"); v=h.index("Metric Value"); u=h.index("Metric Unit")
seen=collections.OrderedDict()
for r in rows[1:]:
    t=float(r[v].replace(',',''))*(1e-3 if r[u]=="nsecond" else 1e3 if r[u]=="msecond" else 1)
    seen.setdefault(r[i][:90],[]).append(t)
for k,ts in seen.items(): print(f"{min(ts):9.1f} us x{len(ts):3d}  {k}")
PY
  done
done
n=dkdv_ws_N16384
timeout 150 ncu --clock-control none -k regex:dkdv_ws --launch-count 1 --set full -o build/logs/$n b/attention_tool --device cuda --dtype bf16 \
  --B 4 --N 16384 --H 32 --D 64 --backward --reps 1 > build/logs/$n.log 2>&1
ncu -i build/logs/$n.ncu-rep --page details > build/logs/$n.details.txt 2>&1
ncu -i build/logs/$n.ncu-rep --section SourceCounters --page source --csv --print-source sass 2>/dev/null | gzip > build/logs/$n.sass.csv.gz
rm -f build/logs/$n.ncu-rep
grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued|Registers Per|Compute \(SM\) Throughput|Memory Throughput" build/logs/$n.details.txt | head -8
tar -czf $OUT/c7.tgz build/logs
