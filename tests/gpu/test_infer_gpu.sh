#!/usr/bin/env bash
# infer on the GPU through the KV cache (what tests/test_train_cli.sh checks on the CPU): a small
# dilated model trained for a few steps reads a context of ~20K tokens in chunks that cross its
# segments, saves the cache, and three prompts continued at once (--prompts-file) give each
# prompt's greedy text alone. Both sides feed the prompts one token at a time (--chunk 1 alone),
# so they run the same kernels on the same rows and must agree exactly.
# Usage: tests/gpu/test_infer_gpu.sh [CORPUS_DIR]   (BIN=dir: binaries from elsewhere)
# Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
corpus=${1:-build/test_corpus}
BIN=${BIN:-build}
work=${WORK:-build/test_infer_gpu}
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
# shellcheck source=scripts/gpu_lib_paths.sh
source scripts/gpu_lib_paths.sh "$(cd "$BIN" && pwd)"
need_programs "$BIN/train" "$BIN/infer"
need_corpus "$corpus"
need_gpu

# 2 layers of dilated attention (segments 512, 1024, 2048; dilations 1, 2, 4), width 256.
"$BIN/train" --device cuda --data "$corpus" --layers 2 --width 256 --heads 4 --seq-len 2048 --batch 4 --steps 20 \
    --attn dilated --segments 512,1024,2048 --dilations 1,2,4 --val-every 0 --val-batches 1 --ckpt-every 0 \
    --sample-tokens 0 --lr 1e-3 --warmup 5 --out "$work/model" > "$work/train.log" 2>&1 \
    || { fail "training the test model: $(tail -2 "$work/train.log" | tr '\n' ' ')"; finish; }
for i in 1 2 3 4 5 6; do cat README.md; done | head -c 90000 > "$work/context.txt"
if "$BIN/infer" --device cuda --checkpoint "$work/model" --prompt-file "$work/context.txt" --max-new 0 --chunk 3000 \
        --save-cache "$work/kv.safetensors" > /dev/null 2> "$work/prefill.err" \
    && grep -q "prefill: [0-9]* tokens in chunks of 3000" "$work/prefill.err"; then
    pass "a context of $(grep -o 'prefill: [0-9]*' "$work/prefill.err" | cut -d' ' -f2) tokens prefilled in chunks of 3000 and its cache saved"
else
    fail "prefill: $(tail -2 "$work/prefill.err" | tr '\n' ' ')"
fi
printf ' The model\n## Tests\\nmake\n x\n' > "$work/prompts.txt"
batch=$("$BIN/infer" --device cuda --checkpoint "$work/model" --load-cache "$work/kv.safetensors" --prompts-file "$work/prompts.txt" \
        --max-new 12 --temperature 0 2> "$work/batch.err")
same=0
for k in 1 2 3; do
    [ "$k" = 1 ] && p=' The model'
    [ "$k" = 2 ] && p=$'## Tests\nmake'
    [ "$k" = 3 ] && p=' x'
    alone=$("$BIN/infer" --device cuda --checkpoint "$work/model" --load-cache "$work/kv.safetensors" --prompt "$p" --chunk 1 \
            --max-new 12 --temperature 0 2> /dev/null)
    got=$(awk -v k="=== $k ===" '$0 == k { on = 1; next } /^=== [0-9]+ ===$/ { on = 0 } on' <<< "$batch")
    [ -n "$alone" ] && [ "$got" = "$alone" ] && same=$((same + 1))
done
[ "$same" = 3 ] && pass "--prompts-file on the GPU: 3 prompts at once == each alone, greedy ($(grep -o 'decoded .*' "$work/batch.err"))" \
    || fail "--prompts-file on the GPU differs from single prompts ($same of 3 equal): $batch $(tail -1 "$work/batch.err")"
finish
