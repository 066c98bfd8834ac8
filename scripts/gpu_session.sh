#!/usr/bin/env bash
# One call on a lent GPU machine (H100/H200): the GPU tests, the benchmarks and a short GPU
# training run, from binaries built on the CPU machine and carried in $CARRY (bin/ with the
# binaries and libsentencepiece, corpus/ with the prepared corpus). Logs and tables go to $OUT.
#   STAGES="tests bench train" scripts/gpu_session.sh
set -uo pipefail
CARRY=${CARRY:-.carry/lead}
OUT=${OUT:-build/gpu_session}
STAGES=${STAGES:-tests bench train}
mkdir -p "$OUT" build
export LD_LIBRARY_PATH=$PWD/$CARRY/bin:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader
summary=()
for stage in $STAGES; do
    t0=$SECONDS
    case $stage in
        tests) BIN=$CARRY/bin LOGS=$OUT/logs tests/gpu/run_gpu_tests.sh > "$OUT/tests.log" 2>&1
               summary+=("tests: $(tail -1 "$OUT/tests.log") ($((SECONDS - t0)) s)")
               tail -12 "$OUT/tests.log" ;;
        bench) BIN=$CARRY/bin OUTDIR=$OUT tests/gpu/run_bench.sh > "$OUT/bench.log" 2>&1
               summary+=("bench: exit $? ($((SECONDS - t0)) s)")
               tail -40 "$OUT/bench.log" ;;
        train) "$CARRY/bin/train" --device cuda --data "$CARRY/corpus" --out "$OUT/train" ${TRAIN_ARGS:-} > "$OUT/train.log" 2>&1
               summary+=("train: exit $? ($((SECONDS - t0)) s): $(grep -E '^done' "$OUT/train.log")")
               grep -E '^(model|data|step .*(val|/.* \| loss)|done)' "$OUT/train.log" | tail -14
               sed -n '/--- sample ---/,/^------/p' "$OUT/train.log" | head -14 ;;
    esac
done
echo; printf '%s\n' "${summary[@]}"
