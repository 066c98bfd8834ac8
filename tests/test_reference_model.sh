#!/usr/bin/env bash
# scripts/reference_model.py (numpy, float64, every hyperparameter from the checkpoint's metadata)
# against `infer --device cpu --logits-out` on tiny checkpoints of every attention pattern (dense,
# dilated, block-sparse with every builder, a per-head layout file, fixed, NoPE with log-n, a
# q/k convolution, attention sinks, learned log-n slopes, a per-layer list), to 1e-4 of the logits' scale over every position of a prompt longer than the
# patterns' segments, strides and blocks. Deliberate mistakes in the reference (--break) must be
# seen: each pattern's mask, the LayerNorm epsilon, the rotary pairing and layer, log-n. The
# checkpoint's "forward" record: one that contradicts this build is refused in one line, one
# without it (an older checkpoint) still runs; --logits-out's bad uses are refused.
# Usage: tests/test_reference_model.sh [CORPUS_DIR]   Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
corpus=${1:-build/test_corpus}
work=build/test_reference_model
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
need_programs build/train build/infer
need_corpus "$corpus"
# Debian's python3-numpy (scripts/install_deps.sh): the first python3 on PATH may be another one.
py=""
for p in python3 /usr/bin/python3; do
    if "$p" -c "import numpy" 2> /dev/null; then py=$p; break; fi
done
[ -n "$py" ] || bail "numpy is missing: install Debian's python3-numpy (scripts/install_deps.sh; make test installs it)"

# A prompt of about 80 tokens: longer than every segment, stride and block below.
prompt="And it came to pass, when the men of the city rose up early in the morning, that they went out to the \
field to gather the harvest, and the children of the land followed them with songs, for the rain had come in its \
season and the granaries were full; then the elders sat in the gate and spoke of the years that were past."

tiny=(--data "$corpus" --width 128 --heads 2 --seq-len 64 --batch 2 --steps 3 --warmup 1 --lr 3e-3 --val-every 0 --val-batches 1
      --ckpt-every 0 --sample-tokens 0 --device cpu)
# name, train flags...: a checkpoint in $work/NAME, its prompt's logits from infer in $work/NAME.logits.
make_case() {
    local name=$1; shift
    if ! tests/last_wins.sh build/train "${tiny[@]}" "$@" --out "$work/$name" > "$work/$name.train.log" 2>&1; then
        fail "$name: training the tiny model: $(tail -1 "$work/$name.train.log")"; return 1
    fi
    if ! build/infer --checkpoint "$work/$name" --device cpu --prompt "$prompt" --logits-out "$work/$name.logits" \
            > "$work/$name.infer.log" 2>&1; then
        fail "$name: infer --logits-out: $(tail -1 "$work/$name.infer.log")"; return 1
    fi
}
ckpt() { echo "$work/$1/ckpt_00000003.safetensors"; }
# name, reference flags...: the reference matches infer within 1e-4.
matches() {
    local name=$1; shift
    local out
    if out=$("$py" scripts/reference_model.py "$(ckpt "$name")" --compare "$work/$name.logits" "$@" 2>&1); then
        pass "$name: the reference matches infer: $out"
    else
        fail "$name: the reference differs from infer: $out"
    fi
}
# name, what is broken: the reference computed wrongly differs from infer by more than 1e-4.
sees() {
    local name=$1 broken=$2 out code rel
    out=$("$py" scripts/reference_model.py "$(ckpt "$name")" --compare "$work/$name.logits" --break "$broken" 2>&1); code=$?
    rel=$(sed -n 's/.*relative \([0-9.e+-]*\) .*/\1/p' <<< "$out")
    if [ $code -eq 1 ] && [ -n "$rel" ] && awk -v r="$rel" 'BEGIN { exit !(r > 1e-4) }'; then
        pass "$name: a reference with --break $broken differs from infer by $rel"
    else
        fail "$name: a reference with --break $broken is not seen (exit $code): $out"
    fi
}

# 1. Every pattern, with its mask shown to matter at this prompt's length.
make_case dense --layers 2 && { matches dense; sees dense eps; sees dense rotary; sees dense pairing; }
make_case dilated --layers 2 --attn dilated --segments 16,32,128 --dilations 1,2,4 \
    && { matches dilated; sees dilated mask; }
make_case block_sparse --layers 2 --attn block-sparse --block 8 --window 12 --global 3 --dilated-blocks 3,40 \
    --random-blocks 2,11 && { matches block_sparse; sees block_sparse mask; }
# A per-head layout file alone: query blocks past it (and head 1's block 2) keep nothing, empty rows.
printf '0/0: 0\n0/1: 0 1\n0/2: 1 2\n0/3: 0 3\n1/0: 0\n1/1: 1\n1/2:\n1/3: 2 3\n' > "$work/layout.txt"
make_case layout --layers 2 --attn block-sparse --block 16 --layout-file "$work/layout.txt" \
    && { matches layout; sees layout mask; }
make_case fixed --layers 2 --attn fixed --stride 16 --summary 4 && { matches fixed; sees fixed mask; }
make_case nope_logn --layers 2 --nope-layers 1 --logn-attn 4 && { matches nope_logn; sees nope_logn logn; }
make_case hybrid --layers 4 --attn dilated,block-sparse,fixed,dense --segments 16,64 --dilations 1,2 --block 8 --window 16 \
    --stride 16 --summary 4 --nope-layers 2,3 --logn-attn 32 && { matches hybrid; sees hybrid mask; }
# The q/k convolution, its taps in the file's order and q's apart from k's (reversed, swapped: seen);
# a learning rate that moves the taps well off the identity in 3 steps, so that they count.
make_case qkconv --layers 2 --nope-layers 1 --logn-attn 32 --qk-conv 4 --lr 3e-2 \
    && { matches qkconv; sees qkconv qkconv; sees qkconv qkswap; }
# The convolution in one of two NoPE layers (--qk-conv-layers): the reference reads which from the file.
make_case qkconvpart --layers 3 --nope-layers 1,2 --qk-conv 4 --qk-conv-layers 2 --lr 3e-2 \
    && { matches qkconvpart; sees qkconvpart qkconv; }
# Attention sinks (one more score per head, of value zero), beside a dilated layer: left out, seen.
make_case sink --layers 2 --attn dilated,dense --segments 16,32 --dilations 1,2 --nope-layers 1 --attn-sink --lr 3e-2 \
    && { matches sink; sees sink sink; }
# Learned log-n slopes (one per head of the NoPE layer), moved well off their start by a high rate:
# the fixed factor instead of them is seen.
make_case slope --layers 2 --nope-layers 1 --logn-attn 4 --logn-learn --lr 3e-2 \
    && { matches slope; sees slope slope; sees slope logn; }
# scripts/logn_slopes.py reads what the slopes learned: a row per head of the NoPE layer only (2
# heads of layer 1), moved off their start; a model without learned slopes is named and exits 1.
if out=$("$py" scripts/logn_slopes.py "$work/slope" 2>&1) && [ "$(grep -cE '^\| 1 \| [01] \| ' <<< "$out")" -eq 2 ] \
        && [ "$(grep -cE '^\| [0-9]+ \| [0-9]+ \| ' <<< "$out")" -eq 2 ] && ! grep -qE '^\| 1 \| [01] \| [0-9.]+ \| 1\.00 \|' <<< "$out"; then
    pass "logn_slopes.py: the NoPE layer's two heads, moved off their start"
else
    fail "logn_slopes.py on the slope model: $out"
fi
out=$("$py" scripts/logn_slopes.py "$work/nope_logn" 2>&1) && fail "logn_slopes.py on a model without slopes exited 0: $out" \
    || { grep -q 'no learned log-n slopes' <<< "$out" && pass "logn_slopes.py: a model without learned slopes is named, exit 1" \
         || fail "logn_slopes.py without slopes: $out"; }
# Prefilled in chunks of 7 tokens (the convolution's rows carried from chunk to chunk), the cache
# gives the same logits.
for name in hybrid qkconv sink slope; do
    if build/infer --checkpoint "$work/$name" --device cpu --prompt "$prompt" --chunk 7 --logits-out "$work/${name}7.logits" \
            > "$work/${name}7.log" 2>&1; then
        out=$("$py" scripts/reference_model.py "$(ckpt $name)" --compare "$work/${name}7.logits" 2>&1) \
            && pass "$name, --chunk 7: the reference matches infer: $out" || fail "$name, --chunk 7: $out"
    else
        fail "$name, --chunk 7: $(tail -1 "$work/${name}7.log")"
    fi
done
grep -q '^wrote the logits of [0-9]* positions' "$work/dense.infer.log" \
    && n=$(sed -n 's/^wrote the logits of \([0-9]*\) positions.*/\1/p' "$work/dense.infer.log") && [ "$n" -gt 64 ] \
    && pass "the prompt is $n tokens, longer than every segment, stride and block" \
    || fail "the prompt's length: $(cat "$work/dense.infer.log")"

# 2. The checkpoint's "forward" record: this build's values, or a one-line refusal.
"$py" - "$(ckpt hybrid)" <<'EOF' && pass "the forward record lists the epsilon, GELU, rotary, head, scale and each layer's bases" \
    || fail "the forward record of the hybrid model is not what this build computes"
import json, struct, sys
blob = open(sys.argv[1], "rb").read()
meta = json.loads(blob[8:8 + struct.unpack("<Q", blob[:8])[0]])["__metadata__"]
f = json.loads(meta["forward"])
assert f == {"layernorm_eps": 1e-5, "activation": "gelu_tanh", "rotary": "half_split", "lm_head": "tied_to_wte",
             "attn_scale": 0.125, "layers": [{"rotary_base": 10000, "logn_base": 0}, {"rotary_base": 10000, "logn_base": 0},
                                             {"rotary_base": 0, "logn_base": 32}, {"rotary_base": 0, "logn_base": 32}]}, f
assert [p["kind"] for p in json.loads(meta["config"])["layer_attn"]] == ["dilated", "block-sparse", "fixed", "dense"]
EOF
record=$("$py" -c "import json, struct, sys; b = open(sys.argv[1], 'rb').read(); \
print(json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]])['__metadata__']['forward'])" "$(ckpt dense)")
# field edit, what the refusal names
edited() {
    local name=$1 json=$2 want=$3
    python3 tests/edit_checkpoint.py "$(ckpt dense)" "$work/edited.safetensors" meta forward "$("$py" -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$json")" \
        || { fail "editing the record: $name"; return; }
    expect_error -F "refused: $name" "$want" build/infer --checkpoint "$work/edited.safetensors" --device cpu --prompt "And" \
        --logits-out "$work/edited.logits"
    [ -e "$work/edited.logits" ] && fail "refused: $name, yet $work/edited.logits was written"
}
edited "another epsilon" "${record/1e-05/1e-06}" 'differs from what this build computes (layernorm_eps is 1e-06, this build computes 1e-05)'
edited "interleaved rotary" "${record/half_split/interleaved}" 'rotary is "interleaved", this build computes "half_split"'
edited "another rotary base in layer 1" "${record/\{\"rotary_base\":10000,\"logn_base\":0\}\]/{\"rotary_base\":500000,\"logn_base\":0\}]}" \
    'layers[1].rotary_base is 500000, this build computes 10000'
edited "an untied head" "${record/tied_to_wte/separate}" 'lm_head is "separate"'
edited "a field this build does not know" "${record/\{/{\"norm\":\"rms\",}" 'it has a field "norm" this build does not know'
edited "a layer missing" "${record/,\{\"rotary_base\":10000,\"logn_base\":0\}\]/]}" 'layers has 1 entries, the model has 2'
edited "not JSON" "{\"layernorm_eps\":" 'its "forward" record differs from what this build computes (it is not JSON'
# The config edited to NoPE in layer 1, the record left as it was: the two disagree.
config=$("$py" -c "import json, struct, sys; b = open(sys.argv[1], 'rb').read(); \
c = json.loads(json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]])['__metadata__']['config']); c['nope_layers'] = [1]; \
print(json.dumps(json.dumps(c)))" "$(ckpt dense)")
python3 tests/edit_checkpoint.py "$(ckpt dense)" "$work/nope_edited.safetensors" meta config "$config" \
    && expect_error -F "refused: a config edited to NoPE, its record not" 'layers[1].rotary_base is 10000, this build computes 0' \
        build/infer --checkpoint "$work/nope_edited.safetensors" --device cpu --prompt "And" --max-new 2
# Controls: the record as written loads; a checkpoint without it (written before it) runs as before.
python3 tests/edit_checkpoint.py "$(ckpt dense)" "$work/same.safetensors" meta forward "$("$py" -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$record")" \
    && accepted "the record as train wrote it" build/infer --checkpoint "$work/same.safetensors" --device cpu --prompt "And" --max-new 2
python3 tests/edit_checkpoint.py "$(ckpt dense)" "$work/old.safetensors" drop_meta forward || fail "writing a checkpoint without the record"
if build/infer --checkpoint "$work/old.safetensors" --device cpu --prompt "$prompt" --logits-out "$work/old.logits" \
        > "$work/old.log" 2>&1; then
    out=$("$py" scripts/reference_model.py "$work/old.safetensors" --compare "$work/old.logits" 2>&1) \
        && grep -q 'no "forward" record' <<< "$out" \
        && pass "a checkpoint without the record: infer runs it, the reference takes the values it implies and matches" \
        || fail "a checkpoint without the record, in the reference: $out"
else
    fail "a checkpoint without the record: $(tail -1 "$work/old.log")"
fi

# 3. --logits-out: one prompt from scratch; the other modes and the sampling flags refused.
I=(build/infer --checkpoint "$work/dense" --device cpu)
refused "--logits-out with --perplexity" "--logits-out reads one prompt from scratch" \
    "${I[@]}" --perplexity "$corpus/val.bin" --logits-out "$work/x.logits"
refused "--logits-out with --max-new" "--max-new is for generation, not --logits-out" \
    "${I[@]}" --prompt "And" --max-new 5 --logits-out "$work/x.logits"
refused "--logits-out over the checkpoint" "is a checkpoint" "${I[@]}" --prompt "And" --logits-out "$(ckpt dense)"
[ ! -e "$work/x.logits" ] && pass "nothing written by the refused runs" || fail "a refused run wrote $work/x.logits"
accepted "--logits-out over its own earlier file" "${I[@]}" --prompt "And" --logits-out "$work/dense.logits"
summary
