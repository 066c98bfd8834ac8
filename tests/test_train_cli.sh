#!/usr/bin/env bash
# End-to-end tests of build/train and build/infer on a small prepared corpus (made by
# tests/test_data_cli.sh): a short training run, exact resume after a kill, generation and
# perplexity, and every kind of bad input (one-line error, non-zero exit, nothing lost).
# Usage: tests/test_train_cli.sh [CORPUS_DIR]   Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
corpus=${1:-build/test_corpus}
work=build/test_train_cli
rm -rf "$work" && mkdir -p "$work"
passed=0 failed=0
pass() { echo "PASS $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
for bin in build/train build/infer; do [ -x $bin ] || { echo "FAIL $bin not built"; echo "0 passed, 1 failed"; exit 1; }; done
[ -f "$corpus/train.bin" ] || { echo "FAIL no corpus at $corpus (run tests/test_data_cli.sh first)"; echo "0 passed, 1 failed"; exit 1; }

# A tiny model: 2 blocks, width 64, one head of 64, windows of 32.
tiny=(--data "$corpus" --layers 2 --width 64 --heads 1 --seq-len 32 --batch 4 --steps 20 --warmup 4 --lr 3e-3
      --val-every 10 --val-batches 2 --ckpt-every 10 --log-every 5 --sample-tokens 0)

# 1. A run that trains: loss falls, checkpoints and metrics appear.
if ./build/train "${tiny[@]}" --out "$work/full" > "$work/full.log" 2>&1; then
    first=$(awk -F, '$1 == 1 && $2 == "train" { print $3 }' "$work/full/metrics.csv")
    last=$(awk -F, '$1 == 20 && $2 == "train" { print $3 }' "$work/full/metrics.csv")
    if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }'; then pass "training lowers the loss ($first -> $last)"
    else fail "training did not lower the loss ($first -> $last)"; fi
    [ -f "$work/full/ckpt_00000010.safetensors" ] && [ -f "$work/full/ckpt_00000020.safetensors" ] \
        && pass "checkpoints at steps 10 and 20" || fail "checkpoints missing"
    grep -q "tok/s" "$work/full.log" && grep -q "ETA" "$work/full.log" && grep -q "val loss" "$work/full.log" \
        && pass "progress line has loss, tok/s, ETA; val loss printed" || fail "progress line incomplete"
else
    fail "training run failed: $(tail -3 "$work/full.log")"
fi

# 2. Killed right after step 13 (checkpoint at 10), resumed: exactly the same losses.
{ (LNGPT_KILL_AT_STEP=13 exec ./build/train "${tiny[@]}" --out "$work/resumed") > "$work/killed.log" 2>&1; } 2>/dev/null
code=$?
[ $code -eq 137 ] && pass "kill hook ended the run (exit $code)" || fail "kill hook: exit $code"
if ./build/train "${tiny[@]}" --out "$work/resumed" --resume > "$work/resume.log" 2>&1; then
    if diff <(cut -d, -f1-3 "$work/full/metrics.csv") <(cut -d, -f1-3 "$work/resumed/metrics.csv") > "$work/resume.diff"; then
        pass "resumed run reproduces every train and val loss bit for bit"
    else
        fail "resumed losses differ: $(head -4 "$work/resume.diff" | tr '\n' ' ')"
    fi
    cmp -s "$work/full/ckpt_00000020.safetensors" "$work/resumed/ckpt_00000020.safetensors" \
        && pass "final checkpoints are byte-identical" || fail "final checkpoints differ"
else
    fail "resume failed: $(tail -2 "$work/resume.log")"
fi

# 3. Inference: deterministic generation by seed, perplexity over a file.
gen() { ./build/infer --checkpoint "$work/full" --prompt "In the beginning" --max-new 24 --seed "$1" 2>/dev/null; }
a=$(gen 7) b=$(gen 7) c=$(gen 8)
[ -n "$a" ] && [ "$a" == "$b" ] && pass "generation is reproducible by seed" || fail "generation not reproducible"
[ "$a" != "$c" ] && pass "another seed gives other text" || fail "seed has no effect"
printf 'In the beginning God created the heaven and the earth.\n%.0s' {1..40} > "$work/ppl.txt"
out=$(./build/infer --checkpoint "$work/full" --perplexity "$work/ppl.txt" 2>/dev/null)
echo "$out" | grep -q "perplexity" && pass "perplexity mode: $(echo "$out" | grep -o 'perplexity [0-9.]*')" || fail "perplexity mode: $out"

# 3b. A dilated (LongNet) model with one dense layer trains, and its checkpoint carries the
#     per-layer patterns to infer.
dil=(--attn dilated --segments 16,32,64 --dilations 1,2,4 --dense-layers 1)
if ./build/train "${tiny[@]}" "${dil[@]}" --steps 10 --out "$work/dilated" > "$work/dilated.log" 2>&1 \
   && ./build/infer --checkpoint "$work/dilated" --prompt "In the" --max-new 8 > "$work/dilated_gen.log" 2>&1; then
    pass "dilated model trains and generates ($(grep -o 'val loss [0-9.]*' "$work/dilated.log" | tail -1))"
else
    fail "dilated model: $(tail -2 "$work/dilated.log" "$work/dilated_gen.log" | tr '\n' ' ')"
fi

# 4. Bad input: one line on stderr starting with "error:" that names the culprit, exit != 0,
#    and the files already in --out unchanged.
snapshot() { (cd "$1" && find . -type f | sort | xargs sha256sum) 2>/dev/null; }
before=$(snapshot "$work/full")
expect_error() {  # name, pattern the message must contain, command...
    local name=$1 pattern=$2; shift 2
    local err code
    err=$("$@" 2>&1 >/dev/null); code=$?
    local lines; lines=$(printf '%s\n' "$err" | grep -c .)
    if [ $code -ne 0 ] && [ "$lines" -eq 1 ] && [[ "$err" == error:* ]] && grep -q -- "$pattern" <<< "$err"; then
        pass "bad input: $name -> $err"
    else
        fail "bad input: $name (exit $code, $lines lines): $err"
    fi
}
mkdir -p "$work/bad"
cp "$corpus"/{train.bin,val.bin,tokenizer.model} "$work/bad/"
head -c 100 "$corpus/train.bin" > "$work/bad/train.bin"
mkdir -p "$work/badtok"
cp "$corpus"/{train.bin,val.bin} "$work/badtok/" && echo "not a model" > "$work/badtok/tokenizer.model"
head -c 5000 "$work/full/ckpt_00000020.safetensors" > "$work/truncated.safetensors"
expect_error "heads do not divide width" "--heads" ./build/train "${tiny[@]}" --heads 3 --out "$work/x1"
expect_error "unsupported head dim" "head dim" ./build/train "${tiny[@]}" --heads 2 --out "$work/x1"
expect_error "zero steps" "--steps" ./build/train "${tiny[@]}" --steps 0 --out "$work/x1"
expect_error "window longer than the data" "--seq-len" ./build/train "${tiny[@]}" --seq-len 10000000 --out "$work/x1"
expect_error "unknown flag" "--bogus" ./build/train "${tiny[@]}" --bogus 1 --out "$work/x1"
expect_error "malformed number" "--lr" ./build/train "${tiny[@]}" --lr fast --out "$work/x1"
expect_error "missing corpus" "tokenizer.model" ./build/train "${tiny[@]}" --data "$work/nothing_here" --out "$work/x1"
expect_error "corrupt shard" "train.bin" ./build/train "${tiny[@]}" --data "$work/bad" --out "$work/x1"
expect_error "corrupt tokenizer" "tokenizer.model" ./build/train "${tiny[@]}" --data "$work/badtok" --out "$work/x1"
expect_error "out dir holds a run" "--resume" ./build/train "${tiny[@]}" --out "$work/full"
expect_error "resume with other flags" "--resume" ./build/train "${tiny[@]}" --steps 30 --out "$work/full" --resume
expect_error "resume with nothing to resume" "--resume" ./build/train "${tiny[@]}" --out "$work/x2" --resume
expect_error "dilation above its segment" "dilation 64 exceeds its segment 32" ./build/train "${tiny[@]}" --attn dilated --segments 16,32 --dilations 1,64 --out "$work/x1"
expect_error "segment and dilation lists differ" "--dilations has 1" ./build/train "${tiny[@]}" --attn dilated --segments 16,32 --dilations 1 --out "$work/x1"
expect_error "zero segment" "must be positive" ./build/train "${tiny[@]}" --attn dilated --segments 0 --dilations 1 --out "$work/x1"
expect_error "malformed segment list" "--segments" ./build/train "${tiny[@]}" --attn dilated --segments 16,x --out "$work/x1"
expect_error "dense layer out of range" "--dense-layers" ./build/train "${tiny[@]}" --attn dilated --dense-layers 5 --out "$work/x1"
expect_error "unknown pattern" "--attn" ./build/train "${tiny[@]}" --attn sparse --out "$work/x1"
expect_error "unknown device" "--device" ./build/train "${tiny[@]}" --device tpu --out "$work/x1"
expect_error "missing checkpoint" "checkpoint" ./build/infer --checkpoint "$work/nothing.safetensors" --prompt hi
expect_error "truncated checkpoint" "truncated.safetensors" ./build/infer --checkpoint "$work/truncated.safetensors" --prompt hi
expect_error "bad top-p" "--top-p" ./build/infer --checkpoint "$work/full" --top-p 2
expect_error "missing perplexity file" "no_such_file" ./build/infer --checkpoint "$work/full" --perplexity "$work/no_such_file"
[ "$before" == "$(snapshot "$work/full")" ] && pass "bad inputs left the existing run's files untouched" || fail "existing files changed"
[ ! -e "$work/x1" ] && pass "bad inputs created no output directory" || fail "a failed run created $work/x1"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
