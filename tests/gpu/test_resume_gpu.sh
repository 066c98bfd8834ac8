#!/usr/bin/env bash
# Exact resume on the GPU under --deterministic (what tests/test_train_cli.sh checks on the CPU):
# a small model trained for 30 steps without a break, and again killed right after step 13 (the
# LNGPT_KILL_AT_STEP test hook; checkpoint at step 10) and resumed with --resume. The two runs
# must log the same step,split,loss rows (and gradient norms) and end in byte-identical
# checkpoints. Once with dense attention, once dilated (LongNet). Needs an H100/H200, the built
# build/train and a prepared corpus (tests/test_data_cli.sh makes build/test_corpus on the CPU
# machine; carry it along).
# Usage: tests/gpu/test_resume_gpu.sh [CORPUS_DIR]   (BIN=dir: binaries from elsewhere)
# Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
corpus=${1:-build/test_corpus}
BIN=${BIN:-build}
work=${WORK:-build/test_resume_gpu}
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
# shellcheck source=scripts/gpu_lib_paths.sh
source scripts/gpu_lib_paths.sh "$(cd "$BIN" && pwd)"
need_programs "$BIN/train"
need_corpus "$corpus"
need_gpu

# 2 layers, width 256, 4 heads of 64, 8 windows of 1024: 256 key-tile blocks per attention
# backward, more than an H100/H200 runs at once, so without --deterministic the atomic dQ lands
# in a varying order and two identical runs differ (the INFO lines show it; at smaller sizes,
# e.g. width 128, 2 heads, windows of 256, every block is resident and they happened to agree,
# which would make this test blind to the attention backward). About 1 s per run.
small=(--device cuda --data "$corpus" --layers 2 --width 256 --heads 4 --seq-len 1024 --batch 8
       --steps 30 --ckpt-every 10 --val-every 10 --val-batches 2 --log-every 5 --sample-tokens 0 --lr 1e-3 --warmup 5)

# name, extra flags...: uninterrupted run, killed run, resumed run; compare. Then, as INFO, two
# uninterrupted runs without --deterministic.
resume_case() {
    local name=$1; shift
    local dir="$work/$name" args=("${small[@]}" --deterministic "$@")
    mkdir -p "$dir"
    if ! "$BIN/train" "${args[@]}" --out "$dir/full" > "$dir/full.log" 2>&1; then
        fail "$name: uninterrupted run failed: $(tail -2 "$dir/full.log" | tr '\n' ' ')"
        return
    fi
    grep -q "deterministic" "$dir/full.log" && pass "$name: backend reports deterministic ($(grep -o 'backend .*' "$dir/full.log" | head -1))" \
        || fail "$name: the log does not name a deterministic backend"
    { (LNGPT_KILL_AT_STEP=13 exec "$BIN/train" "${args[@]}" --out "$dir/resumed") > "$dir/killed.log" 2>&1; } 2>/dev/null
    local code=$?
    [ $code -eq 137 ] && pass "$name: kill hook ended the run after step 13 (exit $code)" \
        || { fail "$name: kill hook: exit $code: $(tail -2 "$dir/killed.log" | tr '\n' ' ')"; return; }
    if ! "$BIN/train" "${args[@]}" --out "$dir/resumed" --resume > "$dir/resume.log" 2>&1; then
        fail "$name: resume failed: $(tail -2 "$dir/resume.log" | tr '\n' ' ')"
        return
    fi
    grep -q "resumed from .*ckpt_00000010" "$dir/resume.log" && pass "$name: resumed from the step-10 checkpoint" \
        || fail "$name: resume did not start from the step-10 checkpoint: $(grep -m1 resumed "$dir/resume.log")"
    local rows; rows=$(awk -F, 'NR > 1' "$dir/full/metrics.csv" | wc -l)
    if diff <(cut -d, -f1-3 "$dir/full/metrics.csv") <(cut -d, -f1-3 "$dir/resumed/metrics.csv") > "$dir/loss.diff"; then
        pass "$name: resumed run reproduces every train and val loss bit for bit ($rows rows of step,split,loss)"
    else
        fail "$name: step,split,loss differ: $(head -4 "$dir/loss.diff" | tr '\n' ' ')"
    fi
    # Column 5 is the gradient norm (before clipping): the backward, not only the forward.
    diff <(cut -d, -f1,2,5 "$dir/full/metrics.csv") <(cut -d, -f1,2,5 "$dir/resumed/metrics.csv") > "$dir/norm.diff" \
        && pass "$name: gradient norms identical" || fail "$name: gradient norms differ: $(head -4 "$dir/norm.diff" | tr '\n' ' ')"
    local c
    for c in 00000020 00000030; do
        if [ ! -f "$dir/full/ckpt_$c.safetensors" ] || [ ! -f "$dir/resumed/ckpt_$c.safetensors" ]; then
            fail "$name: checkpoint ckpt_$c.safetensors missing"
        elif cmp -s "$dir/full/ckpt_$c.safetensors" "$dir/resumed/ckpt_$c.safetensors"; then
            pass "$name: ckpt_$c.safetensors byte-identical (weights, AdamW moments, loader state)"
        else
            fail "$name: ckpt_$c.safetensors differs: $(cmp "$dir/full/ckpt_$c.safetensors" "$dir/resumed/ckpt_$c.safetensors" | head -1)"
        fi
    done
    local r
    for r in 1 2; do "$BIN/train" "${small[@]}" "$@" --out "$dir/atomic$r" > "$dir/atomic$r.log" 2>&1 || { echo "INFO $name: run without --deterministic failed"; return; }; done
    local n; n=$(diff <(cut -d, -f1-3 "$dir/atomic1/metrics.csv") <(cut -d, -f1-3 "$dir/atomic2/metrics.csv") | grep -c '^<')
    echo "INFO $name: without --deterministic, two uninterrupted runs differ in $n of $rows step,split,loss rows" \
         "(atomic dQ; 0 means the atomics happened to agree)"
}

resume_case dense
resume_case dilated --attn dilated --segments 512,1024 --dilations 1,2

# --deterministic refuses cuDNN attention (its backward is not bit-reproducible), in one line.
err=$(tests/last_wins.sh "$BIN/train" "${small[@]}" --deterministic --attention cudnn --doc-mask off --steps 1 --out "$work/cudnn" 2>&1 >/dev/null); code=$?
if [ $code -ne 0 ] && [ "$(printf '%s\n' "$err" | grep -c .)" -eq 1 ] && [[ "$err" == error:*--attention\ flash* ]]; then
    pass "--deterministic --attention cudnn is refused: $err"
else
    fail "--deterministic --attention cudnn (exit $code): $err"
fi
[ ! -e "$work/cudnn" ] && pass "the refused run created no output directory" || fail "the refused run created $work/cudnn"

finish
