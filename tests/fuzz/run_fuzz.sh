#!/usr/bin/env bash
# Runs the libFuzzer harnesses of tests/fuzz/ (built by `make fuzz-build` into build/fuzz/).
#
#   tests/fuzz/run_fuzz.sh smoke [HARNESS...]    what `make test` runs (make fuzz-smoke):
#       1. every input in tests/fuzz/<h>/regressions/ once (one check each; committed crash
#          inputs, fixed since, that must never crash again);
#       2. per harness, one fuzzing run (one check each): all of tests/fuzz/<h>/seeds, then a
#          fixed number of inputs (smoke_runs below, 10-30 s each on one core; FUZZ_SMOKE_RUNS
#          overrides) from the fixed -seed=FUZZ_SEED, so the same inputs every time, capped at
#          FUZZ_SMOKE_SECONDS in case the machine is slow. New inputs go to a scratch corpus
#          (build/fuzz/smoke/<h>, wiped first) so every run starts the same; with -reload=0 and
#          address randomization off (setarch -R) two runs try exactly the same inputs.
#   tests/fuzz/run_fuzz.sh long [HARNESS...]     make fuzz: FUZZ_SECONDS (300) per harness from
#       a random seed; the corpus grows in build/fuzz/corpus/<h> (kept between runs, not committed).
#   tests/fuzz/run_fuzz.sh pending [HARNESS...]  replays tests/fuzz/<h>/crashes-pending/ (known
#       crashes not fixed yet; not part of `make test`) and says which of them no longer crash,
#       i.e. can move to regressions/.
#
# FUZZ_JOBS harnesses fuzz at a time (default 2). A crash, sanitizer report, leak, timeout
# (-timeout=10 s per input) or memory blow-up (-rss_limit_mb / -malloc_limit_mb = 2048) is a
# failed check; its input is saved under build/fuzz/artifacts/<h>/ and the report's head is
# printed. The last line is "N passed, M failed"; the exit status is non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/../.."

mode=${1:-smoke}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(json checkpoint shard_loader tokenizer layout kv_cache task_file)
FUZZ_JOBS=${FUZZ_JOBS:-2}
FUZZ_SEED=${FUZZ_SEED:-1}
FUZZ_SMOKE_SECONDS=${FUZZ_SMOKE_SECONDS:-40}
smoke_runs() {  # harness -> inputs per smoke run (measured: json 15-30k/s, checkpoint 3-7k/s,
    # shard_loader 25-45k/s, tokenizer 20-25k/s with ASan on one core: 10-30 s each; layout
    # 1-2k/s (a file per input, some of 2^20 rows): ~4 s, as its reader is small;
    # task_file ~10k/s: ~10 s)
    if [ -n "${FUZZ_SMOKE_RUNS:-}" ]; then echo "$FUZZ_SMOKE_RUNS"; return; fi
    case $1 in json) echo 400000 ;; checkpoint) echo 100000 ;; shard_loader) echo 500000 ;; tokenizer) echo 150000 ;; layout) echo 6000 ;; kv_cache) echo 20000 ;; task_file) echo 100000 ;; *) echo 50000 ;; esac
}
FUZZ_SECONDS=${FUZZ_SECONDS:-300}

# Reports name source lines; leaks are findings; UBSan stops at the first report.
symbolizer=$(command -v llvm-symbolizer || ls /usr/lib/llvm-*/bin/llvm-symbolizer 2>/dev/null | tail -1)
export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$symbolizer}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
limits=(-rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10)
# Smoke runs are repeatable only without address randomization: libFuzzer also learns from
# compared values, pointers included. Without setarch -R (some containers forbid it) they still
# run, just not bit-for-bit the same.
norandom=()
if setarch "$(uname -m)" -R true 2>/dev/null; then norandom=(setarch "$(uname -m)" -R); fi

# shellcheck source=tests/lib.sh
source tests/lib.sh
# The part of a libFuzzer log that says what went wrong and where.
report_head() {
    local at
    at=$(grep -m1 -n -E 'FUZZ_CHECK failed|terminate called|runtime error|==ERROR|ERROR: libFuzzer' "$1" | cut -d: -f1)
    [ -n "$at" ] && sed -n "${at},+24p" "$1" | sed 's/^/    | /'
}

built=()
for h in "${harnesses[@]}"; do
    if [ -x "build/fuzz/fuzz_$h" ]; then built+=("$h"); else fail "$h: build/fuzz/fuzz_$h is missing: run make fuzz-build"; fi
done
harnesses=("${built[@]}")

# 1. Single inputs: regressions (must pass) or pending crashes (expected to crash until fixed).
replay_dir() {  # harness, directory, expect(pass|crash)
    local h=$1 dir=$2 expect=$3 f log
    [ -d "$dir" ] || return 0
    mkdir -p "build/fuzz/logs/$h"
    for f in "$dir"/*; do
        [ -f "$f" ] || continue
        log="build/fuzz/logs/$h/replay-$(basename "$f").log"
        if "build/fuzz/fuzz_$h" "${limits[@]}" "$f" >"$log" 2>&1; then
            if [ "$expect" = pass ]; then pass "$h regression $(basename "$f")"
            else echo "FIXED $h $f no longer crashes: move it to tests/fuzz/$h/regressions/"; fi
        else
            if [ "$expect" = pass ]; then fail "$h regression $f crashes again (log $log):"; report_head "$log"
            else echo "STILL CRASHES $h $f"; report_head "$log" | head -8; fi
        fi
    done
}

if [ "$mode" = pending ]; then
    for h in "${harnesses[@]}"; do replay_dir "$h" "tests/fuzz/$h/crashes-pending" crash; done
    exit 0
fi
[ "$mode" = smoke ] || [ "$mode" = long ] || { echo "usage: $0 smoke|long|pending [HARNESS...]" >&2; exit 2; }

for h in "${harnesses[@]}"; do replay_dir "$h" "tests/fuzz/$h/regressions" pass; done

# 2. Fuzzing, FUZZ_JOBS harnesses at a time; each writes its own log, summarized in order below.
fuzz_one() {  # harness
    local h=$1 corpus dict=() args
    mkdir -p "build/fuzz/artifacts/$h" "build/fuzz/logs/$h"
    if [ "$mode" = smoke ]; then
        corpus="build/fuzz/smoke/$h"
        rm -rf "$corpus"
        args=(-seed="$FUZZ_SEED" -runs="$(smoke_runs "$h")" -max_total_time="$FUZZ_SMOKE_SECONDS" -reload=0)
    else
        corpus="build/fuzz/corpus/$h"
        args=(-max_total_time="$FUZZ_SECONDS")
    fi
    mkdir -p "$corpus"
    case $h in json | checkpoint | kv_cache) dict=(-dict=tests/fuzz/json/json.dict) ;; layout) dict=(-dict=tests/fuzz/layout/layout.dict) ;; task_file) dict=(-dict=tests/fuzz/task_file/task_file.dict) ;; esac
    local run=("build/fuzz/fuzz_$h")
    [ "$mode" = smoke ] && run=("${norandom[@]}" "build/fuzz/fuzz_$h")
    "${run[@]}" "${limits[@]}" "${args[@]}" "${dict[@]}" -print_final_stats=1 \
        -artifact_prefix="build/fuzz/artifacts/$h/" "$corpus" "tests/fuzz/$h/seeds" \
        >"build/fuzz/logs/$h/fuzz.log" 2>&1
}

start=$SECONDS
pids=() names=()
for h in "${harnesses[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$FUZZ_JOBS" ]; do wait -n; done
    echo "fuzz $h ($mode) ..."
    fuzz_one "$h" &
    pids+=($!) names+=("$h")
done
for i in "${!pids[@]}"; do
    h=${names[$i]} log="build/fuzz/logs/${names[$i]}/fuzz.log"
    wait "${pids[$i]}"
    code=$?
    execs=$(grep -m1 -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1)
    secs=$(grep -m1 -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | grep -oE '[0-9]+ second' | grep -oE '[0-9]+')
    if [ "$code" -eq 0 ]; then
        pass "fuzz $h: ${execs:-?} inputs, ${cov:-cov ?}, ${secs:-?} s"
    else
        artifact=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -1 | sed 's/Test unit written to //')
        fail "fuzz $h: exit $code, input ${artifact:-(none saved)}, log $log:"
        report_head "$log"
        [ -n "$artifact" ] && echo "    minimize: build/fuzz/fuzz_$h -minimize_crash=1 -runs=20000 $artifact" \
            && echo "    once fixed, commit it as tests/fuzz/$h/regressions/$(basename "$artifact")"
    fi
done
echo "fuzzing took $((SECONDS - start)) s"
summary
