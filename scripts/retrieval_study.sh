#!/usr/bin/env bash
# The long-context retrieval study (notes/long-context-retrieval.md): models of one size trained
# by the retrieval recipe (the long-document corpus with retrieval documents mixed in, a length
# curriculum), each scored on passkey and multi-key needles over held-out documents at 2K..1M
# tokens, by loss per position, and by what it continues from a held-out book or source tree.
# Runs from binaries and the prepared corpus carried in $CARRY (bin/: train, infer, data_tool,
# libsentencepiece*.so.0; corpus-long/: tokenizer.model, val.bin, train.bin or train.bin.xz).
# Each step fits one device call (<= 9 minutes); a step leaves its checkpoint in $WORK for the next
# on the same machine, and --time-limit/--resume split a long training run. Logs, CSVs and
# heatmaps go to $STUDY_OUT (default build/retrieval_study).
#
#   scripts/retrieval_study.sh data train:hybrid128k@1 eval:hybrid128k@1 table
#
# A model name M@S is recipe M trained with --seed S (a run of the recipe; M alone: train's default
# seed). The GPUs a step uses are the visible ones (CUDA_VISIBLE_DEVICES): a recipe that trains over
# several GPUs (hybrid1m) starts one rank per visible GPU through scripts/launch.sh (train --cp P);
# scripts/run_lanes.sh runs several invocations side by side on the GPUs of one machine.
#
# Steps:
#   data              retrieval shards for training (one per window length) and the task files
#   train:M[:MIN]     train M for at most MIN minutes (default 8: one device call), resuming what $WORK/M holds;
#                     nothing once M_train.log says it is done
#   eval:M            score M on the task files its context allows (lengths in [EVAL_MIN, EVAL_MAX]), write
#                     $OUT/M_needles$EVAL_TAG.* (the grid), M_offgrid*, M_tree*, M_start* (depth 0, more items),
#                     M_filler* (CSV, PNG, log)
#   positions:M       M's loss by position over the held-out documents >= 256K tokens
#   demo:M            M continues a held-out book and a source tree after a cue taken from a stated depth
#   table             every scored model's accuracy by length; the median and worst run of each recipe
# Recipes (6 layers, width 384, 6 heads of 64, rope base 1e7; TOKENS tokens each; see M_ARGS below):
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
#   hybrid128k the iRoPE hybrid: rotary layers 0, 2, 4 attend a sliding window of 2048 tokens (block-sparse),
#              NoPE layers 1, 3, 5 attend densely, their queries scaled by ln(p + 1) / ln(512) past position
#              512 (--logn-attn 512, trained: the NoPE softmax keeps its focus as the keys grow); the
#              curriculum and data of dense128k-nope
#   hybrid128k-nologn  the same without the log-n scaling: what the scaling adds
#   hybrid128k-pkfar, hybrid128k-whole, hybrid128k-leadmk  hybrid128k with one change to its data each, for
#              depth 0 (see mix_variant below; `data` makes their shards when VARIANTS names them)
#   hybrid128k-read  hybrid128k-pkfar whose training documents (every stage's) also carry quoted lines of
#              their own text (one per QUOTE_EVERY = 256 tokens) and repeated passages (one per REPEAT_EVERY =
#              2048), from every distance: natural text asked again from far (notes/reading.md)
#   hybrid128k-readmore  hybrid128k-read with about twice the copies (a fifth of the task documents' tokens
#              against a tenth): a quoted line per 64 tokens and a passage of up to 512 tokens per 1024
#              (READMORE_QUOTE_EVERY, READMORE_REPEAT_EVERY, READMORE_REPEAT_TOKENS)
#   hybrid128k-readfar  hybrid128k-read whose copies past the 2K stage all come from READFAR_MIN (2048) or more
#              tokens back (data_tool task-shard --copy-min-distance); the 2K stage's copies as read's
#   hybrid128k-readwide  hybrid128k-read at twice the width and heads (768, 12 heads of 64: WIDE_ARGS), on
#              read's shards: whether the copy circuit is short of capacity
#   hybrid128k-readconv  hybrid128k-read whose NoPE layers pass q and k through a causal depthwise
#              convolution of QKCONV (4) tokens (train --qk-conv), on read's shards: a head matches a phrase
#   hybrid128k-readconvpart  hybrid128k-readconv with the convolution in the NoPE layers QKCONV_LAYERS
#              (3,5) only (train --qk-conv-layers): the others still match single tokens
#   hybrid128k-readfirst  hybrid128k-readconvpart on read's documents with one quote and one repeated
#              passage in READFIRST_ONE_IN (2, read: 8) taken from the document's opening, its first
#              1/READFIRST_SPAN (32) (read: its first 4 lines and 64 tokens; data_tool task-shard
#              --copy-first-one-in, --copy-first-tokens): questions about a context's opening
#   hybrid128k-readsink  hybrid128k-readconvpart with attention sinks (train --attn-sink: one more key
#              per head of learned score and zero value, layers/attn_sink.h), on read's shards: a head
#              need not spend its weight on the context's first tokens
#   hybrid128k-readsink2x  hybrid128k-readsink at twice the tokens (every stage's steps doubled, 2 x TOKENS):
#              whether the copy is still forming when readsink's runs end. Make its data with SHARD_TOKENS
#              twice the default (100M: scripts/reading_study.sh does) so that no task document is seen
#              more often than in readsink; the corpus's own windows are seen twice as often
#   hybrid128k-readsinkhd128  hybrid128k-readsink with 3 heads of 128 in the same width (HD128_ARGS): each
#              head matches over twice the dimensions
#   hybrid128k-readsinkhd128x3  hybrid128k-readsinkhd128 at three times the tokens (every stage's steps
#              tripled; its data with SHARD_TOKENS three times the default, 150M: scripts/reading_study.sh does):
#              the tokens that help (readsink2x) at the heads that make them cheaper
#   hybrid128k-readsink...cW  any readsink recipe above with its convolution over W tokens in place of
#              QKCONV (e.g. hybrid128k-readsinkhd128x3c16): the window a head's match spans
#   hybrid128k-readsink...ptr  any readsink recipe above (cW ones included) with a pointer (train
#              --pointer: a copy head over the final states mixed into the output in probability;
#              e.g. hybrid128k-readsinkhd128x3c16ptr)
#   hybrid128k-readsink...ls  any readsink recipe above (cW ones included, ptr ones not) whose NoPE heads learn
#              their log-n slopes (train --logn-learn: queries past LOGN scaled by 1 + s_h ln((p + 1) /
#              LOGN), s_h from 1 / ln LOGN; e.g. hybrid128k-readsinkhd128x3c16ls)
#   hybrid1m   hybrid128k@S (same seed) trained on from its weights at windows of 1M tokens split over the
#              visible GPUs (train --cp P, P = their number), STEPS_1M steps, half of them retrieval
#              documents of 1M tokens
#   hybrid1m-pkfar, hybrid1m-whole, hybrid1m-leadmk  the same from hybrid128k-V@S, its 1M documents
#              changed as V changed the shorter ones (whole: as hybrid1m's, already whole documents)
#   hybrid1m-readconv, hybrid1m-readconvpart, hybrid1m-readsink, hybrid1m-readsink2x, hybrid1m-readsinkhd128[x3]
#              the same from hybrid128k-readconv@S (-readconvpart@S, -readsink@S, ...) on read's 1M documents,
#              on one GPU (the q/k convolution does not run under --cp)
# Quote items (data_tool tasks --task quote, each with its control; answers of ANSWER_WORDS = 3 words,
# where the controls guess <= 10%) are scored beside the needles at every
# length, and over QUOTE_BOOK and QUOTE_TREE (a book and a source tree no model trained on); CTL=N scores
# a model reading only the last N tokens of each prompt, as the run ctlN-M.
# SHARDS, SHARD_TOKENS, VARIANTS, LENGTHS, SAMPLES, SAMPLES_LONG, TOKENS, LR, STEPS_1M, LR_1M, RECOMPUTE_1M, W1M, DEVICE, MODEL_ARGS, WIDE_ARGS, HD128_ARGS, DEMOS,
# QUOTE_EVERY, REPEAT_EVERY, READMORE_*, READFAR_MIN, READFIRST_ONE_IN, READFIRST_SPAN, TPS, QUOTE_BOOK, QUOTE_TREE, QBOOK_LENGTHS, QTREE_LENGTHS,
# QUOTE_SAMPLES, START_LENGTHS, START_SAMPLES narrow or
# change what `data` makes and the runs take (tests/test_retrieval_study.sh runs every step on the CPU).
set -uo pipefail
CARRY=${CARRY:-.carry/lead}
OUT=${STUDY_OUT:-build/retrieval_study}  # not $OUT: the device machines set that for their own files
WORK=${WORK:-out/study}
DEVICE=${DEVICE:-cuda}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT" "$WORK/data"
# shellcheck source=scripts/gpu_lib_paths.sh
source "$HERE/gpu_lib_paths.sh" "$(cd "$CARRY" 2>/dev/null && pwd)/bin"
BIN=$CARRY/bin
CORPUS=$CARRY/corpus-long
[ -f "$CORPUS/train.bin" ] || { [ -f "$CORPUS/train.bin.xz" ] && xz -dk -T0 "$CORPUS/train.bin.xz"; }
D=$WORK/data
TOKENS=${TOKENS:-157286400}  # 150M tokens per model

# The GPUs this invocation may use: CUDA_VISIBLE_DEVICES's list, else every GPU of the machine.
gpu_count() {
    if [ "$DEVICE" != cuda ]; then echo "${CPU_RANKS:-1}"
    elif [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then tr ',' '\n' <<< "$CUDA_VISIBLE_DEVICES" | grep -c .
    else nvidia-smi -L 2>/dev/null | grep -c '^GPU' || echo 1
    fi
}

# A readsink recipe named with a trailing cW (hybrid128k-readsinkhd128x3c16) is that recipe with its
# q/k convolution over W tokens: conv_base prints the recipe without it, conv_width the W (else QKCONV's).
# One named with a trailing ptr after that (hybrid128k-readsinkhd128x3c16ptr) is the recipe with a
# pointer (train --pointer, layers/pointer.h), one with a trailing ls the recipe whose NoPE heads
# learn their log-n slopes (train --logn-learn): one of the two, not both; pointer_flag and
# slope_flag print the flags, without_ptr the rest.
without_ptr() { if [[ $1 =~ ^(hybrid(128k|1m)-readsink[a-z0-9]*)(ptr|ls)$ ]]; then echo "${BASH_REMATCH[1]}"; else echo "$1"; fi; }
pointer_flag() { [[ $1 =~ ^hybrid(128k|1m)-readsink[a-z0-9]*ptr$ ]] && echo --pointer; return 0; }
slope_flag() { [[ $1 =~ ^hybrid(128k|1m)-readsink[a-z0-9]*ls$ ]] && echo --logn-learn; return 0; }
conv_base() {
    local r; r=$(without_ptr "$1")
    if [[ $r =~ ^(hybrid(128k|1m)-readsink[a-z0-9]*)c([0-9]+)$ ]]; then echo "${BASH_REMATCH[1]}"; else echo "$r"; fi
}
conv_width() {
    local r; r=$(without_ptr "$1")
    if [[ $r =~ ^hybrid(128k|1m)-readsink[a-z0-9]*c([0-9]+)$ ]]; then echo "${BASH_REMATCH[2]}"; else echo "${QKCONV:-4}"; fi
}
# The model of recipe $1: the study's own; twice its width and heads for the -readwide recipes; half
# its heads at twice their size for the -readsinkhd128[x3] ones.
M_MODEL() {
    case $(conv_base "$1") in
        *-readwide) echo "${WIDE_ARGS:---layers 6 --width 768 --heads 12 --rope-theta 1e7}" ;;
        *-readsinkhd128|*-readsinkhd128x3) echo "${HD128_ARGS:---layers 6 --width 384 --heads 3 --rope-theta 1e7}" ;;
        *) echo "${MODEL_ARGS:---layers 6 --width 384 --heads 6 --rope-theta 1e7}" ;;
    esac
}
COMMON=(--device "$DEVICE" --data "$CORPUS" --val-every 0 --val-batches 2
        --ckpt-every 0 --keep-ckpts 1 --log-every "${LOG_EVERY:-50}" --sample-tokens 0)
OPT="--lr ${LR:-1.5e-3} --warmup 50"
# The 1M stages' learning rate and recompute policy (RECOMPUTE_1M: auto takes the fastest that fits the
# GPU's free memory when the run starts, so runs started side by side on one GPU must name one).
OPT_1M="--lr ${LR_1M:-3e-4} --warmup 2 --recompute ${RECOMPUTE_1M:-auto}"
LONGNET=(--segments 2048,8192,32768,131072,524288,1048576 --dilations 1,4,16,64,256,512)
# The NoPE layers' log-n base (HLOGN, 512): queries past that position scaled by ln(p + 1) / ln(base).
LOGN=${HLOGN:-512}
HYBRID="--attn block-sparse --block ${HBLOCK:-128} --window ${HWINDOW:-2048} --layer-pattern 1:dense,3:dense,5:dense --nope-layers 1,3,5"
# Stages: steps of 64 windows of 2K (131,072 tokens), then of 8K, 32K (and 128K, 256K) windows at the
# same tokens per step; each stage mixes in half retrieval documents as long as its windows (twice as
# long at 128K: windows from the first or the second half of a document).
# The hybrid recipes' four windows (tests shrink them, with TPS), and the shard of each: a shard of
# documents of N tokens is tasks{N/1024}k.bin, or tasks{N/1048576}m.bin from 1M, else tasks{N}.bin.
read -r W1 W2 W3 W4 <<< "${WINDOWS:-2048 8192 32768 131072}"
# TPS: tokens a step. A smaller TPS gives more, smaller steps for the same tokens (the copy forms
# after a number of steps, notes/reading.md); a window longer than TPS goes one to a step, and each
# stage keeps its share of TOKENS: half at W1, an eighth at W2 and at W3, a quarter at W4.
TPS=${TPS:-131072}
batch_at() { local b=$(( TPS / $1 )); echo $(( b > 0 ? b : 1 )); }
B1=$(batch_at "$W1") B2=$(batch_at "$W2") B3=$(batch_at "$W3") B4=$(batch_at "$W4")
S2K=$(( TOKENS / 2 / (B1 * W1) ))
S8K=$(( S2K + TOKENS / 8 / (B2 * W2) ))
S32K=$(( S8K + TOKENS / 8 / (B3 * W3) ))
STEPS=$(( S32K + TOKENS / 4 / (B4 * W4) ))
shard() {
    if [ $(($1 % 1048576)) -eq 0 ]; then echo "$D/tasks$(($1 / 1048576))m.bin"
    elif [ $(($1 % 1024)) -eq 0 ]; then echo "$D/tasks$(($1 / 1024))k.bin"
    else echo "$D/tasks$1.bin"; fi
}
MIX128K="$(shard "$W1"):0.5;$(shard "$W2"):0.5;$(shard "$W3"):0.5;$(shard $((2 * W4))):0.5"
vshard() { local f; f=$(shard "$1"); echo "${f%.bin}-$2.bin"; }  # a variant's shard: tasks32k-pkfar.bin
# The depth-0 variants (notes/long-context-retrieval.md, why depth 0), each one change to hybrid128k's data, their shards made by
# `data` when VARIANTS names them: pkfar (pass-key episodes half a document long in the 32K and
# 256K shards, 2 and 4 a document, so that pass keys are asked from far), whole (the 128K stage on documents
# of 128K: no question whose needle sits in the window before), leadmk (half of the 32K and
# 256K documents open with a multi-key needle, asked from anywhere later).
mix_variant() {
    case $1 in
        pkfar|leadmk) echo "$(shard "$W1"):0.5;$(shard "$W2"):0.5;$(vshard "$W3" "$1"):0.5;$(vshard $((2 * W4)) "$1"):0.5" ;;
        whole) echo "$(shard "$W1"):0.5;$(shard "$W2"):0.5;$(shard "$W3"):0.5;$(shard "$W4"):0.5" ;;
        read|readmore|readfar|readfirst) echo "$(vshard "$W1" "$1"):0.5;$(vshard "$W2" "$1"):0.5;$(vshard "$W3" "$1"):0.5;$(vshard $((2 * W4)) "$1"):0.5" ;;
    esac
}
mix_variant_1m() {  # the 1M stage's shard of variant $1 (whole: the recipe's own, its documents are whole)
    case $1 in
        pkfar|leadmk|read|readmore|readfar|readfirst) vshard "$W1M" "$1" ;;
        *) shard "$W1M" ;;
    esac
}
CURRICULUM128K="--seq-len $W1 --batch $B1 --steps $STEPS --schedule ${W2}x$B2@$S2K,${W3}x$B3@$S8K,${W4}x$B4@$S32K --mix $MIX128K"
# The curriculum with every stage's steps multiplied by $1.
curriculum_times() {
    echo "--seq-len $W1 --batch $B1 --steps $(($1 * STEPS)) --schedule ${W2}x$B2@$(($1 * S2K)),${W3}x$B3@$(($1 * S8K)),${W4}x$B4@$(($1 * S32K)) --mix $MIX128K"
}
W1M=${W1M:-1048576}  # the window of hybrid1m (tests shrink it)
M_ARGS() {  # the flags of recipe $1 (run $2: "" or @S)
    local base w; base=$(conv_base "$1") w=$(conv_width "$1")
    case $base in
        dense2k)  echo "--attn dense --seq-len 2048 --batch 64 --steps $STEPS --mix $D/tasks2k.bin:0.5 $OPT" ;;
        dense32k) echo "--attn dense --seq-len 2048 --batch 64 --steps $STEPS --schedule 8192x16@$S2K,32768x4@$S8K"\
                       "--mix $D/tasks2k.bin:0.5;$D/tasks8k.bin:0.5;$D/tasks32k.bin:0.5 $OPT" ;;
        longnet)  echo "--attn dilated ${LONGNET[*]} --seq-len 2048 --batch 64 --steps $STEPS"\
                       "--schedule 32768x4@$S2K,262144x1@$S32K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5;$D/tasks256k.bin:0.5 $OPT" ;;
        mixwin)   echo "--attn block-sparse --block 64 --window 2048 --layer-pattern 1:dilated,3:dilated,5:dilated ${LONGNET[*]} --seq-len 2048 --batch 64"\
                       "--steps $STEPS --schedule 32768x4@$S2K,262144x1@$S32K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5;$D/tasks256k.bin:0.5 $OPT" ;;
        wglobal)  echo "--attn block-sparse --block 64 --window 2048 --global 64 --seq-len 2048 --batch 64 --steps $STEPS"\
                       "--schedule 32768x4@$S2K,262144x1@$S32K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5;$D/tasks256k.bin:0.5 $OPT" ;;
        wdil)     echo "--attn block-sparse --block 64 --window 2048 --dilated-blocks 16,1048576 --seq-len 2048 --batch 64 --steps $STEPS"\
                       "--schedule 32768x4@$S2K,262144x1@$S32K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5;$D/tasks256k.bin:0.5 $OPT" ;;
        fixwin)   echo "--attn block-sparse,fixed --block 64 --window 2048 --stride 2048 --summary 128 --seq-len 2048 --batch 64"\
                       "--steps $STEPS --schedule 32768x4@$S2K,262144x1@$S32K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5;$D/tasks256k.bin:0.5 $OPT" ;;
        dense32k-nope) echo "--attn dense --nope-layers 1,3,5 --seq-len 2048 --batch 64 --steps $STEPS --schedule 8192x16@$S2K,32768x4@$S8K"\
                       "--mix $D/tasks2k.bin:0.5;$D/tasks8k.bin:0.5;$D/tasks32k.bin:0.5 $OPT" ;;
        dense128k-nope) echo "--attn dense --nope-layers 1,3,5 $CURRICULUM128K $OPT" ;;  # = its first form at the default windows
        fixwin-nope) echo "--attn block-sparse,fixed --nope-layers 1,3,5 --block 64 --window 2048 --stride 2048 --summary 128 --seq-len 2048 --batch 64"\
                       "--steps $STEPS --schedule 32768x4@$S2K,262144x1@$S32K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5;$D/tasks256k.bin:0.5 $OPT" ;;
        dense128k-nope-lead) echo "--attn dense --nope-layers 1,3,5 --seq-len 2048 --batch 64 --steps $STEPS --schedule 8192x16@$S2K,32768x4@$S8K,131072x1@$S32K"\
                       "--mix $D/tasks2k-lead.bin:0.5;$D/tasks8k-lead.bin:0.5;$D/tasks32k-lead.bin:0.5;$D/tasks256k-lead.bin:0.5 $OPT" ;;
        ln-r4)    echo "--attn dilated --segments 2048,8192,32768 --dilations 1,2,4 --seq-len 2048 --batch 64 --steps $STEPS"\
                       "--schedule 32768x4@$S2K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5 $OPT" ;;
        ln-r16)   echo "--attn dilated --segments 2048,8192,32768 --dilations 1,4,16 --seq-len 2048 --batch 64 --steps $STEPS"\
                       "--schedule 32768x4@$S2K --mix $D/tasks2k.bin:0.5;$D/tasks32k.bin:0.5 $OPT" ;;
        fixwin32) echo "--attn block-sparse,fixed --block 64 --window 2048 --stride 2048 --summary 128 --seq-len 32768 --batch 4"\
                       "--steps $STEPS --schedule 262144x1@$S32K --mix $D/tasks32k.bin:0.5;$D/tasks256k.bin:0.5 $OPT" ;;
        hybrid128k) echo "$HYBRID --logn-attn $LOGN $CURRICULUM128K $OPT" ;;
        hybrid128k-nologn) echo "$HYBRID $CURRICULUM128K $OPT" ;;
        hybrid128k-pkfar|hybrid128k-whole|hybrid128k-leadmk|hybrid128k-read|hybrid128k-readmore|hybrid128k-readfar)
                  echo "$HYBRID --logn-attn $LOGN ${CURRICULUM128K/--mix $MIX128K/--mix $(mix_variant "${1#hybrid128k-}")} $OPT" ;;
        hybrid128k-readwide) echo "$HYBRID --logn-attn $LOGN ${CURRICULUM128K/--mix $MIX128K/--mix $(mix_variant read)} $OPT" ;;
        hybrid128k-readconv) echo "$HYBRID --logn-attn $LOGN --qk-conv ${QKCONV:-4} ${CURRICULUM128K/--mix $MIX128K/--mix $(mix_variant read)} $OPT" ;;
        hybrid128k-readconvpart|hybrid128k-readfirst|hybrid128k-readsink|hybrid128k-readsink2x|hybrid128k-readsinkhd128|hybrid128k-readsinkhd128x3)
                  local data=read sink="" cur=$CURRICULUM128K
                  [ "$base" = hybrid128k-readfirst ] && data=readfirst
                  [ "${base#hybrid128k-readsink}" != "$base" ] && sink=--attn-sink
                  [ "$base" = hybrid128k-readsink2x ] && cur=$(curriculum_times 2)
                  [ "$base" = hybrid128k-readsinkhd128x3 ] && cur=$(curriculum_times 3)
                  echo "$HYBRID --logn-attn $LOGN --qk-conv $w --qk-conv-layers ${QKCONV_LAYERS:-3,5} $sink $(pointer_flag "$1") $(slope_flag "$1")"\
                       "${cur/--mix $MIX128K/--mix $(mix_variant $data)} $OPT" ;;
        hybrid1m) echo "$HYBRID --logn-attn $LOGN --init-from $WORK/hybrid128k$2 --seq-len $W1M --batch 1 --steps ${STEPS_1M:-24}"\
                       "--mix $(shard "$W1M"):0.5 $OPT_1M" ;;
        hybrid1m-pkfar|hybrid1m-whole|hybrid1m-leadmk|hybrid1m-read|hybrid1m-readmore|hybrid1m-readfar)
                  echo "$HYBRID --logn-attn $LOGN --init-from $WORK/hybrid128k-${1#hybrid1m-}$2 --seq-len $W1M --batch 1 --steps ${STEPS_1M:-24}"\
                       "--mix $(mix_variant_1m "${1#hybrid1m-}"):0.5 $OPT_1M" ;;
        hybrid1m-readconv|hybrid1m-readconvpart|hybrid1m-readsink|hybrid1m-readsink2x|hybrid1m-readsinkhd128|hybrid1m-readsinkhd128x3)
                  local layers=""; [ "$base" != hybrid1m-readconv ] && layers="--qk-conv-layers ${QKCONV_LAYERS:-3,5}"
                  [ "${base#hybrid1m-readsink}" != "$base" ] && layers+=" --attn-sink $(pointer_flag "$1") $(slope_flag "$1")"
                  echo "$HYBRID --logn-attn $LOGN --qk-conv $w $layers --init-from $WORK/hybrid128k-${1#hybrid1m-}$2 --seq-len $W1M"\
                       "--batch 1 --steps ${STEPS_1M:-24} --mix $(mix_variant_1m read):0.5 $OPT_1M" ;;
        *) echo "unknown model $1" >&2; return 1 ;;
    esac
}
# How many GPUs a recipe trains over (train --cp): the 1M windows take every visible GPU.
# CP=P overrides it; SIMULATE_RANKS=1 runs the ranks as threads on one GPU (a check of the path, not a speed).
M_CP() {  # the q/k convolution does not run under --cp: its recipe takes one rank whatever CP says
    case $1 in hybrid1m-readconv|hybrid1m-readconvpart|hybrid1m-readsink*) echo 1; return ;; esac
    [ -n "${CP:-}" ] && { echo "$CP"; return; }
    case $1 in hybrid1m*) gpu_count ;; *) echo 1 ;; esac
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
WORDS=${ANSWER_WORDS:-3}  # a quote's answer: a third word leaves little to guess (notes/reading.md, Result 12)
# Items per (task, length, depth): 10 up to 128K (50 per task and length: a 2% step), fewer past it,
# where one item's prefill takes seconds.
samples_at() { [ "$1" -le 131072 ] && echo "${SAMPLES:-10}" || echo "${SAMPLES_LONG:-2}"; }

summary=() failures=0
fail_if() { [ "$1" -eq 0 ] || failures=$((failures + 1)); }  # a step's exit code: the script's exit is 1 if any failed
for step in "$@"; do
    t0=$SECONDS
    IFS=: read -r what model stop <<< "$step"
    name=${model%@*}                                          # the recipe
    run=""; [[ $model == *@* ]] && run="@${model##*@}"        # the run: @S, trained with --seed S
    seed=(); [ -n "$run" ] && seed=(--seed "${run#@}")
    case $what in
        data)
            # doc tokens:needle every:pass key every, for each retrieval shard, made side by side
            pids=()
            for spec in ${SHARDS:-2048:512:1024 8192:512:2048 32768:512:4096 262144:1024:16384 1048576:1024:16384}; do
                IFS=: read -r len every pk <<< "$spec"
                f=$(shard "$len")
                [ -f "$f" ] || "$BIN/data_tool" task-shard --data "$CORPUS" --doc-tokens "$len" --tokens "${SHARD_TOKENS:-50M}" \
                    --needle-every "$every" --passkey-every "$pk" --seed 7 --out "$f" > "$f.log" 2>&1 &
                pids+=($!)
                # LEAD=F: also the shards whose documents open with a needle in a fraction F (the -lead models)
                [ -z "${LEAD:-}" ] || [ -f "${f%.bin}-lead.bin" ] || "$BIN/data_tool" task-shard --data "$CORPUS" \
                    --doc-tokens "$len" --tokens "${SHARD_TOKENS:-50M}" --needle-every "$every" --passkey-every "$pk" --lead-needle "$LEAD" --seed 7 \
                    --out "${f%.bin}-lead.bin" > /dev/null 2>&1 &
                pids+=($!)
            done
            made=" "  # a file named twice (the tests' 1M window can equal twice their 128K one) is made once
            for v in ${VARIANTS:-}; do  # the depth-0 variants' shards (above)
                # doc tokens:needle every:pass key every (as the shard it replaces):pass key every, far
                for spec in "$W3:512:$((W3 / 8)):$((W3 / 2))" "$((2 * W4)):1024:$((W4 / 8)):$((W4 / 2))" "$W1M:1024:16384:$((W1M / 2))"; do
                    IFS=: read -r len every pk far <<< "$spec"
                    case $v in
                        pkfar) extra=(--passkey-every "$far") ;;
                        leadmk) extra=(--passkey-every "$pk" --lead-needle 0.5 --lead-kind multikey) ;;
                        whole) [ "$len" -ne $((2 * W4)) ] && continue; len=$W4; extra=(--passkey-every "$pk") ;;
                        read|readmore|readfar) continue ;;  # below
                        *) echo "data: unknown variant $v (pkfar, whole, leadmk, read, readmore, readfar)"; fail_if 1; continue ;;
                    esac
                    f=$(vshard "$len" "$v"); [ "$v" = whole ] && f=$(shard "$len")
                    [[ $made == *" $f "* ]] && continue
                    made+="$f "
                    [ -f "$f" ] || "$BIN/data_tool" task-shard --data "$CORPUS" --doc-tokens "$len" --tokens "${SHARD_TOKENS:-50M}" \
                        --needle-every "$every" "${extra[@]}" --seed 7 --out "$f" > "$f.log" 2>&1 &
                    pids+=($!)
                done
            done
            # read, readmore, readfar, readfirst: pkfar's shards at every window, each document also carrying quoted
            # lines of its own text and repeated passages (data_tool task-shard --quote-every, --repeat-every)
            for v in ${VARIANTS:-}; do
                case $v in
                    read) copies=(--quote-every "${QUOTE_EVERY:-256}" --repeat-every "${REPEAT_EVERY:-2048}") ;;
                    readfar) copies=(--quote-every "${QUOTE_EVERY:-256}" --repeat-every "${REPEAT_EVERY:-2048}") ;;  # far below
                    readfirst) copies=(--quote-every "${QUOTE_EVERY:-256}" --repeat-every "${REPEAT_EVERY:-2048}"
                                       --copy-first-one-in "${READFIRST_ONE_IN:-2}") ;;
                    readmore) copies=(--quote-every "${READMORE_QUOTE_EVERY:-64}" --repeat-every "${READMORE_REPEAT_EVERY:-1024}"
                                      --repeat-tokens "${READMORE_REPEAT_TOKENS:-512}") ;;
                    *) continue ;;
                esac
                # the two short windows as the recipe's own shards (SHARDS), the long ones as pkfar's
                short_specs=""
                for spec in ${SHARDS:-2048:512:1024 8192:512:2048}; do
                    IFS=: read -r len every pk <<< "$spec"
                    { [ "$len" -eq "$W1" ] || [ "$len" -eq "$W2" ]; } && short_specs+=" $len:$every:$pk"
                done
                for spec in $short_specs "$W3:512:$((W3 / 2))" "$((2 * W4)):1024:$((W4 / 2))" "$W1M:1024:$((W1M / 2))"; do
                    IFS=: read -r len every far <<< "$spec"
                    f=$(vshard "$len" "$v")
                    [[ $made == *" $f "* ]] && continue
                    made+="$f "
                    # readfar: read's copies, those in windows past the first drawn READFAR_MIN (2048) or more tokens back;
                    # readfirst: its opening the first 1/READFIRST_SPAN (32) of a document, at least 64 tokens
                    far_copies=(); [ "$v" = readfar ] && [ "$len" -gt "$W1" ] && far_copies=(--copy-min-distance "${READFAR_MIN:-2048}")
                    span=$((len / ${READFIRST_SPAN:-32})); [ "$span" -ge 64 ] || span=64
                    [ "$v" = readfirst ] && far_copies=(--copy-first-tokens "$span")
                    [ -f "$f" ] || "$BIN/data_tool" task-shard --data "$CORPUS" --doc-tokens "$len" --tokens "${SHARD_TOKENS:-50M}" \
                        --needle-every "$every" --passkey-every "$far" "${copies[@]}" "${far_copies[@]}" --seed 7 --out "$f" > "$f.log" 2>&1 &
                    pids+=($!)
                done
            done
            # Quote items (and their controls) over the held-out documents, at the grid's lengths; over a
            # book and a source tree no model trained on (QUOTE_BOOK, QUOTE_TREE), at lengths and depths
            # off the grid.
            for L in "${LENGTHS[@]}"; do
                [ -f "$D/eval_quote_$L.jsonl" ] || "$BIN/data_tool" tasks --data "$CORPUS" --task quote --lengths "$L" \
                    --depths 0,0.25,0.5,0.75,1 --samples "$(samples_at "$L")" --seed 31 --answer-words "$WORDS" --out "$D/eval_quote_$L.jsonl" > /dev/null &
                pids+=($!)
            done
            for q in "qbook:${QUOTE_BOOK:-$CARRY/demo/debian-policy.txt}:${QBOOK_LENGTHS:-6000,50000,200000}" \
                     "qtree:${QUOTE_TREE:-$CARRY/demo/fs-nfs.txt}:${QTREE_LENGTHS:-6000,100000,600000}"; do
                IFS=: read -r kind src lens <<< "$q"
                [ -e "$src" ] || continue
                [ -f "$D/eval_$kind.jsonl" ] || "$BIN/data_tool" tasks --data "$CORPUS" --haystack "$src" --task quote --lengths "$lens" \
                    --depths 0,0.1,0.33,0.6,0.9 --samples "${QUOTE_SAMPLES:-2}" --seed 37 --answer-words "$WORDS" --out "$D/eval_$kind.jsonl" > /dev/null &
                pids+=($!)
            done
            for L in "${LENGTHS[@]}"; do
                [ -f "$D/eval_$L.jsonl" ] || "$BIN/data_tool" tasks --data "$CORPUS" --task passkey,multikey --lengths "$L" \
                    --depths 0,0.25,0.5,0.75,1 --samples "$(samples_at "$L")" --needles 4 --seed 11 --out "$D/eval_$L.jsonl" > /dev/null &
                pids+=($!)
            done
            # A context's opening, asked more often than the grid's 10 items a depth: pass keys and quotes
            # (with their controls) at depth 0, START_SAMPLES (30) a length, at START_LENGTHS.
            [ -f "$D/eval_start.jsonl" ] || "$BIN/data_tool" tasks --data "$CORPUS" --task passkey,quote --lengths "${START_LENGTHS:-32768,131072}" \
                --depths 0 --samples "${START_SAMPLES:-30}" --seed 43 --answer-words "$WORDS" --out "$D/eval_start.jsonl" > /dev/null &
            pids+=($!)
            [ -f "$D/eval_filler.jsonl" ] || "$BIN/data_tool" tasks --data "$CORPUS" --haystack filler --task passkey --lengths "${FILLER_LENGTHS:-2048,32768}" \
                --depths 0,0.5,1 --seed 13 --out "$D/eval_filler.jsonl" > /dev/null &
            pids+=($!)
            # Off the grid: lengths, depths and a seed the grid never uses, over the held-out documents
            # and over a source tree no model trained on (this repository's own code, OFFGRID_TREE).
            [ -f "$D/eval_offgrid.jsonl" ] || "$BIN/data_tool" tasks --data "$CORPUS" --task passkey,multikey \
                --lengths "${OFFGRID_LENGTHS:-3000,120000,1000000}" --depths 0,0.1,0.33,0.6,0.9 --samples 1 --seed 23 \
                --out "$D/eval_offgrid.jsonl" > /dev/null &
            pids+=($!)
            tree=${OFFGRID_TREE:-$HERE/../layers}
            [ -f "$D/eval_tree.jsonl" ] || "$BIN/data_tool" tasks --data "$CORPUS" --haystack "$tree" --task passkey,multikey \
                --lengths "${TREE_LENGTHS:-5000,100000}" --depths 0,0.1,0.33,0.6,0.9 --samples 1 --seed 29 --out "$D/eval_tree.jsonl" > /dev/null &
            pids+=($!)
            bad=0
            for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
            fail_if "$bad"
            [ "$bad" -eq 0 ] || echo "data: $bad of ${#pids[@]} commands failed: $(tail -qn1 "$D"/*.bin.log 2>/dev/null | grep -i error | head -2)"
            summary+=("data: $((SECONDS - t0)) s, $bad failed: $(ls "$D" | grep -v '\.log$' | tr '\n' ' ')") ;;
        train)  # at most 8 minutes unless told: a device call (10 minutes) must end with a checkpoint
            if grep -qE '^(\[rank 0\] )?done:' "$OUT/${model}_train.log" 2>/dev/null; then
                summary+=("train $model: done before: $(grep -E '^(\[rank 0\] )?done:' "$OUT/${model}_train.log" | tail -1)")
                continue
            fi
            args=$(M_ARGS "$name" "$run") || { fail_if 1; continue; }
            cp=$(M_CP "$name")
            resume=(); ls "$WORK/$model"/ckpt_*.safetensors > /dev/null 2>&1 && resume=(--resume)
            # A resumed run takes its weights from its own checkpoint, not --init-from's.
            [ ${#resume[@]} -gt 0 ] && args=$(sed -E 's/--init-from [^ ]+//' <<< "$args")
            launch=(); par=()
            if [ "$cp" -gt 1 ]; then
                par=(--cp "$cp")
                if [ "$DEVICE" = cuda ] && [ -z "${SIMULATE_RANKS:-}" ]; then launch=("$HERE/launch.sh" "$cp"); else par+=(--simulate-ranks "$cp"); fi
            fi
            # shellcheck disable=SC2086,SC2046
            "${launch[@]}" "$BIN/train" "${COMMON[@]}" $(M_MODEL "$name") $args "${seed[@]}" "${par[@]}" --time-limit "${stop:-8}" "${resume[@]}" \
                --out "$WORK/$model" >> "$OUT/${model}_train.log" 2>&1
            code=$?; fail_if $code
            summary+=("train $model: exit $code ($((SECONDS - t0)) s): $(grep -E '^(\[rank 0\] )?(done|stopped|error)' "$OUT/${model}_train.log" | tail -1)")
            grep -E '^(\[rank 0\] )?(model|stage|step +[0-9]+/[0-9]+ \| (loss|stage))' "$OUT/${model}_train.log" | tail -4 ;;
        eval)  # the lengths in [EVAL_MIN, EVAL_MAX] that the model's context allows; EVAL_TAG names the files apart
            read -r maxlen ctxargs <<< "$(M_EVAL "$name")"
            lo=${EVAL_MIN:-0} hi=$(( ${EVAL_MAX:-$maxlen} < maxlen ? ${EVAL_MAX:-$maxlen} : maxlen )) tag=${EVAL_TAG:-}
            ctxargs=${ctxargs/--ctx $maxlen/--ctx $hi}  # a cache no longer than the longest item
            pre=$OUT/${model}
            # CTL=N: the same model reading only the last N tokens of each prompt (a model that cannot
            # see far), reported as the run ctlN-MODEL
            [ -n "${CTL:-}" ] && ctxargs="--ctx $CTL --truncate" && pre=$OUT/ctl$CTL-${model}
            # The grid's files, then the off-grid and source-tree ones, cut to the lengths in range.
            : > "${pre}_tasks.jsonl"
            for L in "${LENGTHS[@]}"; do
                [ "$L" -ge "$lo" ] && [ "$L" -le "$hi" ] && cat "$D/eval_$L.jsonl" "$D/eval_quote_$L.jsonl" >> "${pre}_tasks.jsonl" 2>/dev/null
            done
            for f in offgrid tree qbook qtree start; do
                [ -f "$D/eval_$f.jsonl" ] || { : > "${pre}_$f.jsonl"; continue; }
                awk -v lo="$lo" -v hi="$hi" 'match($0, /"length": *[0-9]+/) { n = substr($0, RSTART, RLENGTH); sub(/.*: */, "", n); if (n + 0 >= lo && n + 0 <= hi) print }' \
                    "$D/eval_$f.jsonl" > "${pre}_$f.jsonl"
            done
            code=0 scored=()
            for f in tasks offgrid tree qbook qtree start; do
                [ -s "${pre}_$f.jsonl" ] || continue
                out=${pre}_${f/tasks/needles}$tag
                # shellcheck disable=SC2086
                "$BIN/infer" --device "$DEVICE" --checkpoint "$WORK/$model" --tasks "${pre}_$f.jsonl" $ctxargs \
                    --tasks-out "$out" > "$out.log" 2>> "${pre}_eval$tag.err" || code=$?
                command -v gnuplot > /dev/null && [ -s "$out.csv" ] && "$HERE/plot_heatmap.sh" "$out.csv" > /dev/null 2>> "${pre}_eval$tag.err"  # $out.png
                scored+=("${f/tasks/grid} $(grep -hE '^tasks' "$out.log" | grep -oE '[0-9]+ of [0-9]+ correct')")
            done
            if [ "$lo" -eq 0 ] && [ -z "${CTL:-}" ]; then  # the classic filler haystack, at 2K and 32K
                # shellcheck disable=SC2086
                "$BIN/infer" --device "$DEVICE" --checkpoint "$WORK/$model" --tasks "$D/eval_filler.jsonl" ${ctxargs/1048576/32768} \
                    --tasks-out "${pre}_filler" > "${pre}_filler.log" 2>> "${pre}_eval$tag.err"
                command -v gnuplot > /dev/null && "$HERE/plot_heatmap.sh" "${pre}_filler.csv" > /dev/null 2>> "${pre}_eval$tag.err"
                scored+=("filler $(grep -hE '^tasks' "${pre}_filler.log" | grep -oE '[0-9]+ of [0-9]+ correct')")
            fi
            fail_if $code
            rm -f "${pre}_tasks.jsonl" "${pre}_offgrid.jsonl" "${pre}_tree.jsonl" "${pre}_qbook.jsonl" "${pre}_qtree.jsonl" "${pre}_start.jsonl"
            summary+=("eval $model [$lo, $hi]: exit $code ($((SECONDS - t0)) s): $(IFS='|'; echo "${scored[*]}")")
            grep -E '^  (passkey|multikey|quote|all) ' "${pre}_needles$tag.log" 2>/dev/null; tail -2 "${pre}_eval$tag.err" ;;
        positions)
            read -r maxlen ctxargs <<< "$(M_EVAL "$name")"
            # shellcheck disable=SC2086
            "$BIN/infer" --device "$DEVICE" --checkpoint "$WORK/$model" --perplexity "$CORPUS/val.bin" --min-doc-tokens "${MIN_DOC:-262144}" \
                --per-position "$OUT/${model}_positions.csv" ${ctxargs/--truncate/} > "$OUT/${model}_ppl.log" 2>&1
            code=$?; fail_if $code
            summary+=("positions $model: exit $code ($((SECONDS - t0)) s): $(grep -E '^file' "$OUT/${model}_ppl.log")") ;;
        demo)
            read -r maxlen ctxargs <<< "$(M_EVAL "$name")"
            : > "$OUT/${model}_demo.txt"
            # DEMOS: "FILE:DEPTH" pairs; the cue is the line starting at DEPTH of FILE, the prompt is all of
            # FILE then that line again, and the truth is what followed it in FILE.
            for demo in ${DEMOS:-}; do
                file=${demo%:*} depth=${demo##*:}
                "$HERE/demo_prompt.sh" "$file" "$depth" "$OUT/${model}_prompt.txt" "$OUT/${model}_truth.txt" || { fail_if 1; continue; }
                # shellcheck disable=SC2086
                "$BIN/infer" --device "$DEVICE" --checkpoint "$WORK/$model" --prompt-file "$OUT/${model}_prompt.txt" \
                    ${ctxargs/--truncate/} --temperature 0 --max-new "${DEMO_TOKENS:-48}" > "$OUT/${model}_demo.out" 2> "$OUT/${model}_demo.err"
                fail_if $?
                {
                    echo "== $(basename "$file") at depth $depth, $(wc -c < "$OUT/${model}_prompt.txt") bytes of prompt; cue: $(tail -n 1 "$OUT/${model}_prompt.txt")"
                    echo "-- the text after the cue in the file:"; cat "$OUT/${model}_truth.txt"; echo
                    echo "-- $model continues:"; grep -v '^prompt:\|^generated\|^context' "$OUT/${model}_demo.out" | tail -c 600; echo
                    tail -n 1 "$OUT/${model}_demo.err"
                } >> "$OUT/${model}_demo.txt"
            done
            rm -f "$OUT/${model}_prompt.txt" "$OUT/${model}_truth.txt"
            summary+=("demo $model: $((SECONDS - t0)) s: $OUT/${model}_demo.txt") ;;
        table)
            "$HERE/study_table.sh" "$OUT" "${LENGTHS[@]}" ;;
        *) echo "unknown step $step"; fail_if 1 ;;
    esac
done
echo; printf '%s\n' "${summary[@]}"
[ "$failures" -eq 0 ]
