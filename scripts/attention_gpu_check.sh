#!/usr/bin/env bash
# One device call for the flash attention work: GPU facts, the correctness test, compute-sanitizer
# (memcheck, racecheck) on the small cases, our benchmark (with every tile variant) and PyTorch's
# flash/cuDNN backends on the same sizes; logs under OUT_DIR, a short summary printed last.
#   scripts/attention_gpu_check.sh [BIN_DIR=.carry/attn] [OUT_DIR=${OUT:-/tmp/attn_out}] [STEPS="test bench torch memcheck racecheck"]
# Binaries are built on the dev machine (see notes/attention.md) and carried to the GPU machine.
set -u
BIN=${1:-.carry/attn}
OUTD=${2:-${OUT:-/tmp/attn_out}}
STEPS=${3:-"test bench torch memcheck racecheck"}
mkdir -p "$OUTD"
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))" 2>/dev/null)/nvidia
export LD_LIBRARY_PATH=$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}:$PWD/$BIN  # libgomp carried as a fallback
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$OUTD/gpu.txt" 2>&1
cat "$OUTD/gpu.txt"
summary=""
for step in $STEPS; do
    t0=$(date +%s)
    case $step in
        test) timeout 400 "$BIN/test_attention" >"$OUTD/test.log" 2>&1; rc=$?
              grep -E "^(FAIL|    )" "$OUTD/test.log" | head -40
              line="test: rc=$rc, $(tail -n 1 "$OUTD/test.log")" ;;
        memcheck) timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_attention" --small --backend flash >"$OUTD/memcheck.log" 2>&1; rc=$?
              line="memcheck: rc=$rc, $(grep -E "ERROR SUMMARY" "$OUTD/memcheck.log" | tail -n 1), $(grep -E "passed, " "$OUTD/memcheck.log" | tail -n 1)" ;;
        racecheck) timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_attention" --small --backend flash >"$OUTD/racecheck.log" 2>&1; rc=$?
              line="racecheck: rc=$rc, $(grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$OUTD/racecheck.log" | tail -n 1), $(grep -E "passed, " "$OUTD/racecheck.log" | tail -n 1)" ;;
        bench) timeout 100 "$BIN/bench_attention" --variants --out "$OUTD/bench.txt" >"$OUTD/bench.log" 2>&1; rc=$?
              line="bench: rc=$rc" ;;
        torch) timeout 110 python3 scripts/check_attention_torch.py --out "$OUTD/torch.txt" >"$OUTD/torch.log" 2>&1; rc=$?
              line="torch: rc=$rc" ;;
        *) line="unknown step $step" ;;
    esac
    summary+="$line ($(( $(date +%s) - t0 )) s)"$'\n'
done
echo "=== summary ==="
printf "%s" "$summary"
[ -f "$OUTD/bench.txt" ] && cat "$OUTD/bench.txt"
[ -f "$OUTD/torch.txt" ] && cat "$OUTD/torch.txt"
[ -f "$OUTD/torch.txt" ] || tail -n 5 "$OUTD/torch.log" 2>/dev/null
exit 0
