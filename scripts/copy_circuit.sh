#!/usr/bin/env bash
# The copy circuit where distance is no obstacle (notes/reading.md): several models trained side by
# side on one GPU on the reading study's 2K documents only (hybrid128k-read's first stage: quoted
# lines and repeated passages of the documents' own text), then each one's copy loss at gaps of
# 16 to 1K tokens and its quotes at 2K (with their controls). One device call (~5 minutes).
#
#   scripts/copy_circuit.sh [VARIANT ...]   default: hybrid dense hybrid-theta4 dense-theta4
#
# Variants (each one change from `hybrid`, the reading study's model and its 2K stage):
#   hybrid        rotary layers 0, 2, 4 on a sliding window of 2048 (block-sparse), NoPE layers 1, 3, 5
#                 with log-n scaling, rope base 1e7
#   hybrid-qkconv hybrid whose NoPE layers pass q and k through a causal depthwise convolution of
#                 QKCONV tokens (default 4; train --qk-conv), in the NoPE layers QKCONV_LAYERS names
#                 (default all: train --qk-conv-layers)
#   hybrid-qkconv-ptr  hybrid-qkconv with a pointer (train --pointer: a copy head over the final
#                 states mixed into the output by a gate; layers/pointer.h)
#   dense         every layer dense and rotary (a plain GPT), rope base 1e7
#   hybrid-theta4 hybrid with rope base 1e4
#   dense-theta4  dense with rope base 1e4
#   V-rand        variant V trained on documents that also carry random words written twice (data_tool
#                 task-shard --random-every RANDOM_EVERY, default 512): the induction task
#   torch         the peer: a plain GPT in PyTorch (scripts/torch_copy_peer.py, rope base 1e4) on the
#                 same shards, tokens and learning rate, scored on the sequences the first other
#                 variant's copy loss scored (needs PyTorch, and another variant in the same call)
#   torch-hybrid  the peer at the hybrid's shape: NoPE layers 1, 3, 5 with log-n (HLOGN), rotary
#                 layers on a sliding window (HWINDOW), rope base 1e7
#   torch-moba    torch-hybrid whose NoPE layers keep their own block and the top-k earlier blocks
#                 chosen by content (MoBA, MOBA=BLOCK,TOPK, default 64,4), a choice per query
#   torch-mobalag torch-moba with a choice per query block, made from the block before (as a tiled
#                 kernel would choose: --moba BLOCK,TOPK,lagged)
#   torch-qkconv  torch-hybrid whose NoPE layers pass q and k through a causal depthwise convolution
#                 of QKCONV positions (default 4; --qk-conv), so that a head can match several tokens
#   torch-diff    torch-hybrid whose NoPE layers' attention is differential (--diff-attn: two softmaxes
#                 from the halves of each head's query and key, the second's weights times a learned
#                 lambda subtracted from the first's, so that weight spread over unrelated keys cancels)
#   torch-qkconv-diff  torch-qkconv with differential attention
#   torch-qkconv-ptr   torch-qkconv with a pointer-generator's copy (--pointer: one more head over the
#                 final states weighs the tokens that followed states like the current one; a gate
#                 mixes that distribution with the language model's)
# Environment: CARRY (binaries and corpus as scripts/reading_study.sh packs them, default
# .carry/read, unpacked into rs/), TOKENS (per run, default 78.6M: the 2K stage's share of the
# study's 157M), SEED, DEVICE, MODEL_ARGS (without --rope-theta), GAPS, OUTDIR, ANSWER_WORDS (the quotes'
# answers, 3 words); the hybrid's HBLOCK,
# HWINDOW and HLOGN (its --logn-attn base, 512); PYTHON, a python with PyTorch for the peers
# (python3); COPY_ATTN=1 adds where the heads look on the repeat (infer --copy-attn) to each _copy.log.
# Outputs: OUTDIR/<variant>_train.log, _copy.log/.csv, _quote.log/.csv; OUTDIR/summary.txt.
set -uo pipefail
CARRY=${CARRY:-.carry/read}
OUTDIR=${OUTDIR:-build/copy_circuit}
WORK=${WORK:-out/copy_circuit}
DEVICE=${DEVICE:-cuda}
TOKENS=${TOKENS:-78643200}
SEED=${SEED:-1}
GAPS=${GAPS:-16,128,512,1K}
MODEL_ARGS=${MODEL_ARGS:---layers 6 --width 384 --heads 6}
SEQ=${SEQ:-2048} BATCH=${BATCH:-64}
VARIANTS=("$@"); [ ${#VARIANTS[@]} -gt 0 ] || VARIANTS=(hybrid dense hybrid-theta4 dense-theta4)
mkdir -p "$OUTDIR" "$WORK"

# The binaries and the corpus: a packed carry (the device machine) or a built tree (tests).
if [ -f "$CARRY/bins.tar.xz" ]; then
    mkdir -p rs/bin rs/corpus-long
    [ -x rs/bin/train ] || tar -xJf "$CARRY/bins.tar.xz" -C rs/bin
    [ -f rs/corpus-long/val.bin ] || { cp "$CARRY"/corpus-long/* rs/corpus-long/ && xz -d rs/corpus-long/*.xz; }
    CARRY=rs
fi
BIN=$CARRY/bin CORPUS=$CARRY/corpus-long
# shellcheck source=scripts/gpu_lib_paths.sh
source "$(dirname "$0")/gpu_lib_paths.sh" "$(cd "$BIN" && pwd)"
[ -f "$CORPUS/train.bin" ] || { [ -f "$CORPUS/train.bin.xz" ] && xz -dk -T0 "$CORPUS/train.bin.xz"; }

variant_args() {
    local theta=1e7 attn v=${1%-rand}
    case $v in *-theta4) theta=1e4 ;; esac
    case ${v%-theta4} in
        hybrid|hybrid-qkconv|hybrid-qkconv-ptr)
                attn="--attn block-sparse --block ${HBLOCK:-128} --window ${HWINDOW:-2048} --layer-pattern 1:dense,3:dense,5:dense --nope-layers 1,3,5 --logn-attn ${HLOGN:-512}"
                [ "${v%-theta4}" != hybrid ] && attn="$attn --qk-conv ${QKCONV:-4}${QKCONV_LAYERS:+ --qk-conv-layers $QKCONV_LAYERS}"
                [ "${v%-theta4}" = hybrid-qkconv-ptr ] && attn="$attn --pointer" ;;
        dense)  attn="--attn dense" ;;
        torch|torch-hybrid|torch-moba|torch-mobalag|torch-qkconv|torch-diff|torch-qkconv-diff|torch-qkconv-ptr)
                [ "$1" = "$v" ] && return 0; echo "copy_circuit: the torch peers train on read's documents only (no $1)" >&2; return 1 ;;
        *) echo "copy_circuit: unknown variant $1 (hybrid, hybrid-qkconv, hybrid-qkconv-ptr, dense, hybrid-theta4, dense-theta4, each with -rand; torch, torch-hybrid, torch-moba, torch-mobalag, torch-qkconv, torch-diff, torch-qkconv-diff, torch-qkconv-ptr)" >&2
           return 1 ;;
    esac
    echo "$MODEL_ARGS --rope-theta $theta $attn"
}
for v in "${VARIANTS[@]}"; do variant_args "$v" > /dev/null || exit 2; done
ours=""  # the first of our variants: its copy loss's sequences are the ones the PyTorch peer scores
is_peer() { [[ $1 == torch || $1 == torch-* ]]; }
for v in "${VARIANTS[@]}"; do is_peer "$v" || { ours=$v; break; }; done
peers=(); for v in "${VARIANTS[@]}"; do is_peer "$v" && peers+=("$v"); done
if [ ${#peers[@]} -gt 0 ]; then
    [ -n "$ours" ] || { echo "copy_circuit: the torch peer needs one of our variants beside it (its sequences to score)" >&2; exit 2; }
    "${PYTHON:-python3}" -c "import torch" 2> /dev/null || { echo "copy_circuit: the torch peer needs PyTorch (pip install torch, or PYTHON=a python that has it)" >&2; exit 2; }
fi

# The study's 2K documents (hybrid128k-read's first stage) and quote items at 2K.
shard=$WORK/tasks${SEQ}-read.bin
[ -f "$shard" ] || "$BIN/data_tool" task-shard --data "$CORPUS" --doc-tokens "$SEQ" --tokens "${SHARD_TOKENS:-50M}" \
    --needle-every 512 --passkey-every 1024 --quote-every 256 --repeat-every 2048 --seed 7 --out "$shard" > "$shard.log" 2>&1 ||
    { echo "copy_circuit: task-shard failed: $(tail -1 "$shard.log")"; exit 1; }
rand_shard=$WORK/tasks${SEQ}-readrand.bin
if [[ " ${VARIANTS[*]} " == *"-rand "* ]] && [ ! -f "$rand_shard" ]; then
    "$BIN/data_tool" task-shard --data "$CORPUS" --doc-tokens "$SEQ" --tokens "${SHARD_TOKENS:-50M}" --needle-every 512 \
        --passkey-every 1024 --quote-every 256 --repeat-every 2048 --random-every "${RANDOM_EVERY:-512}" --seed 7 \
        --out "$rand_shard" > "$rand_shard.log" 2>&1 || { echo "copy_circuit: task-shard failed: $(tail -1 "$rand_shard.log")"; exit 1; }
fi
# Answers of up to ANSWER_WORDS words (3: a third word leaves little to guess; notes/reading.md, Result 12).
words=${ANSWER_WORDS:-3}
quotes=$WORK/quote${words}w_$SEQ.jsonl
[ -f "$quotes" ] || "$BIN/data_tool" tasks --data "$CORPUS" --task quote --lengths "$SEQ" --depths 0,0.25,0.5,0.75,1 \
    --samples "${SAMPLES:-10}" --seed 31 --answer-words "$words" --out "$quotes" > /dev/null ||
    { echo "copy_circuit: quote items failed"; exit 1; }

steps=$(( TOKENS / (SEQ * BATCH) ))
run_one() {  # train variant $1, then its copy loss and its quotes
    local v=$1 dir=$WORK/$1
    if is_peer "$v"; then
        local hybrid="--rope-theta 1e7 --nope-layers 1,3,5 --window ${HWINDOW:-2048} --logn ${HLOGN:-512}" shape
        case $v in
            torch) shape="--rope-theta 1e4" ;;
            torch-hybrid) shape=$hybrid ;;
            torch-moba) shape="$hybrid --moba ${MOBA:-64,4}" ;;
            torch-mobalag) shape="$hybrid --moba ${MOBA:-64,4},lagged" ;;
            torch-qkconv) shape="$hybrid --qk-conv ${QKCONV:-4}" ;;
            torch-diff) shape="$hybrid --diff-attn" ;;
            torch-qkconv-diff) shape="$hybrid --qk-conv ${QKCONV:-4} --diff-attn" ;;
            torch-qkconv-ptr) shape="$hybrid --qk-conv ${QKCONV:-4} --pointer" ;;
        esac
        # shellcheck disable=SC2086
        "${PYTHON:-python3}" "$(dirname "$0")/torch_copy_peer.py" --data "$CORPUS" --mix "$shard:0.5" --copy-tokens "$OUTDIR/${ours}_copy_tokens.csv" \
            --wait-pid "$OURS_PID" --seq-len "$SEQ" --batch "$BATCH" --steps "$steps" --lr "${LR:-1.5e-3}" --seed "$SEED" \
            --device "$DEVICE" --positions-out "$OUTDIR/${v}_copy_positions.csv" $MODEL_ARGS $shape > "$OUTDIR/${v}_train.log" 2>&1 || return 1
        cp "$OUTDIR/${v}_train.log" "$OUTDIR/${v}_copy.log"
        return 0
    fi
    # shellcheck disable=SC2046
    local mix=$shard; [[ $v == *-rand ]] && mix=$rand_shard
    "$BIN/train" --device "$DEVICE" --data "$CORPUS" $(variant_args "$v") --seq-len "$SEQ" --batch "$BATCH" --steps "$steps" \
        --mix "$mix:0.5" --lr "${LR:-1.5e-3}" --warmup 50 --seed "$SEED" --val-every 0 --val-batches 2 --ckpt-every 0 \
        --keep-ckpts 1 --log-every 50 --sample-tokens 0 --out "$dir" > "$OUTDIR/${v}_train.log" 2>&1 || return 1
    "$BIN/infer" --device "$DEVICE" --checkpoint "$dir" --copy-loss "$CORPUS/val.bin" --gaps "$GAPS" \
        --copy-samples "${COPY_SAMPLES:-8}" --ctx "${COPY_CTX:-4096}" ${COPY_ATTN:+--copy-attn} --copy-out "$OUTDIR/${v}_copy" > "$OUTDIR/${v}_copy.log" 2>&1 || return 1
    "$BIN/infer" --device "$DEVICE" --checkpoint "$dir" --tasks "$quotes" --ctx "$SEQ" \
        --tasks-out "$OUTDIR/${v}_quote" > "$OUTDIR/${v}_quote.log" 2>&1
}
# Ours first: the peer waits for the sequences of $ours only while that run lives.
pids=() names=() ours_pid=""
for v in "${VARIANTS[@]}"; do
    is_peer "$v" && continue
    run_one "$v" & pids+=($!) names+=("$v")
    [ "$v" = "$ours" ] && ours_pid=$!
done
for v in "${peers[@]}"; do OURS_PID=$ours_pid run_one "$v" & pids+=($!) names+=("$v"); done
bad=0
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { bad=$((bad + 1)); echo "copy_circuit: ${names[$i]} failed: $(tail -n 2 "$OUTDIR/${names[$i]}_train.log" | tr '\n' ' ')"; }
done

# One line per variant: its final loss, the repeat's copy loss at each gap, quotes against controls.
{
    for v in "${VARIANTS[@]}"; do
        echo "== $v: $(grep -E '^done' "$OUTDIR/${v}_train.log" | tail -1)"
        grep -A 20 '^copy loss by gap' "$OUTDIR/${v}_copy.log" 2>/dev/null | grep -E '^ +(gap|[0-9])'
        grep -E '^  quote' "$OUTDIR/${v}_quote.log" 2>/dev/null
    done
} | tee "$OUTDIR/summary.txt"
exit $(( bad > 0 ))
