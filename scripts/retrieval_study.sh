#!/usr/bin/env bash
# Issue 22's study: models of one size trained by the retrieval recipe (the long-document corpus
# with retrieval documents mixed in, a length curriculum), each scored on passkey and multi-key
# needles over held-out documents at 2K..1M tokens and by loss per position. Runs on one
# H100/H200 from binaries and the prepared corpus carried in $CARRY (bin/: train, infer,
# data_tool, libsentencepiece*.so.0; corpus-long/: tokenizer.model, val.bin, train.bin or
# train.bin.xz). Each step fits one device call (<= 9 minutes); a step leaves its checkpoint in
# $WORK for the next on the same machine, and --time-limit/--resume split a long training run.
# Logs, CSVs and heatmaps go to $STUDY_OUT (default build/retrieval_study).
#
#   scripts/retrieval_study.sh data train:dense2k eval:dense2k table
#
# Steps:
#   data              retrieval shards for training (one per window length) and the task files
#   train:M[:MIN]     train model M for at most MIN minutes (default 8: one device call), resuming what $WORK/M holds
#   eval:M            score M on the task files its context allows, write $OUT/M_* (CSV, PNG)
#   positions:M       M's loss by position over the held-out documents >= 256K tokens
#   table             every scored model's accuracy by length, last
# Models (6 layers, width 384, 6 heads of 64, rope base 1e7; TOKENS tokens each; see M_ARGS below):
#   dense2k    dense attention at 2K: the control (scored in its last 2K tokens: no long context)
#   dense32k   dense, 2K then 8K then 32K
#   longnet    dilated (LongNet), segments 2K..1M with dilations 1..512 (w/r = 2048), 2K then 32K then 256K
#   mixwin     block-sparse sliding window 2048 in layers 0, 2, 4, LongNet (as above) in layers 1, 3, 5
#   wglobal    block-sparse sliding window 2048 + 64 global tokens in every layer, as longnet's curriculum
#   wdil       block-sparse sliding window 2048 + key blocks of 64 at block distances 0, 16, 32, ... (reaching
#              1M tokens) in every layer, as longnet's curriculum: a far needle reaches the question
#              directly (1 block in 16) or relayed by a block of the window after it
#   fixwin     block-sparse sliding window 2048 in layers 0, 2, 4, the Sparse Transformer's fixed pattern
#              (blocks of 2048, the last 128 tokens of each its summary) in layers 1, 3, 5, as longnet's
#              curriculum: a needle reaches its block's summary in one fixed layer, the question in the next
#   dense32k-nope  dense32k with layers 1, 3, 5 NoPE (no rotary embedding: content matching at any distance)
#   dense128k-nope dense32k-nope with a last stage of 128K windows (from step S32K)
#   fixwin-nope    fixwin with its fixed layers (1, 3, 5) NoPE
#   dense128k-nope-lead  dense128k-nope on retrieval documents of which a fraction LEAD open with a needle
#              (data with LEAD=0.5: a needle right after the intro, depth 0, asked from anywhere later)
#   ln-r4      dilated, segments 2048, 8192, 32768 with dilations 1, 2, 4 (r <= 6 heads: every row is kept by
#              some head in every branch), 2K then 32K: one side of the r > H question
#   ln-r16     the same with dilations 1, 4, 16 (the 32K branch keeps 6 of 16 row classes): the other side
#   fixwin32   fixwin without its 2K stage: 32K windows from the first step (every window crosses block
#              borders, so the summary path is what the fixed layers learn first), then 256K as fixwin
# SHARDS, LENGTHS, SAMPLES, TOKENS and LR narrow or change what `data` makes and the runs take.
set -uo pipefail
CARRY=${CARRY:-.carry/lead}
OUT=${STUDY_OUT:-build/retrieval_study}  # not $OUT: the device machines set that for their own files
WORK=${WORK:-out/study}
mkdir -p "$OUT" "$WORK/data"
export LD_LIBRARY_PATH=$PWD/$CARRY/bin:${LD_LIBRARY_PATH:-}
if python3 -c "import nvidia" 2>/dev/null; then  # the lent machines keep cuDNN/NCCL/cuBLAS in Python wheels
    SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
    export LD_LIBRARY_PATH=$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:$LD_LIBRARY_PATH
fi
BIN=$CARRY/bin
CORPUS=$CARRY/corpus-long
[ -f "$CORPUS/train.bin" ] || { [ -f "$CORPUS/train.bin.xz" ] && xz -dk -T0 "$CORPUS/train.bin.xz"; }
D=$WORK/data
TOKENS=${TOKENS:-157286400}  # 150M tokens per model

MODEL=(--layers 6 --width 384 --heads 6 --rope-theta 1e7)
COMMON=(--device cuda --data "$CORPUS" "${MODEL[@]}" --lr ${LR:-1.5e-3} --warmup 50 --val-every 0 --val-batches 2
        --ckpt-every 0 --keep-ckpts 1 --log-every 50 --sample-tokens 0)
LONGNET=(--segments 2048,8192,32768,131072,524288,1048576 --dilations 1,4,16,64,256,512)
# Stages: steps of 64 windows of 2K (131,072 tokens), then of 32K and 256K windows at the same
# tokens per step; each stage mixes in half retrieval documents as long as its windows.
S2K=$(( TOKENS / 2 / 131072 ))           # half the tokens at 2K
S32K=$(( S2K + TOKENS / 4 / 131072 ))     # a quarter at 32K (4 windows a step)
S8K=$(( S2K + TOKENS / 8 / 131072 ))
STEPS=$(( TOKENS / 131072 ))
M_ARGS() {  # the flags of model $1
    case $1 in
        dense2k)  echo "--attn dense --seq-len 2048 --batch 64 --steps $STEPS --mix $D/tasks2k.bin:0.5" ;;
        dense32k) echo "--attn dense --seq-len 2048 --batch 64 --steps $STEPS --schedule 8192x16@$S2K,32768x4@$S8K"\
                       "--mix $D/tasks2k.bin:0.5;$D/tasks8k.bin:0.5;$D/tasks32k.bin:0.5" ;;
        longnet)  echo "--attn dilated ${LONGNET[*]} --seq-len 2048 --batch 64 --steps $STEPS"\
                       "--schedule 32768x4@$S2K,262144x1@$S32K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5;$D/tasks256k.bin:0.5" ;;
        mixwin)   echo "--attn block-sparse --block 64 --window 2048 --dilated-layers 1,3,5 ${LONGNET[*]} --seq-len 2048 --batch 64"\
                       "--steps $STEPS --schedule 32768x4@$S2K,262144x1@$S32K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5;$D/tasks256k.bin:0.5" ;;
        wglobal)  echo "--attn block-sparse --block 64 --window 2048 --global 64 --seq-len 2048 --batch 64 --steps $STEPS"\
                       "--schedule 32768x4@$S2K,262144x1@$S32K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5;$D/tasks256k.bin:0.5" ;;
        wdil)     echo "--attn block-sparse --block 64 --window 2048 --dilated-blocks 16,1048576 --seq-len 2048 --batch 64 --steps $STEPS"\
                       "--schedule 32768x4@$S2K,262144x1@$S32K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5;$D/tasks256k.bin:0.5" ;;
        fixwin)   echo "--attn block-sparse,fixed --block 64 --window 2048 --stride 2048 --summary 128 --seq-len 2048 --batch 64"\
                       "--steps $STEPS --schedule 32768x4@$S2K,262144x1@$S32K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5;$D/tasks256k.bin:0.5" ;;
        dense32k-nope) echo "--attn dense --nope-layers 1,3,5 --seq-len 2048 --batch 64 --steps $STEPS --schedule 8192x16@$S2K,32768x4@$S8K"\
                       "--mix $D/tasks2k.bin:0.5;$D/tasks8k.bin:0.5;$D/tasks32k.bin:0.5" ;;
        dense128k-nope) echo "--attn dense --nope-layers 1,3,5 --seq-len 2048 --batch 64 --steps $STEPS --schedule 8192x16@$S2K,32768x4@$S8K,131072x1@$S32K"\
                       "--mix $D/tasks2k.bin:0.5;$D/tasks8k.bin:0.5;$D/tasks32k.bin:0.5;$D/tasks256k.bin:0.5" ;;
        fixwin-nope) echo "--attn block-sparse,fixed --nope-layers 1,3,5 --block 64 --window 2048 --stride 2048 --summary 128 --seq-len 2048 --batch 64"\
                       "--steps $STEPS --schedule 32768x4@$S2K,262144x1@$S32K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5;$D/tasks256k.bin:0.5" ;;
        dense128k-nope-lead) echo "--attn dense --nope-layers 1,3,5 --seq-len 2048 --batch 64 --steps $STEPS --schedule 8192x16@$S2K,32768x4@$S8K,131072x1@$S32K"\
                       "--mix $D/tasks2k-lead.bin:0.5;$D/tasks8k-lead.bin:0.5;$D/tasks32k-lead.bin:0.5;$D/tasks256k-lead.bin:0.5" ;;
        ln-r4)    echo "--attn dilated --segments 2048,8192,32768 --dilations 1,2,4 --seq-len 2048 --batch 64 --steps $STEPS"\
                       "--schedule 32768x4@$S2K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5" ;;
        ln-r16)   echo "--attn dilated --segments 2048,8192,32768 --dilations 1,4,16 --seq-len 2048 --batch 64 --steps $STEPS"\
                       "--schedule 32768x4@$S2K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5" ;;
        fixwin32) echo "--attn block-sparse,fixed --block 64 --window 2048 --stride 2048 --summary 128 --seq-len 32768 --batch 4"\
                       "--steps $STEPS --schedule 262144x1@$S32K --mix $D/tasks32k.bin:0.5;$D/tasks256k.bin:0.5" ;;
        *) echo "unknown model $1" >&2; return 1 ;;
    esac
}
# The longest task files a model is scored on (dense prefill is quadratic), and how it reads them.
M_EVAL() {
    case $1 in
        dense2k)  echo "1048576 --ctx 2048 --truncate" ;;  # the control: it sees its last 2K tokens
        dense32k*|dense128k*) echo "131072 --ctx 131072" ;;
        *)        echo "1048576 --ctx 1048576" ;;
    esac
}
read -r -a LENGTHS <<< "${LENGTHS:-2048 8192 32768 131072 524288 1048576}"

summary=()
for step in "$@"; do
    t0=$SECONDS
    IFS=: read -r what model stop <<< "$step"
    case $what in
        data)
            # doc tokens:needle every:pass key every, for each retrieval shard
            for spec in ${SHARDS:-2048:512:1024 8192:512:2048 32768:512:4096 262144:1024:16384}; do
                IFS=: read -r len every pk <<< "$spec"
                [ -f "$D/tasks$((len / 1024))k.bin" ] || "$BIN/data_tool" task-shard --data "$CORPUS" --doc-tokens "$len" --tokens 50M \
                    --needle-every "$every" --passkey-every "$pk" --seed 7 --out "$D/tasks$((len / 1024))k.bin"
                # LEAD=F: also the shards whose documents open with a needle in a fraction F (the -lead models)
                [ -z "${LEAD:-}" ] || [ -f "$D/tasks$((len / 1024))k-lead.bin" ] || "$BIN/data_tool" task-shard --data "$CORPUS" \
                    --doc-tokens "$len" --tokens 50M --needle-every "$every" --passkey-every "$pk" --lead-needle "$LEAD" --seed 7 \
                    --out "$D/tasks$((len / 1024))k-lead.bin"
            done
            for L in "${LENGTHS[@]}"; do
                [ -f "$D/eval_$L.jsonl" ] || "$BIN/data_tool" tasks --data "$CORPUS" --task passkey,multikey --lengths "$L" \
                    --depths 0,0.25,0.5,0.75,1 --samples ${SAMPLES:-2} --needles 4 --seed 11 --out "$D/eval_$L.jsonl"
            done
            [ -f "$D/eval_filler.jsonl" ] || "$BIN/data_tool" tasks --data "$CORPUS" --haystack filler --task passkey --lengths 2048,32768 \
                --depths 0,0.5,1 --seed 13 --out "$D/eval_filler.jsonl"
            summary+=("data: $((SECONDS - t0)) s: $(ls "$D" | tr '\n' ' ')") ;;
        train)  # at most 8 minutes unless told: a device call (10 minutes) must end with a checkpoint
            args=$(M_ARGS "$model") || continue
            resume=(); ls "$WORK/$model"/ckpt_*.safetensors > /dev/null 2>&1 && resume=(--resume)
            # shellcheck disable=SC2086
            "$BIN/train" "${COMMON[@]}" $args --time-limit "${stop:-8}" "${resume[@]}" --out "$WORK/$model" >> "$OUT/${model}_train.log" 2>&1
            code=$?
            summary+=("train $model: exit $code ($((SECONDS - t0)) s): $(grep -E '^(done|stopped|error)' "$OUT/${model}_train.log" | tail -1)")
            grep -E '^(model|stage|step +[0-9]+/[0-9]+ \| (loss|stage))' "$OUT/${model}_train.log" | tail -6 ;;
        eval)
            read -r maxlen ctxargs <<< "$(M_EVAL "$model")"
            : > "$OUT/${model}_tasks.jsonl"
            for L in "${LENGTHS[@]}"; do [ "$L" -le "$maxlen" ] && cat "$D/eval_$L.jsonl" >> "$OUT/${model}_tasks.jsonl"; done
            # shellcheck disable=SC2086
            "$BIN/infer" --device cuda --checkpoint "$WORK/$model" --tasks "$OUT/${model}_tasks.jsonl" $ctxargs \
                --tasks-out "$OUT/${model}_needles" > "$OUT/${model}_eval.log" 2> "$OUT/${model}_eval.err"
            code=$?
            # shellcheck disable=SC2086
            "$BIN/infer" --device cuda --checkpoint "$WORK/$model" --tasks "$D/eval_filler.jsonl" ${ctxargs/1048576/32768} \
                --tasks-out "$OUT/${model}_filler" > "$OUT/${model}_filler.log" 2>> "$OUT/${model}_eval.err"
            rm -f "$OUT/${model}_tasks.jsonl"
            summary+=("eval $model: exit $code ($((SECONDS - t0)) s): $(grep -E '^tasks' "$OUT/${model}_eval.log") | filler: $(grep -E '^tasks' "$OUT/${model}_filler.log" | grep -oE '[0-9.]+%')")
            grep -E '^  (passkey|multikey|all) ' "$OUT/${model}_eval.log"; tail -2 "$OUT/${model}_eval.err" ;;
        positions)
            "$BIN/infer" --device cuda --checkpoint "$WORK/$model" --perplexity "$CORPUS/val.bin" --min-doc-tokens 262144 \
                --per-position "$OUT/${model}_positions.csv" $( [ "$model" = dense2k ] && echo "--ctx 2048" ) > "$OUT/${model}_ppl.log" 2>&1
            summary+=("positions $model: exit $? ($((SECONDS - t0)) s): $(grep -E '^file' "$OUT/${model}_ppl.log")") ;;
        table)
            echo; echo "| model | task | $(printf '%s | ' "${LENGTHS[@]}")"
            for f in "$OUT"/*_needles.csv; do
                [ -f "$f" ] || continue
                m=$(basename "$f" _needles.csv)
                for task in passkey multikey; do
                    row="| $m | $task |"
                    for L in "${LENGTHS[@]}"; do
                        a=$(awk -F, -v t=$task -v l=$L '$1 == t && $2 == l && $3 == "all" { printf "%.0f%%", 100 * $6 }' "$f")
                        row+=" ${a:--} |"
                    done
                    echo "$row"
                done
            done ;;
        *) echo "unknown step $step" ;;
    esac
done
echo; printf '%s\n' "${summary[@]}"
