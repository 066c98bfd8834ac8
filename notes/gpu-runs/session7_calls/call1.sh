#!/bin/bash
# session 7 call 1 (current main, c8992a3): the tests not rerun after issue 25's kernel changes, the sanitizers half, and a profile of the wgmma backward
set -u
tar -xJf .carry/s7/base.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs $OUT/c1; nvidia-smi --query-gpu=name --format=csv,noheader
run() { local n=$1; shift; local t0=$SECONDS; timeout 150 "$@" > build/logs/$n.log 2>&1; echo "$n: exit $? $(grep -E '^[0-9]+ passed' build/logs/$n.log | tail -1) $((SECONDS - t0)) s"; grep -m3 '^FAIL' build/logs/$n.log; }
# profile first (short), then tests
for D in 128 64; do
  timeout 90 ncu --clock-control none --set full -k regex:dkdv_wgmma -c 1 -o build/bwd$D b/attention_tool --device cuda --dtype bf16 --N 16384 --H 16 --D $D --backward --reps 1 > build/logs/ncu$D.log 2>&1; echo "ncu D=$D exit $?"
  ncu -i build/bwd$D.ncu-rep --page details > $OUT/c1/ncu_bwd$D.txt 2>&1
  ncu -i build/bwd$D.ncu-rep --page source --csv --print-source sass > build/src$D.csv 2>&1; gzip -c build/src$D.csv > $OUT/c1/src$D.csv.gz
done
grep -E "Duration|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible" $OUT/c1/ncu_bwd128.txt | head -12
run test_ring b/test_ring
run test_ops b/test_ops
run test_attention_two_sided b/test_attention_two_sided
cp build/logs/*.log $OUT/c1/
t0=$SECONDS
PART=sanitizers BIN=b LOGS=build/logs timeout 250 tests/gpu/run_gpu_tests.sh > build/san.log 2>&1; echo "sanitizers exit $? in $((SECONDS - t0)) s"
cp build/san.log build/logs/*check*.log $OUT/c1/ 2>/dev/null
tail -13 build/san.log
