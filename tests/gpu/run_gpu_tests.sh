#!/usr/bin/env bash
# `make test-gpu`: every GPU test binary (build/test_* from tests/gpu/), then compute-sanitizer
# memcheck and racecheck on the attention kernels at small sizes, and exact resume of build/train
# under --deterministic (tests/gpu/test_resume_gpu.sh), infer through the GPU cache
# (tests/gpu/test_infer_gpu.sh). Sums the "N passed, M failed" lines.
# BIN=dir runs binaries from elsewhere (carried builds); CORPUS=dir the resume test's corpus;
# PART=tests or PART=sanitizers runs one half (each fits a 10-minute device call), default both.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build}
LOGS=${LOGS:-build/logs}
mkdir -p "$LOGS"
if python3 -c "import nvidia" 2>/dev/null; then  # the lent machines keep cuDNN/NCCL/cuBLAS in Python wheels
    SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
    export LD_LIBRARY_PATH=$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || { echo "no GPU: nothing to run"; exit 1; }
total_pass=0 total_fail=0 rows=()
run() {  # name, command...
    local name=$1; shift
    local t0=$SECONDS
    "$@" > "$LOGS/$name.log" 2>&1
    local code=$?
    local summary p f
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$LOGS/$name.log" | tail -1)
    p=$(awk '{print $1}' <<< "$summary"); f=$(awk '{print $3}' <<< "$summary")
    [ -n "$summary" ] || { p=0; f=1; }
    [ $code -eq 0 ] || [ "$f" -gt 0 ] || f=1
    grep -E '^FAIL' "$LOGS/$name.log" | head -10
    total_pass=$((total_pass + p)) total_fail=$((total_fail + f))
    rows+=("$(printf '%-28s %5s passed %3s failed  exit %-3s %4ss' "$name" "$p" "$f" "$code" $((SECONDS - t0)))")
}
sanitize() {  # name, tool, command...: passes when the sanitizer reports 0 errors/hazards
    local name=$1 tool=$2; shift 2
    local t0=$SECONDS
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$@" > "$LOGS/$name.log" 2>&1
    local code=$?
    local verdict; verdict=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOGS/$name.log" | tail -1)
    if [ $code -eq 0 ]; then total_pass=$((total_pass + 1)); else total_fail=$((total_fail + 1)); fi
    rows+=("$(printf '%-28s %s exit %s %4ss' "$name" "${verdict:-no summary}" "$code" $((SECONDS - t0)))")
}
PART=${PART:-all}
if [ "$PART" != sanitizers ]; then
for t in "$BIN"/test_*; do
    name=$(basename "$t")
    [ -f "tests/gpu/$name.cu" ] || continue  # CPU tests run under make test
    run "$name" "$t"
done
# Exact resume under --deterministic (build/train end to end): needs the corpus that
# tests/test_data_cli.sh prepares on the CPU machine (CORPUS=dir to point elsewhere).
run test_resume_gpu env BIN="$BIN" tests/gpu/test_resume_gpu.sh "${CORPUS:-build/test_corpus}"
# infer through the GPU's KV cache: a long context in chunks, a saved cache, a batch of prompts.
run test_infer_gpu env BIN="$BIN" tests/gpu/test_infer_gpu.sh "${CORPUS:-build/test_corpus}"
# The memory planner's peak against the measured one at three windows, every recompute policy
# (model/memory_plan.h; a 4-layer dilated model, so that it runs in seconds).
run plan_vs_measured "$BIN/bench_recompute" --check-plan --layers 4 --seq-lens 16384,65536,262144 --steps 1
fi
if [ "$PART" != tests ]; then
# Our kernels only (--backend flash: every tile variant and the two-sided path; naive has its
# own run below): racecheck cannot model cuDNN's kernels, as it cannot cuBLASLt's.
sanitize memcheck_attention memcheck --leak-check no "$BIN/test_attention" --small --backend flash
sanitize racecheck_attention racecheck "$BIN/test_attention" --small --backend flash
sanitize memcheck_naive memcheck --leak-check no "$BIN/test_attention_naive" --small
sanitize memcheck_two_sided memcheck --leak-check no "$BIN/test_attention_two_sided" --small
sanitize racecheck_two_sided racecheck "$BIN/test_attention_two_sided" --small
sanitize memcheck_ring memcheck --leak-check no "$BIN/test_ring" --small
sanitize memcheck_ops memcheck --leak-check no "$BIN/test_ops" --small
sanitize memcheck_decode memcheck --leak-check no "$BIN/test_kv_cache" --kernels
sanitize racecheck_decode racecheck "$BIN/test_kv_cache" --kernels
# racecheck cannot model cuBLASLt's own Hopper kernels (it flags hazards inside nvjet_sm90_*),
# so it runs on our reduction kernels only.
sanitize racecheck_layernorm racecheck "$BIN/test_ops" --small --filter layernorm
fi
echo
printf '%s\n' "${rows[@]}"
echo "$total_pass passed, $total_fail failed"
[ $total_fail -eq 0 ]
