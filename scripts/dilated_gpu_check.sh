#!/usr/bin/env bash
# One device call for the dilated attention work: GPU facts, the dilated test, our benchmark, the
# dense attention test (the kernels are shared), compute-sanitizer memcheck and racecheck on the
# small dilated cases; logs under OUT_DIR, a short summary and the benchmark table printed last.
#   scripts/dilated_gpu_check.sh [BIN_DIR=.carry/dilated] [OUT_DIR=${OUT:-/tmp/dilated_out}] [STEPS="test bench dense memcheck racecheck"]
# Binaries come from scripts/dilated_build_carry.sh on the dev machine (see notes/attention-dilated.md).
set -u
BIN=${1:-.carry/dilated}
OUTD=${2:-${OUT:-/tmp/dilated_out}}
STEPS=${3:-"test bench dense memcheck racecheck"}
mkdir -p "$OUTD"
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))" 2>/dev/null)/nvidia
export LD_LIBRARY_PATH=$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}:$PWD/$BIN  # libgomp carried as a fallback
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$OUTD/gpu.txt" 2>&1
cat "$OUTD/gpu.txt"
summary=""
for step in $STEPS; do
    t0=$(date +%s)
    case $step in
        test) timeout 130 "$BIN/test_attention_dilated" >"$OUTD/test.log" 2>&1; rc=$?
              grep -E "^(FAIL|    )" "$OUTD/test.log" | head -30
              line="test_attention_dilated: rc=$rc, $(tail -n 1 "$OUTD/test.log")" ;;
        dense) timeout 70 "$BIN/test_attention" >"$OUTD/dense.log" 2>&1; rc=$?
              grep -E "^(FAIL|    )" "$OUTD/dense.log" | head -10
              line="test_attention (dense): rc=$rc, $(tail -n 1 "$OUTD/dense.log")" ;;
        memcheck) timeout 60 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 "$BIN/test_attention_dilated" --small >"$OUTD/memcheck.log" 2>&1; rc=$?
              line="memcheck: rc=$rc, $(grep -E "ERROR SUMMARY" "$OUTD/memcheck.log" | tail -n 1), $(grep -E "passed, " "$OUTD/memcheck.log" | tail -n 1)" ;;
        racecheck) timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_attention_dilated" --small >"$OUTD/racecheck.log" 2>&1; rc=$?
              line="racecheck: rc=$rc, $(grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$OUTD/racecheck.log" | tail -n 1), $(grep -E "passed, " "$OUTD/racecheck.log" | tail -n 1)" ;;
        bench) timeout 100 "$BIN/bench_attention_dilated" --variants --out "$OUTD/bench.txt" >"$OUTD/bench.log" 2>&1; rc=$?
              line="bench: rc=$rc" ;;
        *) line="unknown step $step" ;;
    esac
    summary+="$line ($(( $(date +%s) - t0 )) s)"$'\n'
done
echo "=== summary ==="
printf "%s" "$summary"
if [ -f "$OUTD/bench.txt" ]; then cat "$OUTD/bench.txt"; else tail -n 20 "$OUTD/bench.log" 2>/dev/null; fi
exit 0
