#!/bin/bash
# One device call for the non-attention kernels (layers/cuda/*.cuh except attention): runs the
# binary built on the CPU machine (carried in .carry/ops/) through every check with two seeds,
# under compute-sanitizer memcheck and racecheck on the small shapes, then the --perf table.
# Build first, on the CPU machine:
#   nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I. -Xcompiler "-fopenmp -march=x86-64-v3 -Wall" \
#        --expt-relaxed-constexpr -lineinfo -o .carry/ops/test_ops tests/gpu/test_ops.cu -lcublasLt -lcublas -lgomp
#   cp /lib/x86_64-linux-gnu/libgomp.so.1 .carry/ops/
# then: run(command="bash tests/gpu/device_ops.sh", carry=[".carry/ops"]).
set -u
BIN=${BIN:-.carry/ops}
OUT=${OUT:-/tmp/ops_out}
mkdir -p "$OUT"
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}:$PWD/$BIN
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
summary=()
step() {  # step NAME CMD...: run, log to $OUT/NAME.log, remember the last line and the status
    local name=$1; shift
    local t0=$(date +%s)
    "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    summary+=("$(printf '%-22s rc=%-3d %4ss  %s' "$name" $rc $(($(date +%s) - t0)) "$(grep -E '^[0-9]+ passed|ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$name.log" | tail -1)")")
    grep -E '^FAIL|error' "$OUT/$name.log" | head -20
}
step tests_seed1 $BIN/test_ops --seed 1
step tests_seed2 $BIN/test_ops --seed 20260501
step memcheck compute-sanitizer --tool memcheck --leak-check no $BIN/test_ops --small --seed 3
step racecheck compute-sanitizer --tool racecheck $BIN/test_ops --small --seed 4 --filter layernorm
step racecheck_cls compute-sanitizer --tool racecheck $BIN/test_ops --small --seed 5 --filter classifier
step perf $BIN/test_ops --perf --out "$OUT/perf.txt"
# racecheck models no mbarrier/TMA synchronization: it flags cuBLASLt's Hopper kernels (nvjet_*)
# as racy. Count only hazards reported in our own kernels.
for f in racecheck racecheck_cls; do
    echo "$f: $(grep -c 'Race reported' "$OUT/$f.log") hazard reports, $(grep 'Race reported' "$OUT/$f.log" | grep -vc nvjet) outside cuBLASLt's nvjet kernels"
done
echo "== seed 1 results =="
grep -E '^(PASS|FAIL)' "$OUT/tests_seed1.log"
echo "== perf =="
cat "$OUT/perf.txt" 2>/dev/null || tail -30 "$OUT/perf.log"
echo "== summary =="
printf '%s\n' "${summary[@]}"
