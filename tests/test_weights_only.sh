#!/usr/bin/env bash
# scripts/weights_only.py on a tiny training checkpoint (NoPE layer, learned log-n slopes, sinks):
# the parameters alone, a third of the file, read by infer to the same logits bit for bit and by
# train --init-from; train --resume refuses it (no training state). Bad input: no checkpoint, a
# file that is not one, a folder without any, a tensor past the data: one line, exit 1, OUT not written.
# Usage: tests/test_weights_only.sh [CORPUS_DIR]   Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
corpus=${1:-build/test_corpus}
work=build/test_weights_only
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
need_programs build/train build/infer
need_corpus "$corpus"

tiny=(--device cpu --data "$corpus" --layers 2 --width 64 --heads 1 --seq-len 32 --batch 2 --warmup 1 --val-every 0
      --val-batches 1 --log-every 1 --sample-tokens 0 --nope-layers 1 --logn-attn 16 --logn-learn --attn-sink)
tests/last_wins.sh build/train "${tiny[@]}" --steps 3 --ckpt-every 3 --out "$work/run" > "$work/train.log" 2>&1 \
    || bail "training the tiny model: $(tail -1 "$work/train.log")"
ck=$work/run/ckpt_00000003.safetensors

if python3 scripts/weights_only.py "$work/run" "$work/w.safetensors" > "$work/w.log" 2>&1; then
    full=$(stat -c %s "$ck") part=$(stat -c %s "$work/w.safetensors")
    [ $((part * 5)) -lt $((full * 2)) ] && ! grep -q 'optim\.' "$work/w.safetensors" && ! grep -qF '"step"' "$work/w.safetensors" \
        && grep -qF 'blocks.1.attn.logn_slope' "$work/w.safetensors" \
        && pass "the weights alone: $part of $full bytes, no AdamW moments or training state, the slopes kept" \
        || fail "the weights-only file: $part of $full bytes; $(cat "$work/w.log")"
else
    fail "weights_only.py on a run's folder: $(cat "$work/w.log")"
fi
# infer's logits from both files: the same tensors, bit for bit (the files differ in the checkpoint path they record).
for f in "$ck" "$work/w.safetensors"; do
    build/infer --device cpu --checkpoint "$f" --prompt "In the beginning" --logits-out "$f.logits" > /dev/null 2>&1 \
        || fail "infer --logits-out on $f"
done
python3 - "$ck.logits" "$work/w.safetensors.logits" <<'PY' && pass "infer: the same logits from the weights alone, bit for bit" || fail "infer's logits differ between the checkpoint and its weights"
import json, struct, sys
def tensors(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__")
    return {k: blob[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in header.items()}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
sys.exit(0 if a == b and "logits" in a else 1)
PY
accepted "train --init-from the weights alone" tests/last_wins.sh build/train "${tiny[@]}" --steps 1 --ckpt-every 1 \
    --init-from "$work/w.safetensors" --out "$work/from"
mkdir -p "$work/resume" && cp "$work/w.safetensors" "$work/resume/ckpt_00000003.safetensors"
refused "train --resume from the weights alone" "holds no training state" \
    tests/last_wins.sh build/train "${tiny[@]}" --steps 5 --ckpt-every 5 --resume --out "$work/resume"

# Bad input: one line naming the cause, exit 1, OUT not written.
echo "not a checkpoint" > "$work/text.safetensors"
mkdir -p "$work/empty"
python3 - "$work/table.safetensors" <<'PY'
import json, struct, sys
meta = {"format": "longnet-gpt/1", "config": "{}", "forward": "{}", "tokenizer": ""}
text = json.dumps({"__metadata__": meta, "wte": {"dtype": "F32", "shape": [2], "data_offsets": [0, 99]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(text)) + text + bytes(8))
PY
for spec in "$work/none.safetensors|is not a checkpoint train wrote" "$work/text.safetensors|is not a checkpoint train wrote" \
            "$work/empty|holds no ckpt_\*.safetensors" "$work/table.safetensors|has a corrupt tensor table"; do
    IFS='|' read -r src want <<< "$spec"
    out=$(python3 scripts/weights_only.py "$src" "$work/bad.safetensors" 2>&1)
    rc=$?
    [ $rc -eq 1 ] && [ "$(wc -l <<< "$out")" -eq 1 ] && grep -q "^error: .*$want" <<< "$out" && [ ! -e "$work/bad.safetensors" ] \
        && pass "refused: weights_only.py $(basename "$src") -> $out" || fail "weights_only.py $(basename "$src"): exit $rc, $out"
done
finish
