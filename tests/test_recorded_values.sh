#!/usr/bin/env bash
# One rule per value: every value a flag sets and a checkpoint records is checked by the
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
round_trip adamw_edges --beta1 0 --beta2 0.999 --adam-eps 1  # recorded (not the defaults), resumed with them

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

# AdamW's settings reach the step: step 3's loss moves with --beta2 (the first update is the
# gradient's sign whatever the betas, so step 2's cannot), beside an identical rerun as the
# control. And a run resumes only with its own: adamw_edges recorded --beta2 0.999.
step3_loss() { tests/last_wins.sh ./build/train "${tiny[@]}" --steps 3 --ckpt-every 0 "$@" 2>&1 | grep -oE '^step +3/3 \| loss [0-9.]+'; }
loss_a=$(step3_loss --out "$work/betas_a") loss_b=$(step3_loss --out "$work/betas_b") loss_c=$(step3_loss --beta2 0.5 --out "$work/betas_c")
[ -n "$loss_a" ] && [ "$loss_a" = "$loss_b" ] && pass "the same flags twice: step 3's loss the same ($loss_a)" ||
    fail "the same flags twice gave step 3's losses '$loss_a' and '$loss_b'"
[ -n "$loss_c" ] && [ "$loss_c" != "$loss_a" ] && pass "--beta2 0.5 changes step 3's loss ($loss_c, default: $loss_a)" ||
    fail "--beta2 0.5 left step 3's loss at '$loss_c' (default: '$loss_a'): the flag does not reach the step"
expect_error -F "refused: train --resume with another --beta2 than the run's" "trained with --beta2 '0.999" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --beta1 0 --adam-eps 1 --resume --out "$work/adamw_edges"

# One rule per value, both ways: a value train refuses as a flag is refused in the same
# words when a checkpoint records it (its config or its train_args, edited here) by infer and by
# train --resume (the loader they share: model/train_rules.h, validate_config, each pattern's
# validate), which leave the files as they were. The checkpoint edited to an allowed value is the
# accepted control; unknown keys inside a layer's pattern are refused like unknown config keys.
rules_base="$work/rules_base"
tests/last_wins.sh ./build/train "${tiny[@]}" --out "$rules_base" > "$work/rules_base.log" 2>&1 || fail "training the rules' base: $(tail -n 1 "$work/rules_base.log")"
rules_ck="$rules_base/ckpt_00000002.safetensors"
# dir, config key, JSON value: a copy of the base checkpoint with that config field replaced
config_edit() {
    mkdir -p "$1"
    local c; c=$(python3 -c 'import json,struct,sys
b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]
c=json.loads(json.loads(b[8:8+n])["__metadata__"]["config"]); c[sys.argv[2]]=json.loads(sys.argv[3])
print(json.dumps(json.dumps(c,separators=(",",":"))))' "$rules_ck" "$2" "$3")
    python3 tests/edit_checkpoint.py "$rules_ck" "$1/ckpt_00000002.safetensors" meta config "$c"
}
arg_edit() { mkdir -p "$1"; python3 tests/edit_checkpoint.py "$rules_ck" "$1/ckpt_00000002.safetensors" train_arg "$2" "$3"; }
# name, message, edit (config|arg), key, JSON value, flags...: the flag refused by train, the
# recorded value refused by infer and by --resume (which change nothing)
both_ways() {
    local name=$1 want=$2 how=$3 key=$4 value=$5; shift 5
    refused "flag_$name" "$want" "$@"
    local dir="$work/rule_$name"
    "${how}_edit" "$dir" "$key" "$value"
    local keep; keep=$(md5sum "$dir"/*)
    expect_error -F "refused: infer, a checkpoint recording $key $value" "$want" \
        ./build/infer --device cpu --checkpoint "$dir" --prompt "In" --max-new 2
    expect_error -F "refused: train --resume, a checkpoint recording $key $value" "$want" \
        tests/last_wins.sh ./build/train "${tiny[@]}" --steps 3 --resume --out "$dir"
    [ "$(md5sum "$dir"/*)" = "$keep" ] && pass "$name: the refused runs left $dir as it was" || fail "$name: a refused run changed $dir"
}
both_ways layers_0 "--layers must be in [1, 1024] (got 0)" config n_layer 0 --layers 0
both_ways heads_3 "--heads 3 does not divide --width 64" config n_head 3 --heads 3
both_ways theta_half "--rope-theta must be in (1, 1e+12] (got 0.5)" config rope_theta 0.5 --rope-theta 0.5
both_ways dilation_0 "segment 32 and dilation 0 must be positive" config layer_attn \
    '[{"kind":"dilated","causal":true,"segments":[32],"dilations":[0]},{"kind":"dense","causal":true}]' --attn dilated --segments 32 --dilations 0
both_ways block_3 "--block 3 must be a power of two in [1, 4096]" config layer_attn \
    '[{"kind":"block-sparse","causal":true,"block":3,"window":8,"global":0,"dilated_r":0,"dilated_window":0,"random_count":0,"random_seed":0},{"kind":"dense","causal":true}]' \
    --attn block-sparse --block 3 --window 8
both_ways window_negative "--window, --global, --dilated-blocks and --random-blocks must not be negative" config layer_attn \
    '[{"kind":"block-sparse","causal":true,"block":16,"window":-8,"global":0,"dilated_r":0,"dilated_window":0,"random_count":0,"random_seed":0},{"kind":"dense","causal":true}]' \
    --attn block-sparse --block 16 --window -8
both_ways summary_past "--summary 17 must be in [1, --stride 16]" config layer_attn \
    '[{"kind":"fixed","causal":true,"stride":16,"summary":17},{"kind":"dense","causal":true}]' --attn fixed --stride 16 --summary 17
both_ways lr_negative "--lr must be in (0, 1] (got -0.001)" arg lr -0.001 --lr -0.001
both_ways lr_1_5 "--lr must be in (0, 1] (got 1.5)" arg lr 1.5 --lr 1.5
both_ways warmup_negative "--warmup must be >= 0 (got -1)" arg warmup -1 --warmup -1
both_ways min_lr_frac_2 "--min-lr-frac must be in [0, 1] (got 2)" arg min_lr_frac 2 --min-lr-frac 2
both_ways weight_decay_20 "--weight-decay must be in [0, 10] (got 20)" arg weight_decay 20 --weight-decay 20
both_ways beta1_1 "--beta1 must be in [0, 1) (got 1)" arg beta1 1 --beta1 1
both_ways beta2_negative "--beta2 must be in [0, 1) (got -0.5)" arg beta2 -0.5 --beta2 -0.5
both_ways adam_eps_0 "--adam-eps must be in (0, 1] (got 0)" arg adam_eps 0 --adam-eps 0
both_ways grad_clip_negative "--grad-clip must be >= 0 (got -1)" arg grad_clip -1 --grad-clip -1
both_ways batch_0 "the batch must be >= 1 and the window (--seq-len) >= 2 (got 0, 32)" arg batch 0 --batch 0
both_ways steps_0 "--steps must be at least 1 (got 0)" arg steps 0 --steps 0
both_ways val_batches_0 "--val-batches must be at least 1 (got 0)" arg val_batches 0 --val-batches 0
# The controls: the same edits to allowed values load and generate.
config_edit "$work/rule_ok_fixed" layer_attn '[{"kind":"fixed","causal":true,"stride":16,"summary":4},{"kind":"dense","causal":true}]'
accepted "infer, a checkpoint edited to an allowed fixed pattern" ./build/infer --device cpu --checkpoint "$work/rule_ok_fixed" --prompt "In" --max-new 2
config_edit "$work/rule_ok_dilated" layer_attn '[{"kind":"dilated","causal":true,"segments":[16,32],"dilations":[1,2]},{"kind":"dense","causal":true}]'
accepted "infer, a checkpoint edited to an allowed dilated pattern" ./build/infer --device cpu --checkpoint "$work/rule_ok_dilated" --prompt "In" --max-new 2
arg_edit "$work/rule_ok_args" lr 0.5
accepted "infer, a checkpoint whose recorded --lr is edited to 0.5" ./build/infer --device cpu --checkpoint "$work/rule_ok_args" --prompt "In" --max-new 2
# Unknown keys inside a layer's pattern (nested ones too): refused naming the key.
config_edit "$work/rule_key_dense" layer_attn '[{"kind":"dense","causal":true,"window":64},{"kind":"dense","causal":true}]'
expect_error -F "refused: infer, a dense layer's pattern with a key it lacks" 'unknown key "window" in a dense layer'"'"'s pattern (this build reads causal, kind)' \
    ./build/infer --device cpu --checkpoint "$work/rule_key_dense" --prompt "In" --max-new 2
config_edit "$work/rule_key_fixed" layer_attn '[{"kind":"fixed","causal":true,"stride":16,"summary":4,"strde":3},{"kind":"dense","causal":true}]'
expect_error -F "refused: infer, a fixed layer's pattern with a misspelt key" 'unknown key "strde" in a fixed layer'"'"'s pattern (this build reads causal, kind, stride, summary)' \
    ./build/infer --device cpu --checkpoint "$work/rule_key_fixed" --prompt "In" --max-new 2
expect_error -F "refused: train --resume, a fixed layer's pattern with a misspelt key" 'unknown key "strde"' \
    tests/last_wins.sh ./build/train "${tiny[@]}" --steps 3 --resume --out "$work/rule_key_fixed"
config_edit "$work/rule_key_layout" layer_attn '[{"kind":"block-sparse","causal":true,"block":16,"window":0,"global":0,"dilated_r":0,"dilated_window":0,"random_count":0,"random_seed":0,"layout":{"n_blocks":2,"heads":1,"row_ptr":[0,1,3],"cols":[0,0,1],"per_head":true}},{"kind":"dense","causal":true}]'
expect_error -F "refused: infer, a block-sparse layout with a key it lacks" 'unknown key "layout.per_head" in a block-sparse layer'"'"'s pattern' \
    ./build/infer --device cpu --checkpoint "$work/rule_key_layout" --prompt "In" --max-new 2
config_edit "$work/rule_ok_layout" layer_attn '[{"kind":"block-sparse","causal":true,"block":16,"window":0,"global":0,"dilated_r":0,"dilated_window":0,"random_count":0,"random_seed":0,"layout":{"n_blocks":2,"heads":1,"row_ptr":[0,1,3],"cols":[0,0,1]}},{"kind":"dense","causal":true}]'
accepted "infer, the same layout without it" ./build/infer --device cpu --checkpoint "$work/rule_ok_layout" --prompt "In" --max-new 2

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
