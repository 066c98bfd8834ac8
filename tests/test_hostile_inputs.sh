#!/usr/bin/env bash
# Careless and hostile inputs (notes/hostile-input.md): a flag with no effect in the chosen mode, a checkpoint whose NoPE layers are
# edited, task lists that repeat themselves. Each is refused in one "error:" line, non-zero exit,
# nothing written; each refusal has a control that the same command without the fault still runs.
set -uo pipefail
corpus=${1:-build/test_corpus}
work=build/test_hostile_inputs
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
for bin in build/train build/infer build/data_tool; do [ -x $bin ] || bail "$bin not built"; done
[ -f "$corpus/train.bin" ] || bail "no corpus at $corpus (run tests/test_data_cli.sh first)"

tiny=(--device cpu --data "$corpus" --layers 2 --width 64 --heads 1 --seq-len 32 --batch 2 --steps 2 --warmup 1
      --val-every 0 --val-batches 1 --ckpt-every 1 --log-every 1 --sample-tokens 0)


# ---- train: flags that would do nothing
refused "train --rope-theta with every layer NoPE" "--rope-theta has no effect: every layer is NoPE" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 0,1 --rope-theta 500000 --out "$work/theta_all_nope"
[ ! -e "$work/theta_all_nope" ] && pass "the refused run left no --out" || fail "the refused run made $work/theta_all_nope"
accepted "train --rope-theta with a layer that rotates" tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --rope-theta 500000 --out "$work/theta_one_nope"
refused "train --sample-prompt with --sample-tokens 0" "--sample-prompt has no effect with --sample-tokens 0" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --sample-prompt "In the" --out "$work/prompt_no_sample"
accepted "train --sample-prompt with a sample" tests/last_wins.sh ./build/train "${tiny[@]}" --sample-prompt "In the" --sample-tokens 2 --out "$work/prompt_sample"

# ---- checkpoints whose NoPE layers are edited: refused on load by infer and by --resume
base="$work/base"
tests/last_wins.sh ./build/train "${tiny[@]}" --out "$base" > "$work/base.log" 2>&1 || fail "training the base checkpoint: $(tail -n 1 "$work/base.log")"
ck="$base/ckpt_00000002.safetensors"
cfg='{"vocab_size":VOCAB,"n_layer":2,"n_embd":64,"n_head":1,"rope_theta":THETA,NOPE"layer_attn":[{"kind":"dense","causal":true},{"kind":"dense","causal":true}]}'
vocab=$(python3 -c 'import json,struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; print(json.loads(json.loads(b[8:8+n])["__metadata__"]["config"])["vocab_size"])' "$ck")
# dir, theta, nope field: a copy of the base checkpoint with that config, without the "forward"
# record (which would contradict the edit): a checkpoint as written before the record
edited() {
    local c=${cfg/VOCAB/$vocab}; c=${c/THETA/$2}; c=${c/NOPE/$3}
    mkdir -p "$1"
    python3 tests/edit_checkpoint.py "$ck" "$1/ckpt_00000002.safetensors" meta config "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$c")" \
        && python3 tests/edit_checkpoint.py "$1/ckpt_00000002.safetensors" "$1/ckpt_00000002.safetensors" drop_meta forward
}
i=0
for nope in '"nope_layers":[2],|layer 2 does not exist' '"nope_layers":[1,0],|got 1 before 0' '"nope_layers":[0,0],|got 0 before 0' \
            '"nope_layers":[-1],|layer -1 does not exist' '"nope_layers":[0.5],|nope_layers must be an integer' \
            '"nope_layers":"1",|nope_layers is not an array'; do
    i=$((i + 1)); edited "$work/nope_edit$i" 10000 "${nope%%|*}"
    refused "infer, checkpoint with ${nope%%|*}" "${nope##*|}" ./build/infer --device cpu --checkpoint "$work/nope_edit$i" --prompt "In" --max-new 2
    before=$(md5sum "$work/nope_edit$i/ckpt_00000002.safetensors")
    refused "train --resume, checkpoint with ${nope%%|*}" "${nope##*|}" tests/last_wins.sh ./build/train "${tiny[@]}" --steps 3 --resume --out "$work/nope_edit$i"
    [ "$(md5sum "$work/nope_edit$i/ckpt_00000002.safetensors")" = "$before" ] && [ ! -e "$work/nope_edit$i/ckpt_00000003.safetensors" ] \
        && pass "the refused resume left $work/nope_edit$i as it was" || fail "the refused resume changed $work/nope_edit$i"
done
edited "$work/nope_ok" 10000 '"nope_layers":[0,1],'
accepted "infer, checkpoint with nope_layers [0,1] (the edit itself is sound)" ./build/infer --device cpu --checkpoint "$work/nope_ok" --prompt "In" --max-new 2
refused "--init-from a checkpoint of other NoPE layers" "has NoPE layers [0,1] but this run asks for [1]: pass its --nope-layers" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --init-from "$work/nope_ok" --out "$work/init_other_nope"
# An all-NoPE model's base rotates nothing: --init-from must not ask for a --rope-theta that the
# run would then refuse as having no effect.
edited "$work/nope_all_theta" 500000 '"nope_layers":[0,1],'
accepted "--init-from an all-NoPE checkpoint recorded with another rope base" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 0,1 --init-from "$work/nope_all_theta" --out "$work/init_all_nope"

# A key given twice: which value a reader keeps would decide the model; refused (core/json.h).
edited "$work/nope_twice_key" 10000 '"nope_layers":[0],"nope_layers":[1],'
refused "infer, checkpoint config with nope_layers given twice" 'key "nope_layers" given twice' \
    ./build/infer --device cpu --checkpoint "$work/nope_twice_key" --prompt "In" --max-new 2

# ---- log-n attention: NoPE layers' queries only, a base of at least 2; recorded, and infer may change it
refused "train --logn-attn without NoPE layers" "--logn-attn scales the queries of NoPE layers and the model has none" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --logn-attn 16 --out "$work/logn_no_nope"
refused "train --logn-attn 1" "--logn-attn must be 0 (off) or a window length in [2," \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --logn-attn 1 --out "$work/logn_one"
[ ! -e "$work/logn_no_nope" ] && [ ! -e "$work/logn_one" ] && pass "the refused runs left no --out" || fail "a refused --logn-attn run made its --out"
accepted "train --logn-attn 16 with NoPE layer 1 (windows of 32: rows 16..31 scaled)" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --logn-attn 16 --out "$work/logn_ok"
grep -qF 'logn_attn\":16,' "$work/logn_ok/ckpt_00000002.safetensors" && pass "--logn-attn is recorded in the checkpoint's config" \
    || fail "--logn-attn 16 is not in the checkpoint's config"
refused "train --resume with another --logn-attn" "--logn-attn is 8 but the checkpoint's model has 16" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --logn-attn 8 --resume --out "$work/logn_ok"
refused "train --resume with --logn-attn alone (no other model flag)" "drop the model flags when resuming" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --logn-attn 8 --resume --out "$work/logn_ok"
refused "infer --logn-attn on a model without NoPE layers" "the model has none (train --nope-layers makes them)" \
    ./build/infer --device cpu --checkpoint "$base" --prompt "In" --max-new 2 --logn-attn 64
refused "infer --logn-attn -3" "--logn-attn must be 0 (off) or a window length" \
    ./build/infer --device cpu --checkpoint "$work/logn_ok" --prompt "In" --max-new 2 --logn-attn -3
accepted "infer --logn-attn 0 (off) and 64 on the log-n checkpoint" bash -c "./build/infer --device cpu --checkpoint $work/logn_ok \
    --prompt In --max-new 2 --logn-attn 0 && ./build/infer --device cpu --checkpoint $work/logn_ok --prompt In --max-new 2 --logn-attn 64"
./build/infer --device cpu --checkpoint "$work/logn_ok" --prompt "In" --max-new 2 --logn-attn 8 --save-cache "$work/logn8.kv" \
    > /dev/null 2>&1 || fail "infer --save-cache under --logn-attn 8"
refused "infer --load-cache prefilled under another --logn-attn" "was prefilled with --logn-attn 8 and this run has 16: pass --logn-attn 8" \
    ./build/infer --device cpu --checkpoint "$work/logn_ok" --prompt " and" --max-new 2 --load-cache "$work/logn8.kv"

# ---- learned log-n slopes (--logn-learn): they need a base; recorded with their tensors; a resume
# that would drop them refused, an --init-from of the fixed factor starts them at it; infer may
# not move the base they learned from
refused "train --logn-learn without --logn-attn" "--logn-learn learns the slope of each NoPE head's log-n factor and log-n attention is off" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --logn-learn --out "$work/slope_no_base"
[ ! -e "$work/slope_no_base" ] && pass "the refused --logn-learn run left no --out" || fail "the refused --logn-learn run made its --out"
accepted "train --logn-learn --logn-attn 16 with NoPE layer 1" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --logn-attn 16 --logn-learn --out "$work/slope_ok"
grep -qF 'logn_learn\":true' "$work/slope_ok/ckpt_00000002.safetensors" && grep -qF 'blocks.1.attn.logn_slope' "$work/slope_ok/ckpt_00000002.safetensors" \
    && ! grep -qF 'blocks.0.attn.logn_slope' "$work/slope_ok/ckpt_00000002.safetensors" \
    && pass "--logn-learn is recorded in the checkpoint's config, its slopes as blocks.L.attn.logn_slope of the NoPE layer only" \
    || fail "--logn-learn or its slopes are not in the checkpoint"
refused "train --resume with the slopes turned off" "--logn-learn is off but the checkpoint's model learns its log-n slopes" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --logn-attn 16 --logn-learn=off --resume --out "$work/slope_ok"
accepted "--init-from the fixed factor's model into one that learns its slopes" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --logn-attn 16 --logn-learn --init-from "$work/logn_ok" --out "$work/slope_from"
grep -qF 'blocks.1.attn.logn_slope' "$work/slope_from/ckpt_00000002.safetensors" \
    && pass "--init-from of the fixed factor's model trains on with slopes" || fail "--init-from into --logn-learn wrote no slopes"
refused "--init-from a model with learned slopes into one without" "learns its log-n slopes and this run does not: pass --logn-learn" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --logn-attn 16 --init-from "$work/slope_ok" --out "$work/slope_drop"
refused "--init-from a model with learned slopes under another --logn-attn" "learned its log-n slopes from --logn-attn 16 and this run asks for 8: pass --logn-attn 16" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --logn-attn 8 --logn-learn --init-from "$work/slope_ok" --out "$work/slope_base"
[ ! -e "$work/slope_drop" ] && [ ! -e "$work/slope_base" ] && pass "the refused --init-from runs left no --out" || fail "a refused --init-from made its --out"
refused "infer --logn-attn on a model that learned its slopes" "learned their log-n slopes from position 16, which they need: drop --logn-attn" \
    ./build/infer --device cpu --checkpoint "$work/slope_ok" --prompt "In" --max-new 2 --logn-attn 64
accepted "infer on the CPU, a model with learned slopes (its own --logn-attn allowed)" \
    ./build/infer --device cpu --checkpoint "$work/slope_ok" --prompt "In" --max-new 2 --logn-attn 16
edited "$work/slope_edit" 10000 '"logn_learn":1,'
refused "infer, checkpoint with logn_learn 1" "logn_learn is not true or false" \
    ./build/infer --device cpu --checkpoint "$work/slope_edit" --prompt "In" --max-new 2
accepted "infer --load-cache with the --logn-attn it was prefilled with" ./build/infer --device cpu --checkpoint "$work/logn_ok" \
    --prompt " and" --max-new 2 --logn-attn 8 --load-cache "$work/logn8.kv"
edited "$work/logn_edit" 10000 '"nope_layers":[1],"logn_attn":1,'
refused "infer, checkpoint with logn_attn 1" "--logn-attn must be 0 (off) or a window length" \
    ./build/infer --device cpu --checkpoint "$work/logn_edit" --prompt "In" --max-new 2

# ---- the q/k convolution: NoPE layers only, a width in [2, 64], not under --cp; recorded; --init-from
# a model without it starts it at the identity
refused "train --qk-conv without NoPE layers" "--qk-conv acts on the queries and keys of NoPE layers and the model has none" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --qk-conv 4 --out "$work/conv_no_nope"
refused "train --qk-conv 1" "--qk-conv must be 0 (off) or a convolution's width in [2, 64] (got 1)" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --qk-conv 1 --out "$work/conv_one"
refused "train --qk-conv with --cp 2" "--qk-conv and --cp do not combine" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --qk-conv 4 --cp 2 --simulate-ranks 2 --out "$work/conv_cp"
[ ! -e "$work/conv_no_nope" ] && [ ! -e "$work/conv_one" ] && [ ! -e "$work/conv_cp" ] && pass "the refused --qk-conv runs left no --out" \
    || fail "a refused --qk-conv run made its --out"
accepted "train --qk-conv 4 with NoPE layer 1" tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --qk-conv 4 --out "$work/conv_ok"
grep -qF 'qk_conv\":4,' "$work/conv_ok/ckpt_00000002.safetensors" && grep -qF 'blocks.1.attn.qk_conv.weight' "$work/conv_ok/ckpt_00000002.safetensors" \
    && pass "--qk-conv is recorded in the checkpoint's config, its weights as blocks.1.attn.qk_conv.weight" \
    || fail "--qk-conv 4 or its weights are not in the checkpoint"
refused "train --resume with another --qk-conv" "--qk-conv is 3 but the checkpoint's model has 4" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --qk-conv 3 --resume --out "$work/conv_ok"
./build/train "${tiny[@]}" --nope-layers 0,1 --qk-conv 4 --init-from "$work/nope_ok" --out "$work/conv_from_nope" > "$work/conv_from_nope.log" 2>&1 \
    && grep -q 'the q/k convolutions from the identity' "$work/conv_from_nope.log" \
    && pass "--init-from a model without the convolution: its weights, the convolutions from the identity" \
    || fail "--init-from a model without the convolution: $(tail -1 "$work/conv_from_nope.log")"
refused "--init-from a model with another --qk-conv" "convolves its queries and keys over 4 tokens but this run asks for 3: pass --qk-conv 4" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --qk-conv 3 --init-from "$work/conv_ok" --out "$work/conv_other"
refused "train --qk-conv-layers naming a rotary layer" "--qk-conv-layers: layer 0 is not a NoPE layer (--nope-layers 1): the convolution acts on NoPE layers only" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 1 --qk-conv 4 --qk-conv-layers 0 --out "$work/conv_rotary"
refused "train --qk-conv-layers without --qk-conv" "--qk-conv-layers names the layers of a q/k convolution and --qk-conv is 0" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 0,1 --qk-conv-layers 1 --out "$work/conv_layers_alone"
accepted "train --qk-conv 4 --qk-conv-layers 1 of NoPE layers 0,1" tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 0,1 --qk-conv 4 \
    --qk-conv-layers 1 --out "$work/conv_part"
grep -qF 'blocks.1.attn.qk_conv.weight' "$work/conv_part/ckpt_00000002.safetensors" && ! grep -qF 'blocks.0.attn.qk_conv.weight' "$work/conv_part/ckpt_00000002.safetensors" \
    && grep -qF 'qk_conv_layers\":[1]' "$work/conv_part/ckpt_00000002.safetensors" \
    && pass "--qk-conv-layers 1: recorded, and only layer 1 has the convolution's weights" \
    || fail "--qk-conv-layers 1 is not recorded, or another layer has the convolution's weights"
refused "train --resume with the convolution in every NoPE layer" "layer 0 convolves its queries and keys (--qk-conv-layers) but does not in the checkpoint's model" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 0,1 --qk-conv 4 --resume --out "$work/conv_part"
refused "--init-from a model whose convolution this run drops" "convolves the queries and keys of layer 1 and this run does not: pass --qk-conv-layers 1" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers 0,1 --qk-conv 4 --qk-conv-layers 0 --init-from "$work/conv_part" --out "$work/conv_drop"
./build/train "${tiny[@]}" --nope-layers 0,1 --qk-conv 4 --init-from "$work/conv_part" --out "$work/conv_grow" > "$work/conv_grow.log" 2>&1 \
    && grep -q 'the q/k convolutions from the identity' "$work/conv_grow.log" \
    && pass "--init-from a model convolving layer 1 into one convolving 0 and 1: layer 0's from the identity" \
    || fail "--init-from a model convolving layer 1 into 0 and 1: $(tail -1 "$work/conv_grow.log")"
edited "$work/conv_edit" 10000 '"nope_layers":[1],"qk_conv":70,'
refused "infer, checkpoint with qk_conv 70" "--qk-conv must be 0 (off) or a convolution's width in [2, 64] (got 70)" \
    ./build/infer --device cpu --checkpoint "$work/conv_edit" --prompt "In" --max-new 2

# ---- attention sinks (--attn-sink): recorded with their tensors; a resume or --init-from that
# would change them, and a config whose attn_sink is not true or false, refused
accepted "train --attn-sink" tests/last_wins.sh ./build/train "${tiny[@]}" --attn-sink --out "$work/sink_ok"
grep -qF 'attn_sink\":true' "$work/sink_ok/ckpt_00000002.safetensors" && grep -qF 'blocks.1.attn.sink' "$work/sink_ok/ckpt_00000002.safetensors" \
    && pass "--attn-sink is recorded in the checkpoint's config, its logits as blocks.L.attn.sink" \
    || fail "--attn-sink or its logits are not in the checkpoint"
refused "train --resume with the sinks turned off" "--attn-sink is off but the checkpoint's model has sinks" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --attn-sink=off --resume --out "$work/sink_ok"
refused "--init-from a model with sinks into one without" "has attention sinks and this run does not: pass --attn-sink" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --init-from "$work/sink_ok" --out "$work/sink_drop"
[ ! -e "$work/sink_drop" ] && pass "the refused --init-from left no --out" || fail "the refused --init-from made its --out"
edited "$work/sink_edit" 10000 '"attn_sink":1,'
refused "infer, checkpoint with attn_sink 1" "attn_sink is not true or false" \
    ./build/infer --device cpu --checkpoint "$work/sink_edit" --prompt "In" --max-new 2
edited "$work/sink_missing" 10000 '"attn_sink":true,'
refused "infer, checkpoint whose config has sinks and whose tensors do not" "blocks.0.attn.sink" \
    ./build/infer --device cpu --checkpoint "$work/sink_missing" --prompt "In" --max-new 2

# ---- a pointer (--pointer): recorded with its tensors; a resume or --init-from that would change
# it refused; infer on the CPU runs it (generation and scoring through the KV cache), a cache file
# does not hold its keys
accepted "train --pointer" tests/last_wins.sh ./build/train "${tiny[@]}" --pointer --out "$work/ptr_ok"
grep -qF 'pointer\":true' "$work/ptr_ok/ckpt_00000002.safetensors" && grep -qF 'ptr.gate.bias' "$work/ptr_ok/ckpt_00000002.safetensors" \
    && pass "--pointer is recorded in the checkpoint's config, its weights as ptr.*" || fail "--pointer or its weights are not in the checkpoint"
refused "train --resume with the pointer turned off" "--pointer is off but the checkpoint's model has a pointer" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --pointer=off --resume --out "$work/ptr_ok"
refused "--init-from a model with a pointer into one without" "has a pointer and this run does not: pass --pointer" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --init-from "$work/ptr_ok" --out "$work/ptr_drop"
accepted "infer --device cpu, a checkpoint with a pointer" ./build/infer --device cpu --checkpoint "$work/ptr_ok" --prompt "In" --max-new 4
refused "infer --save-cache, a checkpoint with a pointer" "a KV cache file does not hold a pointer's keys" \
    ./build/infer --device cpu --checkpoint "$work/ptr_ok" --prompt "In" --max-new 2 --save-cache "$work/ptr.kv"
[ ! -e "$work/ptr.kv" ] && pass "the refused --save-cache wrote no file" || fail "the refused --save-cache left $work/ptr.kv"
edited "$work/ptr_edit" 10000 '"pointer":1,'
refused "infer, checkpoint with pointer 1" "pointer is not true or false" \
    ./build/infer --device cpu --checkpoint "$work/ptr_edit" --prompt "In" --max-new 2

# ---- --layer-pattern entries that would change nothing, name a layer twice, or are malformed
refused "train --layer-pattern 0:dense in an all-dense model" "--layer-pattern: layer 0 is dense already (--attn dense), so 0:dense changes nothing" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --layer-pattern 0:dense --out "$work/dense_dense"
refused "train --layer-pattern naming one layer twice" "--layer-pattern: layer 1 is given twice" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --attn block-sparse --block 8 --window 16 --layer-pattern 1:dilated,1:dense \
    --segments 16,32 --dilations 1,2 --out "$work/dense_dilated"
refused "train --layer-pattern without a pattern" "--layer-pattern: '1' is not LAYER:PATTERN" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --attn dilated --segments 16,32 --dilations 1,2 --layer-pattern 1 --out "$work/lp_bare"
refused "train --layer-pattern with a name the registry lacks" "--layer-pattern must be dense, dilated, block-sparse or fixed (got 'sparse')" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --layer-pattern 1:sparse --out "$work/lp_unknown"
refused "train --layer-pattern past the last layer" "--layer-pattern: layer 2 does not exist (the model has 2 layers, 0 to 1)" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --attn dilated --segments 16,32 --dilations 1,2 --layer-pattern 2:dense --out "$work/lp_past"
accepted "train --layer-pattern 1:dense in a dilated model" tests/last_wins.sh ./build/train "${tiny[@]}" --attn dilated --segments 16,32 --dilations 1,2 \
    --layer-pattern 1:dense --out "$work/dense_in_dilated"
# The flags that gave one pattern's layers are gone: refused with the entries that replace them.
refused "train --dilated-layers (gone)" "error: --dilated-layers is gone: use --layer-pattern 1:dilated" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --dilated-layers 1 --segments 16,32 --dilations 1,2 --out "$work/gone_dilated"
refused "train --dense-layers=0,1 (gone)" "error: --dense-layers is gone: use --layer-pattern 0:dense,1:dense" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --attn dilated --segments 16,32 --dilations 1,2 --dense-layers=0,1 --out "$work/gone_dense"
refused "train --fixed-layers without a value (gone)" "error: --fixed-layers is gone: use --layer-pattern LAYER:fixed,... (e.g. 3:fixed,7:fixed)" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/gone_fixed" --fixed-layers
refused "train --sparse-layers (no pattern of that name: an unknown flag)" "unknown flag --sparse-layers" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --sparse-layers 1 --out "$work/gone_sparse"

# ---- integer lists: digits and an optional '-' only (strtol alone took ' 1' and '+1', not '1 ')
refused "train --nope-layers ' 1'" "--nope-layers expects a comma-separated list of integers" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers ' 1' --out "$work/nope_space"
refused "train --nope-layers +1" "--nope-layers expects a comma-separated list of integers" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --nope-layers +1 --out "$work/nope_plus"
refused "train --segments '16, 32'" "--segments expects a comma-separated list of integers" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --attn dilated --segments '16, 32' --dilations 1,2 --out "$work/segments_space"
accepted "train --segments 16,32" tests/last_wins.sh ./build/train "${tiny[@]}" --attn dilated --segments 16,32 --dilations 1,2 --out "$work/segments_ok"

# ---- --mix of the corpus's own validation shard (the validation loss would measure training data)
refused "train --mix the corpus's val.bin" "is the corpus's validation shard" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$corpus/val.bin:0.5" --out "$work/mix_val"
ln -sf "$PWD/$corpus/val.bin" "$work/val_link.bin"
refused "train --mix a link to the corpus's val.bin" "is the corpus's validation shard" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$work/val_link.bin:0.5" --out "$work/mix_val_link"
cp "$corpus/val.bin" "$work/val_copy.bin"
accepted "train --mix a copy of it (another file: the check is the file's identity, not its name)" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$work/val_copy.bin:0.5" --out "$work/mix_copy"

# ---- infer: flags of one mode given in another
ppl=("./build/infer" --device cpu --checkpoint "$base" --perplexity "$corpus/val.bin" --ctx 32 --windows fresh)
refused "infer --perplexity with --prompt" "--prompt is for generation, not --perplexity" "${ppl[@]}" --prompt "In the"
refused "infer --perplexity with --max-new" "--max-new is for generation, not --perplexity" "${ppl[@]}" --max-new 5
refused "infer --perplexity with --seed" "--seed is for generation, not --perplexity" "${ppl[@]}" --seed 4
accepted "infer --perplexity alone" "${ppl[@]}"
./build/data_tool tasks --data "$corpus" --task passkey --lengths 256 --depths 0.5 --out "$work/t.jsonl" > /dev/null 2>&1 \
    || fail "data_tool tasks for the --tasks checks"
refused "infer --tasks with --temperature" "--temperature is for generation, not --tasks" \
    ./build/infer --device cpu --checkpoint "$base" --tasks "$work/t.jsonl" --temperature 0.5
accepted "infer --tasks alone" ./build/infer --device cpu --checkpoint "$base" --tasks "$work/t.jsonl" --truncate
gen=("./build/infer" --device cpu --checkpoint "$base" --prompt "In the" --max-new 2)
refused "infer --temperature 0 with --seed" "--seed has no effect with --temperature 0" "${gen[@]}" --temperature 0 --seed 3
refused "infer --temperature 0 with --top-k" "--top-k has no effect with --temperature 0" "${gen[@]}" --temperature 0 --top-k 5
refused "infer --temperature 0 with --top-p" "--top-p has no effect with --temperature 0" "${gen[@]}" --temperature 0 --top-p 0.5
accepted "infer --temperature 0" "${gen[@]}" --temperature 0
accepted "infer --seed with sampling" "${gen[@]}" --seed 3 --top-k 5 --top-p 0.5
refused "infer generation with --windows" "--windows is for --perplexity" "${gen[@]}" --windows sliding
refused "infer generation with --task-batch" "--task-batch is for --tasks" "${gen[@]}" --task-batch 3

# ---- data_tool tasks: lists that repeat an entry, --needles where no item has several
tasks=(./build/data_tool tasks --data "$corpus" --depths 0.5)
cp "$work/t.jsonl" "$work/keep.jsonl"  # an earlier task file, which a new one may replace
refused "data_tool tasks --lengths 256,256" "--lengths lists entry 1 again as entry 2" "${tasks[@]}" --task passkey --lengths 256,256 --out "$work/keep.jsonl"
cmp -s "$work/t.jsonl" "$work/keep.jsonl" && pass "the refused tasks left --out as it was" || fail "the refused tasks changed --out"
refused "data_tool tasks --lengths 1K,1024" "--lengths lists entry 1 again as entry 2" "${tasks[@]}" --task passkey --lengths 1K,1024 --out "$work/x.jsonl"
refused "data_tool tasks --task passkey,passkey" "--task lists entry 1 again as entry 2" "${tasks[@]}" --task passkey,passkey --lengths 256 --out "$work/x.jsonl"
refused "data_tool tasks --depths 0.5,0.5" "--depths lists entry 1 again as entry 2" tests/last_wins.sh "${tasks[@]}" --task passkey --lengths 256 --depths 0.5,0.5 --out "$work/x.jsonl"
refused "data_tool tasks --needles with passkey only" "--needles has no effect on passkey and quote items" "${tasks[@]}" --task passkey --lengths 256 --needles 3 --out "$work/x.jsonl"
accepted "data_tool tasks --needles with multikey" "${tasks[@]}" --task passkey,multikey --lengths 512,1K --needles 3 --out "$work/ok.jsonl"
refused "data_tool tasks --answer-words with passkey only" "--answer-words has no effect on needle items" "${tasks[@]}" --task passkey --lengths 256 --answer-words 3 --out "$work/x.jsonl"
refused "data_tool tasks --answer-words 0" "--answer-words" "${tasks[@]}" --task quote --lengths 256 --answer-words 0 --out "$work/x.jsonl"

# ---- one rule per value: each refusal beside a control that runs
refused "train --weight-decay 1e30" "--weight-decay must be in [0, 10] (got 1e+30)" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --weight-decay 1e30 --out "$work/wd_huge"
accepted "train --weight-decay 0.5" tests/last_wins.sh ./build/train "${tiny[@]}" --weight-decay 0.5 --out "$work/wd_ok"
refused "train --schedule 4294967360x1@1 (once wrapped to 64)" "(got '4294967360x1@1')" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --schedule 4294967360x1@1 --out "$work/sched_wrap"
accepted "train --schedule 64x1@1" tests/last_wins.sh ./build/train "${tiny[@]}" --schedule 64x1@1 --out "$work/sched_ok"
# A stage of the shape before it (--seq-len 32, --batch 2 here) changes nothing asked for.
refused "train --schedule 32x2@1: stage 0's shape again" "stage from step 1 has the shape of the stage before it (windows of 32 tokens, 2 per step)" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --steps 3 --schedule 32x2@1 --out "$work/sched_same"
refused "train --schedule 64x1@1,64x1@2: a stage repeating the one before" "stage from step 2 has the shape of the stage before it" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --steps 3 --schedule 64x1@1,64x1@2 --out "$work/sched_same"
[ ! -e "$work/sched_same" ] && pass "the refused schedules left no --out" || fail "a refused --schedule made $work/sched_same"
accepted "train --schedule 32x1@1 (the batch changes)" tests/last_wins.sh ./build/train "${tiny[@]}" --schedule 32x1@1 --out "$work/sched_batch"
# --time-limit: a number a float cannot hold is named as too small; past a year, 0 is the way to say none.
refused "train --time-limit 1e-45" "--time-limit 1e-45 is too small for a float (the smallest is 1.2e-38): give 0 or a larger number" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --time-limit 1e-45 --out "$work/time_tiny"
refused "train --time-limit 1e30" "--time-limit must be 0 (no limit) or a number of minutes up to 525600 (a year) (got 1e+30)" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --time-limit 1e30 --out "$work/time_huge"
[ ! -e "$work/time_tiny" ] && [ ! -e "$work/time_huge" ] && pass "the refused --time-limit runs left no --out" || fail "a refused --time-limit run made its --out"
accepted "train --time-limit 0 and 60" bash -c "tests/last_wins.sh ./build/train ${tiny[*]} --time-limit 0 --out $work/time_none && \
    tests/last_wins.sh ./build/train ${tiny[*]} --time-limit 60 --out $work/time_hour"
refused "train --seq-len 4294967328 (once 32 with a wrap)" "--seq-len expects an integer in [-2147483647, 2147483647], got '4294967328'" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --seq-len 4294967328 --out "$work/seq_wrap"
refused "train --heads given twice" "flag --heads is given twice: give it once" \
    ./build/train "${tiny[@]}" --heads 1 --out "$work/twice"
[ ! -e "$work/twice" ] && pass "the refused run left no --out" || fail "the refused run made $work/twice"
refused "train --mix the corpus's own train.bin" "is the corpus's own train.bin" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$corpus/train.bin:0.5" --out "$work/mix_train"
refused "train --mix one shard twice" "is given twice in one stage" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$work/val_copy.bin:0.25,$work/val_copy.bin:0.25" --out "$work/mix_twice"
refused "train --mix a fraction of 1e-300" "a fraction in [1e-06, 1]" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$work/val_copy.bin:1e-300" --out "$work/mix_tiny"
accepted "train --mix a copy of val.bin at 0.25" tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$work/val_copy.bin:0.25" --out "$work/mix_ok"
refused "data_tool tasks --lengths 256, (a trailing comma)" "--lengths '256,': an empty item" \
    ./build/data_tool tasks --data "$corpus" --task passkey --lengths 256, --out "$work/x.jsonl"
refused "data_tool tasks --lengths +256" "--lengths '+256' must be an integer" \
    ./build/data_tool tasks --data "$corpus" --task passkey --lengths +256 --out "$work/x.jsonl"
accepted "data_tool tasks --lengths 256" ./build/data_tool tasks --data "$corpus" --task passkey --lengths 256 --depths 0.5 --out "$work/len_ok.jsonl"
# A checkpoint config edited to a head dim train refuses, or to a key this build does not read.
edited "$work/cfg_plain" 10000 ''
accepted "infer, the checkpoint's config rewritten as it was" ./build/infer --device cpu --checkpoint "$work/cfg_plain" --prompt "In" --max-new 2
edited "$work/cfg_key" 10000 '"n_kv_head":1,'
refused "infer, checkpoint config with an unknown key" 'unknown key "n_kv_head"' \
    ./build/infer --device cpu --checkpoint "$work/cfg_key" --prompt "In" --max-new 2
cfg_one_head=$cfg cfg=${cfg/'"n_head":1'/'"n_head":2'}
edited "$work/cfg_d32" 10000 ''
cfg=$cfg_one_head
refused "infer, checkpoint config edited to head dim 32" "head dim --width/--heads = 64/2 = 32 is not supported" \
    ./build/infer --device cpu --checkpoint "$work/cfg_d32" --prompt "In" --max-new 2
# Task files: an answer past the cap, a CR in a task name (the CSV's field).
item() { printf '{"task":"%s","context":"The pass key is 12.","question":"The pass key is","answer":"%s","length":9,"depth":0.5}\n' "$1" "$2"; }
item passkey 12 > "$work/task_ok.jsonl"
item passkey "$(printf '7%.0s' $(seq 300))" > "$work/task_long.jsonl"
item 'pass\rkey' 12 > "$work/task_cr.jsonl"
accepted "infer --tasks, an item with a short answer" ./build/infer --device cpu --checkpoint "$base" --tasks "$work/task_ok.jsonl"
refused "infer --tasks, an answer of 300 characters" "task_long.jsonl line 1: the answer has 300 characters, more than the 256" \
    ./build/infer --device cpu --checkpoint "$base" --tasks "$work/task_long.jsonl"
refused "infer --tasks, a CR in a task name" "task_cr.jsonl line 1: the task name may not hold a comma, quote, newline or carriage return" \
    ./build/infer --device cpu --checkpoint "$base" --tasks "$work/task_cr.jsonl"

# ---- attention_tool: a flag of one device given to the other
if [ -x build/attention_tool ]; then
    at=(./build/attention_tool --device cpu --B 1 --N 64 --H 1 --D 64)
    refused "attention_tool --device cpu --backend cudnn" "--backend has no effect with --device cpu" "${at[@]}" --backend cudnn
    refused "attention_tool --device cpu --reps 3" "--reps has no effect with --device cpu" "${at[@]}" --reps 3
    refused "attention_tool --device cuda --max-cpu-pairs" "--max-cpu-pairs has no effect with --device cuda" \
        ./build/attention_tool --device cuda --dtype bf16 --N 64 --H 1 --max-cpu-pairs 1e9
    accepted "attention_tool --device cpu --max-cpu-pairs" "${at[@]}" --max-cpu-pairs 1e9
else
    fail "build/attention_tool not built"
fi

summary
