#!/usr/bin/env bash
# The retrieval study's driver (scripts/retrieval_study.sh, run_lanes.sh, study_table.sh,
# demo_prompt.sh) end to end on the CPU, at toy sizes, on the small test corpus (made by
# tests/test_data_cli.sh): a GPU call that finds a broken step costs minutes of device time, so
# every step the device calls use runs here first. Two runs of the hybrid recipe (seeds 1 and 2,
# side by side as two lanes), the second cut by its time limit and resumed; its 1M-style stage
# from the first run's weights over 2 ranks (train --cp 2 as threads); eval, positions, demo; the
# table's median and worst, checked against the per-run numbers.
# Usage: tests/test_retrieval_study.sh [CORPUS_DIR]   Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
corpus=${1:-build/test_corpus}
work=build/test_retrieval_study
rm -rf "$work" && mkdir -p "$work/carry/bin"
# shellcheck source=tests/lib.sh
source tests/lib.sh
for bin in build/train build/infer build/data_tool; do [ -x $bin ] || bail "$bin not built"; done
[ -f "$corpus/val.bin" ] || bail "no corpus at $corpus (run tests/test_data_cli.sh first)"
for bin in train infer data_tool; do ln -s "$PWD/build/$bin" "$work/carry/bin/$bin"; done
ln -s "$PWD/$corpus" "$work/carry/corpus-long"

# Toy sizes: windows of 512..2048 tokens, 2048 tokens a step, 8 steps, a model of 6 layers of width 64.
export CARRY=$work/carry STUDY_OUT=$work/out WORK=$work/runs DEVICE=cpu OMP_NUM_THREADS=1 \
    MODEL_ARGS="--layers 6 --width 64 --heads 1 --rope-theta 1e7" WIDE_ARGS="--layers 6 --width 128 --heads 2 --rope-theta 1e7" HD128_ARGS="--layers 6 --width 128 --heads 1 --rope-theta 1e7" WINDOWS="512 1024 2048 2048" TPS=2048 TOKENS=16384 \
    HBLOCK=64 HWINDOW=256 W1M=4096 STEPS_1M=2 SHARDS="512:2048:512 1024:1024:1024 2048:1024:2048 4096:1024:4096" \
    READFAR_MIN=256 SHARD_TOKENS=40K LENGTHS="600 1200" SAMPLES=1 OFFGRID_LENGTHS=700,1500 TREE_LENGTHS=800 OFFGRID_TREE=$PWD/core FILLER_LENGTHS=700 \
    MIN_DOC=1000 QUOTE_BOOK=$PWD/$corpus/bible.txt QBOOK_LENGTHS=700 QUOTE_TREE=$PWD/core QTREE_LENGTHS=800 QUOTE_SAMPLES=1 \
    START_LENGTHS=1200 START_SAMPLES=3
study=scripts/retrieval_study.sh

out=$(VARIANTS="pkfar whole leadmk read readmore readfar readfirst" $study data 2>&1)
data_ok=1
for f in tasks512.bin tasks1k.bin tasks2k.bin tasks4k.bin eval_600.jsonl eval_1200.jsonl eval_filler.jsonl eval_offgrid.jsonl eval_tree.jsonl \
         tasks2k-pkfar.bin tasks4k-pkfar.bin tasks2k-leadmk.bin tasks4k-leadmk.bin \
         tasks512-read.bin tasks1k-read.bin tasks2k-read.bin tasks4k-read.bin tasks512-readmore.bin tasks4k-readmore.bin \
         tasks512-readfar.bin tasks1k-readfar.bin tasks4k-readfar.bin tasks512-readfirst.bin tasks4k-readfirst.bin \
         eval_quote_600.jsonl eval_quote_1200.jsonl eval_qbook.jsonl eval_qtree.jsonl eval_start.jsonl; do
    [ -s "$WORK/data/$f" ] || { data_ok=0; fail "data: $f missing ($(tail -1 <<< "$out"))"; }
done
[ $data_ok -eq 1 ] && pass "data: every shard (named by its document length) and task file, made side by side"
grep -q 'quoted line every 256' "$WORK/data/tasks2k-read.bin.log" && grep -q 'quoted line every 64 tokens, a repeated passage of 16-512' "$WORK/data/tasks2k-readmore.bin.log" && grep -q '"task": *"quote-control"' "$WORK/data/eval_qtree.jsonl" &&
    pass "data: the read shards carry quoted lines (readmore more, and longer passages); quote items come with their controls" ||
    fail "data: read shards or quote items: $(tail -1 "$WORK/data/tasks2k-read.bin.log")"
# Answers of up to ANSWER_WORDS (3) words: fewer only where the line ends.
words=$(python3 -c 'import json, sys; print(max(len(json.loads(l)["answer"].split()) for f in sys.argv[1:] for l in open(f)))' \
        "$WORK/data/eval_quote_600.jsonl" "$WORK/data/eval_qbook.jsonl" "$WORK/data/eval_qtree.jsonl" 2>&1)
[ "$words" = 3 ] && pass "data: quote items' answers of up to 3 words (ANSWER_WORDS)" || fail "data: quote answers of up to $words words"
grep -q 'each from 256 or more tokens back' "$WORK/data/tasks1k-readfar.bin.log" && grep -q 'each from 256 or more' "$WORK/data/tasks4k-readfar.bin.log" &&
    grep -q 'quoted line every 256' "$WORK/data/tasks512-readfar.bin.log" && ! grep -q 'or more tokens back' "$WORK/data/tasks512-readfar.bin.log" &&
    pass "data: readfar's copies past the first window come from READFAR_MIN or more tokens back, its first window's as read's" ||
    fail "data: readfar's shards: $(tail -qn1 "$WORK"/data/tasks512-readfar.bin.log "$WORK"/data/tasks1k-readfar.bin.log)"
grep -q 'one in 2 from the first 64 tokens' "$WORK/data/tasks512-readfirst.bin.log" && grep -q 'one in 2 from the first 128 tokens' "$WORK/data/tasks4k-readfirst.bin.log" &&
    ! grep -q 'first lines' "$WORK/data/tasks4k-read.bin.log" &&
    pass "data: readfirst's shards take one copy in READFIRST_ONE_IN (2) from the first 1/32 of a document (at least 64 tokens), read's as before" ||
    fail "data: readfirst's shards: $(tail -qn1 "$WORK"/data/tasks4k-readfirst.bin.log)"
start=$(python3 -c 'import json, sys
items = [json.loads(l) for l in open(sys.argv[1])]
print(sorted(set(i["task"] for i in items)), sorted(set(i["depth"] for i in items)), sorted(set(i["length"] for i in items)), len(items))' "$WORK/data/eval_start.jsonl" 2>&1)
[ "$start" = "['passkey', 'quote', 'quote-control'] [0] [1200] 9" ] &&
    pass "data: the opening's file: START_SAMPLES pass keys and quotes (with controls) at depth 0, at START_LENGTHS" || fail "data: eval_start.jsonl: $start"
grep -q '"length": *700' "$WORK/data/eval_offgrid.jsonl" && grep -q '"length": *800' "$WORK/data/eval_tree.jsonl" &&
    pass "data: the off-grid lengths, and the source tree's items" || fail "data: off-grid or tree items missing"

# The needle/question census of a shard: every pass-key question is counted once.
census=$(python3 scripts/needle_distances.py "$WORK/data/tasks2k.bin" 2048 "$corpus/tokenizer.model" build/data_tool 2>&1)
n=$(sed -n 's/^  pass-key questions: //p' <<< "$census" | head -1)
sum=$(sed -n '/pass-key questions/,/multi-key questions/{/questions/!p}' <<< "$census" | grep -oE ': [0-9]+$' | tr -d ': ' | awk '{ s += $1 } END { print s }')
[ -n "$n" ] && [ "$n" -gt 0 ] && [ "$sum" = "$n" ] && pass "needle_distances: $n pass-key questions, each counted once" ||
    fail "needle_distances: $census"

# Two runs side by side (lanes on "GPUs" 0 and 1: the CPU ignores them); run 2 in two pieces.
LANE_LOGS=$work/lanes scripts/run_lanes.sh "0|$study train:hybrid128k@1" "1|$study train:hybrid128k@2:0.0001" > "$work/lanes.log" 2>&1
lanes=$?
[ $lanes -eq 0 ] && grep -q '^done' "$STUDY_OUT/hybrid128k@1_train.log" && grep -q '^stopped' "$STUDY_OUT/hybrid128k@2_train.log" &&
    pass "run_lanes: two runs side by side; run 2 stopped by its time limit" || fail "lanes (exit $lanes): $(tail -5 "$work/lanes.log")"
$study train:hybrid128k@2 > "$work/resume.log" 2>&1
grep -q '^resumed from' "$STUDY_OUT/hybrid128k@2_train.log" && grep -q '^done' "$STUDY_OUT/hybrid128k@2_train.log" &&
    pass "train: a second invocation resumes run 2 to its end" || fail "resume: $(tail -3 "$STUDY_OUT/hybrid128k@2_train.log")"
s1=$(grep -E '^step +8/8 \| loss' "$STUDY_OUT/hybrid128k@1_train.log"); s2=$(grep -E '^step +8/8 \| loss' "$STUDY_OUT/hybrid128k@2_train.log")
[ -n "$s1" ] && [ -n "$s2" ] && [ "${s1%%| lr*}" != "${s2%%| lr*}" ] && pass "the seeds make different runs (${s1%%| lr*} / ${s2%%| lr*})" ||
    fail "the two seeds' last steps: '$s1' '$s2'"
grep -q 'stage: windows of 2048 tokens, 1 per step' "$STUDY_OUT/hybrid128k@1_train.log" && grep -q 'none in layers 1,3,5' "$STUDY_OUT/hybrid128k@1_train.log" &&
    pass "hybrid128k: the curriculum reaches its last window; layers 1, 3, 5 are NoPE" || fail "hybrid128k's log: $(grep -E 'stage|rotary' "$STUDY_OUT/hybrid128k@1_train.log" | head -4)"

# The depth-0 variants start on their own shards (one step each).
for v in pkfar whole leadmk read readmore readfar readwide readconv readconvpart readfirst readsink readsink2x readsinkhd128 readsinkhd128x3 readsinkhd128x3c8 readsinkhd128x3c8ptr readsinkhd128x3c8ls; do
    $study train:hybrid128k-$v@1:0.0001 > "$work/v_$v.log" 2>&1
    shard=tasks4k-${v/readwide/read}.bin; shard=${shard/ptr.bin/.bin}; shard=${shard/ls.bin/.bin}; shard=${shard/readconvpart/read}; shard=${shard/readconv/read}; shard=${shard/readsink2x/read}
    shard=${shard/readsinkhd128x3c8/read}; shard=${shard/readsinkhd128x3/read}; shard=${shard/readsinkhd128/read}; shard=${shard/readsink/read}
    grep -q '^stopped after step' "$STUDY_OUT/hybrid128k-$v@1_train.log" && { [ $v = whole ] || grep -q "$shard" "$STUDY_OUT/hybrid128k-$v@1_train.log"; } ||
        { fail "hybrid128k-$v: $(tail -3 "$STUDY_OUT/hybrid128k-$v@1_train.log")"; continue; }
    pass "hybrid128k-$v: trains on its own shards"
done
grep -q '^model: 6 layers, width 128, 2 heads' "$STUDY_OUT/hybrid128k-readwide@1_train.log" && grep -q '^model: 6 layers, width 64, 1 heads' "$STUDY_OUT/hybrid128k-read@1_train.log" &&
    pass "hybrid128k-readwide: read's data at WIDE_ARGS's width, read at MODEL_ARGS's" ||
    fail "readwide's model: $(grep '^model:' "$STUDY_OUT"/hybrid128k-read*@1_train.log)"
grep -q 'their queries and keys convolved over 4 tokens' "$STUDY_OUT/hybrid128k-readconv@1_train.log" &&
    ! grep -q 'convolved' "$STUDY_OUT/hybrid128k-read@1_train.log" && pass "hybrid128k-readconv: read's with the q/k convolution of 4" ||
    fail "readconv's model: $(grep '^rotary' "$STUDY_OUT"/hybrid128k-read*@1_train.log)"
grep -q 'their queries and keys convolved over 4 tokens in layers 3,5 only' "$STUDY_OUT/hybrid128k-readconvpart@1_train.log" &&
    pass "hybrid128k-readconvpart: readconv's convolution in NoPE layers 3 and 5 only" ||
    fail "readconvpart's model: $(grep '^rotary' "$STUDY_OUT/hybrid128k-readconvpart@1_train.log")"
grep -q 'their queries and keys convolved over 4 tokens in layers 3,5 only' "$STUDY_OUT/hybrid128k-readfirst@1_train.log" &&
    pass "hybrid128k-readfirst: readconvpart's model on readfirst's shards" ||
    fail "readfirst's model: $(grep '^rotary' "$STUDY_OUT/hybrid128k-readfirst@1_train.log")"
grep -q 'their queries and keys convolved over 4 tokens in layers 3,5 only' "$STUDY_OUT/hybrid128k-readsink@1_train.log" &&
    grep -q '^attention sinks' "$STUDY_OUT/hybrid128k-readsink@1_train.log" && ! grep -q '^attention sinks' "$STUDY_OUT/hybrid128k-readconvpart@1_train.log" &&
    pass "hybrid128k-readsink: readconvpart's model with attention sinks" ||
    fail "readsink's model: $(grep -E '^(rotary|attention sinks)' "$STUDY_OUT/hybrid128k-readsink@1_train.log")"
sched() { grep -E '^(stage from|data:)' "$STUDY_OUT/hybrid128k-$1@1_train.log" | sed -E 's/.*(tokens per step, [0-9]+ steps).*/\1/' | tr '\n' ' '; }
[ "$(sched readsink)" = "stage from step 0: windows of 512 tokens, 4 per step stage from step 4: windows of 1024 tokens, 2 per step stage from step 5: windows of 2048 tokens, 1 per step stage from step 6: windows of 2048 tokens, 1 per step tokens per step, 8 steps " ] &&
    [ "$(sched readsink2x)" = "stage from step 0: windows of 512 tokens, 4 per step stage from step 8: windows of 1024 tokens, 2 per step stage from step 10: windows of 2048 tokens, 1 per step stage from step 12: windows of 2048 tokens, 1 per step tokens per step, 16 steps " ] &&
    grep -q '^attention sinks' "$STUDY_OUT/hybrid128k-readsink2x@1_train.log" &&
    pass "hybrid128k-readsink2x: readsink's model with every stage's steps doubled" ||
    fail "readsink2x's schedule: '$(sched readsink2x)' against readsink's '$(sched readsink)'"
# A heads-of-128 recipe: run V@1 has HD128_ARGS's heads, sinks, the convolution over W tokens in
# layers 3 and 5, and the schedule SCHED; WHAT says what that means.
hd128_recipe() {
    local v=$1 w=$2 want=$3 what=$4 log=$STUDY_OUT/hybrid128k-$1@1_train.log
    grep -q '^model: 6 layers, width 128, 1 heads' "$log" && grep -q '^attention sinks' "$log" &&
        grep -q "their queries and keys convolved over $w tokens in layers 3,5 only" "$log" && [ "$(sched "$v")" = "$want" ] &&
        pass "hybrid128k-$v: $what" ||
        fail "$v's model and schedule: $(grep -E '^(model|attention sinks|rotary)' "$log") '$(sched "$v")'"
}
hd128_recipe readsinkhd128 4 "$(sched readsink)" "readsink's model and schedule at HD128_ARGS's heads"
hd128_recipe readsinkhd128x3 4 "stage from step 0: windows of 512 tokens, 4 per step stage from step 12: windows of 1024 tokens, 2 per step stage from step 15: windows of 2048 tokens, 1 per step stage from step 18: windows of 2048 tokens, 1 per step tokens per step, 24 steps " \
    "readsinkhd128's model with every stage's steps tripled"
hd128_recipe readsinkhd128x3c8 8 "$(sched readsinkhd128x3)" "readsinkhd128x3 with its convolution over 8 tokens (the name's c8)"
hd128_recipe readsinkhd128x3c8ptr 8 "$(sched readsinkhd128x3)" "readsinkhd128x3c8 with the name's ptr"
grep -q '^pointer: a copy head' "$STUDY_OUT/hybrid128k-readsinkhd128x3c8ptr@1_train.log" && ! grep -q '^pointer' "$STUDY_OUT/hybrid128k-readsinkhd128x3c8@1_train.log" &&
    pass "hybrid128k-readsinkhd128x3c8ptr: readsinkhd128x3c8 with a pointer (train --pointer)" ||
    fail "readsinkhd128x3c8ptr's pointer: $(grep -E '^(model|pointer)' "$STUDY_OUT"/hybrid128k-readsinkhd128x3c8*@1_train.log)"
hd128_recipe readsinkhd128x3c8ls 8 "$(sched readsinkhd128x3)" "readsinkhd128x3c8 with the name's ls"
grep -q 'each head learns its slope' "$STUDY_OUT/hybrid128k-readsinkhd128x3c8ls@1_train.log" &&
    ! grep -q 'learns its slope' "$STUDY_OUT/hybrid128k-readsinkhd128x3c8@1_train.log" && ! grep -q '^pointer' "$STUDY_OUT/hybrid128k-readsinkhd128x3c8ls@1_train.log" &&
    pass "hybrid128k-readsinkhd128x3c8ls: readsinkhd128x3c8 whose NoPE heads learn their log-n slopes (train --logn-learn)" ||
    fail "readsinkhd128x3c8ls's slopes: $(grep -E '^(rotary|pointer)' "$STUDY_OUT"/hybrid128k-readsinkhd128x3c8*@1_train.log)"
# TPS below a window: each stage keeps its share of the tokens, a window longer than TPS one a step.
TPS=1024 $study train:hybrid128k@3:0.0001 > "$work/tps.log" 2>&1
grep -q 'stage from step 0: windows of 512 tokens, 2 per step' "$STUDY_OUT/hybrid128k@3_train.log" &&
    grep -q 'stage from step 8: windows of 1024 tokens, 1 per step' "$STUDY_OUT/hybrid128k@3_train.log" &&
    grep -q 'stage from step 10: windows of 2048 tokens, 1 per step' "$STUDY_OUT/hybrid128k@3_train.log" &&
    grep -q 'stage from step 11: windows of 2048 tokens, 1 per step' "$STUDY_OUT/hybrid128k@3_train.log" &&
    pass "TPS=1024: 8 steps of 2 x 512, 2 of 1024, 1 and 2 of 2048 (the stages' shares of 16K tokens)" ||
    fail "TPS=1024's stages: $(grep -E '^stage from' "$STUDY_OUT/hybrid128k@3_train.log" | tr '\n' ' ') $(tail -2 "$work/tps.log")"
rm -rf "$WORK"/hybrid128k@3 "$STUDY_OUT"/hybrid128k@3_*
# A variant's long stage starts from its own 128K run, on its own 1M documents.
CPU_RANKS=2 STEPS_1M=1 $study train:hybrid1m-pkfar@1 > "$work/v_1m.log" 2>&1
grep -q 'weights from .*hybrid128k-pkfar@1' "$STUDY_OUT/hybrid1m-pkfar@1_train.log" && grep -q 'tasks4k-pkfar.bin' "$STUDY_OUT/hybrid1m-pkfar@1_train.log" &&
    grep -q '^done' "$STUDY_OUT/hybrid1m-pkfar@1_train.log" && pass "hybrid1m-pkfar: from hybrid128k-pkfar@1's weights, on its own shard" ||
    fail "hybrid1m-pkfar: $(tail -3 "$STUDY_OUT/hybrid1m-pkfar@1_train.log")"
rm -rf "$WORK"/hybrid1m-pkfar@1 "$STUDY_OUT"/hybrid1m-pkfar@1_*
# The convolution's long stages on one rank where two are there (it does not run under --cp):
# variant, what its log must say, what that means.
for spec in "readconv|tasks4k-read.bin|on read's shard" "readconvpart|convolved over 4 tokens in layers 3,5 only|layers 3 and 5 convolved" \
            "readsink|^attention sinks|with its sinks" "readsinkhd128|^model: 6 layers, width 128, 1 heads|at its heads of 128" \
            "readsinkhd128x3c8|convolved over 8 tokens in layers 3,5 only|readsinkhd128x3's with its convolution over 8 tokens" \
            "readsinkhd128x3c8ptr|^pointer: a copy head|with its pointer"; do
    IFS='|' read -r v want what <<< "$spec"
    log=$STUDY_OUT/hybrid1m-$v@1_train.log
    CPU_RANKS=2 STEPS_1M=1 $study train:hybrid1m-$v@1 > "$work/v_1m_$v.log" 2>&1
    grep -q "weights from .*hybrid128k-$v@1" "$log" && grep -q -- "$want" "$log" && grep -q '^done' "$log" &&
        ! grep -qE 'context parallel|cp 2' "$log" && pass "hybrid1m-$v: from hybrid128k-$v@1's weights, $what, one rank" ||
        fail "hybrid1m-$v: $(tail -3 "$log")"
    rm -rf "$WORK/hybrid1m-$v@1" "$STUDY_OUT/hybrid1m-$v@1_"*
done
rm -rf "$WORK"/hybrid128k-*@1 "$STUDY_OUT"/hybrid128k-*@1_*

# The long stage: from run 1's weights, over 2 ranks.
CPU_RANKS=2 $study train:hybrid1m@1 > "$work/1m.log" 2>&1
grep -q 'weights from .*hybrid128k@1' "$STUDY_OUT/hybrid1m@1_train.log" && grep -q '^done' "$STUDY_OUT/hybrid1m@1_train.log" &&
    grep -qE 'ranks|context parallel|--cp 2|cp 2' "$STUDY_OUT/hybrid1m@1_train.log" &&
    pass "hybrid1m: starts from hybrid128k@1's weights, windows over 2 ranks" || fail "hybrid1m: $(tail -4 "$STUDY_OUT/hybrid1m@1_train.log")"

for m in hybrid128k@1 hybrid128k@2 hybrid1m@1; do $study eval:$m > "$work/eval_$m.log" 2>&1; done
ok=1
for m in hybrid128k@1 hybrid128k@2 hybrid1m@1; do
    for f in needles offgrid tree filler start; do [ -s "$STUDY_OUT/${m}_$f.csv" ] || { ok=0; fail "eval $m: no ${m}_$f.csv ($(tail -2 "$work/eval_$m.log"))"; }; done
done
[ $ok -eq 1 ] && pass "eval: the grid, off the grid, the source tree, the opening and the filler, for every run"
grep -q '^quote,600,all,' "$STUDY_OUT/hybrid128k@1_needles.csv" && grep -q '^quote-control,1200,all,' "$STUDY_OUT/hybrid128k@1_needles.csv" &&
    [ -s "$STUDY_OUT/hybrid128k@1_qbook.csv" ] && [ -s "$STUDY_OUT/hybrid128k@1_qtree.csv" ] && grep -q 'quote against quote-control' "$STUDY_OUT/hybrid128k@1_needles.log" &&
    pass "eval: quotes and their controls on the grid, over the book and the source tree, side by side in the report" ||
    fail "eval quotes: $(grep quote "$STUDY_OUT/hybrid128k@1_needles.csv" | head -3)"
CTL=400 $study eval:hybrid128k@1 > "$work/eval_ctl.log" 2>&1
grep -q '^quote,1200,all,' "$STUDY_OUT/ctl400-hybrid128k@1_needles.csv" 2>/dev/null && [ ! -e "$STUDY_OUT/ctl400-hybrid128k@1_filler.csv" ] &&
    pass "eval CTL=400: the same model reading its last 400 tokens, reported as its own run" || fail "eval CTL: $(tail -3 "$work/eval_ctl.log")"
rm -f "$STUDY_OUT"/ctl400-*
if command -v gnuplot > /dev/null; then  # the heatmaps (scripts/plot_heatmap.sh), drawn where gnuplot is installed
    [ -s "$STUDY_OUT/hybrid128k@1_needles.png" ] && [ -s "$STUDY_OUT/hybrid128k@1_filler.png" ] && pass "eval: the heatmaps beside the CSVs" ||
        fail "eval: no heatmap PNG ($(find "$STUDY_OUT" -name '*.png' | wc -l) PNGs; $(tail -2 "$STUDY_OUT/hybrid128k@1_eval.err" 2>/dev/null))"
fi
EVAL_MIN=1200 EVAL_TAG=-long $study eval:hybrid128k@1 > "$work/eval_long.log" 2>&1
[ -s "$STUDY_OUT/hybrid128k@1_needles-long.csv" ] && ! grep -q ',600,' "$STUDY_OUT/hybrid128k@1_needles-long.csv" &&
    grep -q ',1200,' "$STUDY_OUT/hybrid128k@1_needles-long.csv" && pass "eval: EVAL_MIN keeps the longer lengths, EVAL_TAG its own files" ||
    fail "eval EVAL_MIN/EVAL_TAG: $(cat "$STUDY_OUT/hybrid128k@1_needles-long.csv" 2>/dev/null | head -3)"
rm -f "$STUDY_OUT/hybrid128k@1_needles-long."*

$study positions:hybrid1m@1 > "$work/pos.log" 2>&1
[ -s "$STUDY_OUT/hybrid1m@1_positions.csv" ] && pass "positions: the loss by position" || fail "positions: $(tail -2 "$STUDY_OUT/hybrid1m@1_ppl.log")"
awk 'NR % 40 == 1' "$corpus/bible.txt" | head -c 3000 > "$work/book.txt"
DEMOS="$work/book.txt:0.5" DEMO_TOKENS=8 $study demo:hybrid128k@1 > "$work/demo.log" 2>&1
grep -q '^-- the text after the cue' "$STUDY_OUT/hybrid128k@1_demo.txt" && grep -q '^-- hybrid128k@1 continues' "$STUDY_OUT/hybrid128k@1_demo.txt" &&
    pass "demo: the cue, the truth and the continuation" || fail "demo: $(head -5 "$STUDY_OUT/hybrid128k@1_demo.txt" 2>/dev/null; tail -2 "$work/demo.log")"

# The table over the real runs has every section; its arithmetic is checked on made-up CSVs, where
# the runs differ: 3 runs of r (passkey at length 100: 1/4, 3/4, 4/4; at depth 0: 0/2, 1/2, 2/2),
# 2 of q (2/4, 3/4: an even count's median is the middle pair's mean), and a run of its own; only
# r@1 was scored at length 400. Each run's quote-control scores as its passkey: a control's worst is
# its highest guess rate.
table=$($study table 2>&1)
grep -q '| hybrid128k (2 runs) | passkey |' <<< "$table" && grep -q 'median \[worst\] by depth' <<< "$table" &&
    grep -q '(offgrid)' <<< "$table" && grep -q '(tree)' <<< "$table" && grep -q '(start) | task | 1200 |' <<< "$table" &&
    pass "table: the recipe's runs, by depth, off the grid, over the source tree and at the opening" || fail "table: $(head -20 <<< "$table")"
mkdir -p "$work/t"
csv() {  # run, correct of 4 at length 100, correct of 2 at depth 0
    printf 'task,length,depth,items,correct,accuracy\npasskey,100,0,2,%d,0\npasskey,100,1,2,%d,0\npasskey,100,all,4,%d,0\nquote-control,100,all,4,%d,0\n' \
        "$3" $(($2 - $3)) "$2" "$2" > "$work/t/$1_needles.csv"
}
csv r@1 1 0; csv r@2 3 1; csv r@3 4 2; csv q@1 2 1; csv q@7 3 1; csv solo 4 2
printf 'task,length,depth,items,correct,accuracy\npasskey,400,all,2,1,0\n' > "$work/t/r@1_needles-long.csv"  # one run scored at 400
t=$(scripts/study_table.sh "$work/t" 100 400)
grep -qF '| r (3 runs) | passkey | 75% [25%] | 50% [50%] (1 of 3 runs) |' <<< "$t" && grep -qF '| q (2 runs) | passkey | 62% [50%] |' <<< "$t" &&
    grep -qF '| r (3 runs) | quote-control | 75% [100%] |' <<< "$t" &&
    grep -qF '| r | passkey | 100 | 50% [0%] |' <<< "$t" && ! grep -q '| solo (' <<< "$t" && grep -qF '| solo | passkey | 100% |' <<< "$t" &&
    pass "study_table: median and worst of 3 and of 2 runs (a control's worst its highest), by depth; a length fewer runs reached says so; a lone run only as itself" || fail "study_table: $t"
# The copy loss by gap: r's 3 runs at gap 16 (0.5, 0.3, 0.9), only r@1 at gap 2048; q's 2 (0.2, 0.4);
# its worst is the highest loss.
copy_csv() { printf 'gap,samples,passage,first_loss,repeat_loss,repeat_loss_second_half\n16,4,256,2.0,%s,0.1\n' "$2" > "$work/t/$1_copy.csv"; }
copy_csv r@1 0.5; copy_csv r@2 0.3; copy_csv r@3 0.9; copy_csv q@1 0.2; copy_csv q@7 0.4; copy_csv solo 0.7
printf '2048,4,256,2.0,1.25,0.1\n' >> "$work/t/r@1_copy.csv"
t=$(scripts/study_table.sh "$work/t" 100 400)
grep -qF '| r (3 runs) | 0.50 [0.90] | 1.25 [1.25] (1 of 3 runs) |' <<< "$t" && grep -qF '| q (2 runs) | 0.30 [0.40] | - |' <<< "$t" &&
    grep -qF '| solo | 0.70 | - |' <<< "$t" && ! grep -q '| solo (' <<< "$t" && grep -qF '| run: copy loss on the repeat, by gap | 16 | 2048 |' <<< "$t" &&
    pass "study_table: the copy loss by gap, each run's and each recipe's median and worst (its highest); a gap fewer runs reached says so" ||
    fail "study_table's copy loss: $(grep -i copy -A9 <<< "$t")"

# The copy circuit's call (scripts/copy_circuit.sh): two variants at toy size side by side, their
# copy loss at two gaps and their quotes; an unknown variant is refused before any work.
cc="CARRY=$work/carry OUTDIR=$work/cc WORK=$work/ccw TOKENS=2048 SEQ=512 BATCH=2 HWINDOW=256 HBLOCK=64 GAPS=16,128 COPY_CTX=1024 COPY_SAMPLES=1 SAMPLES=1"
env $cc MODEL_ARGS="--layers 6 --width 64 --heads 1" QKCONV=3 QKCONV_LAYERS=3,5 scripts/copy_circuit.sh hybrid-qkconv dense-theta4-rand hybrid-qkconv-ptr > "$work/cc.log" 2>&1
grep -qE '^ +16 +1 +256 ' "$work/cc/hybrid-qkconv_copy.log" && grep -qE '^ +128 +1 +256 ' "$work/cc/dense-theta4-rand_copy.log" &&
    grep -q '^  quote-control' "$work/cc/summary.txt" && ! grep -q 'none in layers' "$work/cc/dense-theta4-rand_train.log" &&
    grep -q 'base 1e+07, none in layers 1,3,5 (NoPE), log-n attention from position 512, their queries and keys convolved over 3 tokens in layers 3,5 only' "$work/cc/hybrid-qkconv_train.log" &&
    grep -q 'tasks512-read.bin' "$work/cc/hybrid-qkconv_train.log" &&
    grep -q 'tasks512-readrand.bin' "$work/cc/dense-theta4-rand_train.log" && grep -q 'random words of 16-256 tokens twice every 512' "$work/ccw/tasks512-readrand.bin.log" &&
    pass "copy_circuit: two variants side by side, their copy loss by gap and quotes (the hybrid with its q/k convolution; the plain GPT without NoPE layers, on documents with random passages)" ||
    fail "copy_circuit: $(tail -5 "$work/cc.log")"
grep -qE '^ +128 +1 +256 ' "$work/cc/hybrid-qkconv-ptr_copy.log" && grep -q '^pointer: a copy head of 64' "$work/cc/hybrid-qkconv-ptr_train.log" &&
    grep -q 'their queries and keys convolved over 3 tokens in layers 3,5 only' "$work/cc/hybrid-qkconv-ptr_train.log" &&
    pass "copy_circuit: hybrid-qkconv-ptr trains with a pointer and is scored through the KV cache" ||
    fail "copy_circuit's hybrid-qkconv-ptr: $(tail -3 "$work/cc/hybrid-qkconv-ptr_train.log" "$work/cc/hybrid-qkconv-ptr_copy.log" 2>&1)"
env $cc WORK=$work/ccw_bad scripts/copy_circuit.sh hybrid sparse > "$work/cc_bad.log" 2>&1 && fail "copy_circuit took an unknown variant" ||
    { grep -q 'unknown variant sparse' "$work/cc_bad.log" && [ ! -e "$work/ccw_bad/hybrid" ] && [ ! -e "$work/ccw_bad/tasks512-read.bin" ] && pass "copy_circuit refuses an unknown variant before any work" ||
      fail "copy_circuit's unknown variant: $(cat "$work/cc_bad.log")"; }

env $cc WORK=$work/ccw_bad scripts/copy_circuit.sh torch > "$work/cc_torch.log" 2>&1 && fail "copy_circuit ran the PyTorch peer with no sequences to score" ||
    { grep -q 'the torch peer needs one of our variants beside it' "$work/cc_torch.log" && pass "copy_circuit refuses the PyTorch peer alone (nothing to score)" ||
      fail "copy_circuit torch alone: $(cat "$work/cc_torch.log")"; }
# The peers at the hybrid's shape (plain, MoBA's two gates, the q/k convolution, differential attention, the pointer) beside ours at toy size (where a Python has
# PyTorch): each trains, scores our sequences and says its shape.
torch_py=$(torch_python)
if [ -n "$torch_py" ]; then
    env $cc OUTDIR=$work/ccp WORK=$work/ccpw PYTHON=$torch_py MOBA=32,2 MODEL_ARGS="--layers 6 --width 64 --heads 1" \
        scripts/copy_circuit.sh hybrid torch-hybrid torch-moba torch-mobalag torch-qkconv torch-diff torch-qkconv-diff torch-qkconv-ptr > "$work/ccp.log" 2>&1
    grep -q 'NoPE layers 1,3,5, rotary window 256, log-n 512: ' "$work/ccp/torch-hybrid_train.log" &&
        grep -q 'NoPE layers 1,3,5, rotary window 256, log-n 512, MoBA 32,2: ' "$work/ccp/torch-moba_train.log" &&
        grep -q 'NoPE layers 1,3,5, rotary window 256, log-n 512, MoBA 32,2,lagged: ' "$work/ccp/torch-mobalag_train.log" &&
        grep -qE '^ +128 +1 +256 ' "$work/ccp/torch-moba_copy.log" && grep -qE '^ +16 +1 +256 ' "$work/ccp/torch-hybrid_copy.log" &&
        grep -qE '^ +128 +1 +256 ' "$work/ccp/torch-mobalag_copy.log" &&
        grep -q 'NoPE layers 1,3,5, rotary window 256, log-n 512, q/k convolution 4: ' "$work/ccp/torch-qkconv_train.log" &&
        grep -qE '^ +128 +1 +256 ' "$work/ccp/torch-qkconv_copy.log" &&
        grep -q 'NoPE layers 1,3,5, rotary window 256, log-n 512, differential attention: ' "$work/ccp/torch-diff_train.log" &&
        grep -q 'NoPE layers 1,3,5, rotary window 256, log-n 512, q/k convolution 4, differential attention: ' "$work/ccp/torch-qkconv-diff_train.log" &&
        grep -qE '^ +128 +1 +256 ' "$work/ccp/torch-diff_copy.log" && grep -qE '^ +128 +1 +256 ' "$work/ccp/torch-qkconv-diff_copy.log" &&
        grep -q 'NoPE layers 1,3,5, rotary window 256, log-n 512, q/k convolution 4, pointer: ' "$work/ccp/torch-qkconv-ptr_train.log" &&
        grep -qE '^ +128 +1 +256 ' "$work/ccp/torch-qkconv-ptr_copy.log" &&
        pass "copy_circuit: the PyTorch peers at the hybrid's shape, without MoBA, with its two gates, with the q/k convolution, differential attention and the pointer, score our variant's sequences" ||
        fail "copy_circuit's peers: $(tail -5 "$work/ccp.log")"
else
    echo "skip: copy_circuit's PyTorch peers (no Python here has PyTorch)"
fi

# Bad input: a lane naming one GPU twice, a demo depth out of range.
scripts/run_lanes.sh "0|true" "0,1|true" > /dev/null 2>&1 && fail "run_lanes took GPU 0 in two lanes" || pass "run_lanes refuses a GPU in two lanes"
scripts/demo_prompt.sh "$work/book.txt" 1.5 "$work/p" "$work/t" > /dev/null 2>&1 && fail "demo_prompt took depth 1.5" || pass "demo_prompt refuses a depth outside [0, 1]"
finish
