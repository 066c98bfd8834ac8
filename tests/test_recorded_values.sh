#!/usr/bin/env bash
# One rule per value (issue 24): every value a flag sets and a checkpoint records is checked by the
# same function when the flag is parsed and when the file is read, so nothing train writes is
# refused later. Each value at its limits goes flag -> train -> checkpoint -> infer and -> resume;
# just past a limit, the flag is refused in one line before anything is written. And no
# checkpoint holds NaN weights (a poisoned run stops, keeping its last good checkpoint).
set -uo pipefail
corpus=${1:-build/test_corpus}
work=build/test_recorded_values
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
for bin in build/train build/infer; do [ -x $bin ] || bail "$bin not built"; done
[ -f "$corpus/train.bin" ] || bail "no corpus at $corpus (run tests/test_data_cli.sh first)"

tiny=(--device cpu --data "$corpus" --layers 2 --width 64 --heads 1 --seq-len 32 --batch 2 --steps 2 --warmup 1
      --val-every 0 --val-batches 1 --ckpt-every 1 --log-every 1 --sample-tokens 0)

# name, flags...: train to step 1 of 2, generate from that checkpoint, resume to step 2.
round_trip() {
    local name=$1; shift
    local dir="$work/$name"
    if tests/last_wins.sh ./build/train "${tiny[@]}" "$@" --stop-at 1 --out "$dir" > "$dir.train.log" 2>&1 \
       && ./build/infer --device cpu --checkpoint "$dir" --prompt "In the" --max-new 3 > "$dir.infer.log" 2>&1 \
       && tests/last_wins.sh ./build/train "${tiny[@]}" "$@" --resume --out "$dir" > "$dir.resume.log" 2>&1 \
       && [ -f "$dir/ckpt_00000002.safetensors" ]; then
        pass "$name: trains, generates from its checkpoint, resumes"
    else
        fail "$name: $(tail -n 1 "$dir.train.log" "$dir.infer.log" "$dir.resume.log" 2>/dev/null | grep -v '^==>' | tr '\n' ' ')"
    fi
}
round_trip theta_low --rope-theta 1.0001
round_trip theta_high --rope-theta 1e12
round_trip lr_high --lr 1
round_trip schedule_edges --lr 1e-9 --min-lr-frac 0 --weight-decay 0 --grad-clip 0 --warmup 0
round_trip schedule_flat --min-lr-frac 1 --warmup 2 --weight-decay 10 --grad-clip 1e9
round_trip shortest_window --seq-len 2 --batch 1
round_trip fixed_smallest --attn fixed --stride 1 --summary 1
round_trip fixed_largest --attn fixed --stride 16777216 --summary 16777216
round_trip dilated_one --attn dilated --segments 1 --dilations 1
round_trip block_sparse_edges --attn block-sparse --block 4096 --window 1 --global 1
round_trip seed_largest --seed 2147483647 --doc-mask off --val-every 1 --val-batches 3
round_trip seed_negative --seed -5
round_trip schedule_stage --schedule 64x1@1  # step 2 at windows of 64: infer's context comes from it
round_trip nope_first_last --nope-layers 0,1  # every layer of the 2 without rotary embedding
round_trip nope_last --nope-layers 1

# Past a limit: one line naming the flag, non-zero exit, no run directory.
refused() {  # name, message fragment, flags...
    local name=$1 want=$2; shift 2
    local err code
    err=$(tests/last_wins.sh ./build/train "${tiny[@]}" "$@" --out "$work/refused_$name" 2>&1 >/dev/null); code=$?
    if [ $code -ne 0 ] && [ "$(printf '%s\n' "$err" | grep -c .)" -eq 1 ] && [[ "$err" == error:* ]] \
       && grep -qF -- "$want" <<< "$err" && [ ! -e "$work/refused_$name" ]; then
        pass "refused: $name -> $err"
    else
        fail "refused: $name (exit $code): $err"
    fi
}
refused theta_1 "--rope-theta must be in (1, 1e+12]" --rope-theta 1
refused theta_1e30 "--rope-theta must be in (1, 1e+12]" --rope-theta 1e30
refused theta_past "--rope-theta must be in (1, 1e+12]" --rope-theta 1.0001e12
refused lr_past "--lr must be in (0, 1]" --lr 1.5
refused memory_cap_tiny "--memory-cap must be 0 (no cap) or in [1/1024, 1e6] GiB" --memory-cap 1e-30
refused lr_1e30 "--lr must be in (0, 1]" --lr 1e30
refused summary_past "--summary 17 must be in [1, --stride 16]" --attn fixed --stride 16 --summary 17
refused stride_past "--stride 16777217 must be in [1, 2^24]" --attn fixed --stride 16777217 --summary 1
refused nope_past "--nope-layers: layer 2 does not exist (the model has 2 layers)" --nope-layers 2
refused nope_negative "--nope-layers: layer -1 does not exist" --nope-layers -1
refused nope_order "--nope-layers must list distinct layers in increasing order (got 1 before 0)" --nope-layers 1,0
refused nope_twice "--nope-layers must list distinct layers in increasing order (got 1 before 1)" --nope-layers 1,1
refused nope_text "--nope-layers expects a comma-separated list of integers" --nope-layers odd

# Resuming with other NoPE layers than the checkpoint's model: refused in one line.
err=$(tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 0 --resume --out "$work/nope_last" 2>&1 >/dev/null); code=$?
if [ $code -ne 0 ] && grep -q -- "--nope-layers differs from the checkpoint's model" <<< "$err"; then
    pass "resume with other --nope-layers refused: $err"
else
    fail "resume with other --nope-layers (exit $code): $err"
fi

# A checkpoint is never written with NaN weights: the run stops at the checkpoint it would have
# written, with one line, and the checkpoint before stays the latest (and loads).
dir="$work/poisoned"
err=$(LNGPT_POISON_AT_STEP=3 tests/last_wins.sh ./build/train "${tiny[@]}" --steps 4 --ckpt-every 2 --out "$dir" 2>&1 >/dev/null); code=$?
if [ $code -ne 0 ] && [ "$(printf '%s\n' "$err" | grep -c .)" -eq 1 ] && grep -q "the weights hold NaN or Inf, so no checkpoint was written" <<< "$err" \
   && grep -q "resume from $dir/ckpt_00000002.safetensors" <<< "$err" && [ ! -e "$dir/ckpt_00000004.safetensors" ] \
   && ./build/infer --device cpu --checkpoint "$dir" --prompt "In" --max-new 2 > /dev/null 2>&1; then
    pass "NaN weights at step 3: no checkpoint at step 4, step 2's loads: $err"
else
    fail "NaN weights at step 3 (exit $code): $err; $(ls "$dir" 2>&1 | tr '\n' ' ')"
fi
# The control: without the poison the same run writes step 4.
if tests/last_wins.sh ./build/train "${tiny[@]}" --steps 4 --ckpt-every 2 --out "$work/unpoisoned" > /dev/null 2>&1 && [ -f "$work/unpoisoned/ckpt_00000004.safetensors" ]; then
    pass "the same run without the poison writes its step-4 checkpoint (the guard is what stopped it)"
else
    fail "the unpoisoned control run did not write step 4"
fi

# Diverging before any checkpoint: the advice names no checkpoint that does not exist.
err=$(LNGPT_NAN_STEPS=1-9 tests/last_wins.sh ./build/train "${tiny[@]}" --steps 4 --ckpt-every 0 --max-bad-steps 2 --out "$work/diverged" 2>&1 >/dev/null); code=$?
if [ $code -ne 0 ] && grep -q "then start again (no checkpoint was written)" <<< "$err" && [ -z "$(ls "$work/diverged"/ckpt_* 2>/dev/null)" ]; then
    pass "diverged before the first checkpoint: $err"
else
    fail "diverged before the first checkpoint (exit $code): $err"
fi

summary
