#!/usr/bin/env bash
# End-to-end tests of the retrieval recipe's programs on the small test corpus (made by
# tests/test_data_cli.sh): data_tool tasks and task-shard, train --mix / --schedule / --stop-at /
# --time-limit (exact resume across stages), infer --tasks (the scorer through a real model's
# cache, the same answers in batches as one at a time, its files), and their bad inputs (one
# line naming the file line or the flag, non-zero exit).
# Usage: tests/test_tasks_cli.sh [CORPUS_DIR]   Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
corpus=${1:-build/test_corpus}
work=build/test_tasks_cli
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
stderr_filter() { tr '\r' '\n' | grep -v '^scored' | grep .; }  # expect_error: no progress lines
for bin in build/train build/infer build/data_tool; do [ -x $bin ] || bail "$bin not built"; done
[ -f "$corpus/val.bin" ] || bail "no corpus at $corpus (run tests/test_data_cli.sh first)"

# 1. data_tool tasks: items as asked, the same bytes for the same seed.
T=(build/data_tool tasks --data "$corpus" --task passkey,multikey,multiquery --lengths 700,1K --depths 0,0.5,1 --needles 3)
if "${T[@]}" --seed 4 --out "$work/t1.jsonl" > "$work/t1.log" 2>&1 && "${T[@]}" --seed 4 --out "$work/t2.jsonl" > /dev/null 2>&1 \
   && "${T[@]}" --seed 5 --out "$work/t3.jsonl" > /dev/null 2>&1; then
    n=$(wc -l < "$work/t1.jsonl")
    [ "$n" -eq 30 ] && pass "tasks: 2 lengths x 3 depths of passkey and multikey, and multiquery's 3 questions each ($n items)" \
        || fail "tasks wrote $n items, want 30"
    cmp -s "$work/t1.jsonl" "$work/t2.jsonl" && pass "tasks: the same seed writes the same file" || fail "tasks: not deterministic"
    cmp -s "$work/t1.jsonl" "$work/t3.jsonl" && fail "tasks: another seed wrote the same file" || pass "tasks: another seed, other items"
else
    fail "data_tool tasks failed: $(tail -2 "$work/t1.log")"
fi
expect_error "bad input: tasks: a length too short" "too short" "${T[@]/1K/60}" --out "$work/x.jsonl"
expect_error "bad input: tasks: a depth outside [0, 1]" "--depths '1.5'" build/data_tool tasks --data "$corpus" --lengths 1K --depths 0,1.5 --out "$work/x.jsonl"
expect_error "bad input: tasks: an unknown task" "--task 'needle'" build/data_tool tasks --data "$corpus" --task needle --lengths 1K --out "$work/x.jsonl"
expect_error "bad input: tasks: a length its haystack cannot fill" "lower --lengths" build/data_tool tasks --data "$corpus" --lengths 1M --out "$work/x.jsonl"
expect_error "bad input: tasks: no --out" "--out" build/data_tool tasks --data "$corpus" --lengths 1K
[ ! -e "$work/x.jsonl" ] && pass "a refused tasks command writes nothing" || fail "a refused tasks command wrote $work/x.jsonl"

# 2. data_tool task-shard: training documents, a valid shard.
if build/data_tool task-shard --data "$corpus" --doc-tokens 2K --tokens 64K --needle-every 512 --passkey-every 1024 --out "$work/tasks.bin" > "$work/ts.log" 2>&1 \
   && build/data_tool inspect "$work/tasks.bin" > "$work/ts_inspect.log" 2>&1; then
    grep -q "^n_docs: 32" "$work/ts_inspect.log" && grep -q "doc_tokens: min 2048, mean 2048.0, max 2048" "$work/ts_inspect.log" \
        && pass "task-shard: 32 documents of 2048 tokens, a shard inspect accepts" || fail "task-shard: $(head -8 "$work/ts_inspect.log" | tr '\n' ' ')"
else
    fail "task-shard failed: $(tail -2 "$work/ts.log")"
fi
expect_error "bad input: task-shard: needles denser than the document holds" "too short" build/data_tool task-shard --data "$corpus" --doc-tokens 256 --tokens 1K --needle-every 16 --out "$work/y.bin"
expect_error "bad input: task-shard: --lead-needle above 1" "--lead-needle 2 must be in" build/data_tool task-shard --data "$corpus" --doc-tokens 1K --tokens 2K --lead-needle 2 --out "$work/y.bin"
expect_error "bad input: task-shard: an unknown --lead-kind" "--lead-kind must be any or multikey" build/data_tool task-shard --data "$corpus" --doc-tokens 1K --tokens 2K --lead-needle 0.5 --lead-kind passkey --out "$work/y.bin"
expect_error "bad input: task-shard: --lead-kind without --lead-needle" "no effect without --lead-needle" build/data_tool task-shard --data "$corpus" --doc-tokens 1K --tokens 2K --lead-kind multikey --out "$work/y.bin"
expect_error "bad input: task-shard: fewer tokens than a document" "--tokens" build/data_tool task-shard --data "$corpus" --doc-tokens 1K --tokens 100 --out "$work/y.bin"
# Copies of the documents' own text: a valid shard of the same shape; the flags' bad values refused.
if build/data_tool task-shard --data "$corpus" --doc-tokens 2K --tokens 64K --quote-every 256 --repeat-every 1024 --out "$work/copies.bin" > "$work/copies.log" 2>&1 \
   && build/data_tool inspect "$work/copies.bin" > "$work/copies_inspect.log" 2>&1; then
    grep -q "^n_docs: 32" "$work/copies_inspect.log" && grep -q "doc_tokens: min 2048, mean 2048.0, max 2048" "$work/copies_inspect.log" \
        && grep -q "a quoted line every 256 tokens, a repeated passage of 16-256 tokens every 1024 tokens (copies: [1-9]" "$work/copies.log" \
        && ! cmp -s "$work/tasks.bin" "$work/copies.bin" \
        && pass "task-shard --quote-every 256 --repeat-every 1024: 32 documents of 2048 tokens with copies, a shard inspect accepts" \
        || fail "task-shard with copies: $(cat "$work/copies.log") $(head -8 "$work/copies_inspect.log" | tr '\n' ' ')"
else
    fail "task-shard with copies failed: $(tail -2 "$work/copies.log")"
fi
if build/data_tool task-shard --data "$corpus" --doc-tokens 2K --tokens 64K --random-every 512 --repeat-tokens 64 --out "$work/random.bin" > "$work/random.log" 2>&1; then
    grep -q "random words of 16-64 tokens twice every 512 tokens (copies: [1-9]" "$work/random.log" && ! cmp -s "$work/tasks.bin" "$work/random.bin" \
        && pass "task-shard --random-every 512 --repeat-tokens 64: random passages written twice, said in the summary" \
        || fail "task-shard --random-every: $(cat "$work/random.log")"
else
    fail "task-shard --random-every failed: $(tail -2 "$work/random.log")"
fi
if build/data_tool task-shard --data "$corpus" --doc-tokens 2K --tokens 64K --quote-every 256 --repeat-every 1024 --copy-min-distance 512 \
       --out "$work/far.bin" > "$work/far.log" 2>&1; then
    grep -q "every 1024 tokens, each from 512 or more tokens back (copies: [1-9]" "$work/far.log" && ! cmp -s "$work/copies.bin" "$work/far.bin" \
        && pass "task-shard --copy-min-distance 512: far copies only, said in the summary" \
        || fail "task-shard --copy-min-distance: $(cat "$work/far.log")"
else
    fail "task-shard --copy-min-distance failed: $(tail -2 "$work/far.log")"
fi
# One copy in 2 from the first lines: other documents, said in the summary; 8, the default, given
# outright: the same bytes as without the flag.
if build/data_tool task-shard --data "$corpus" --doc-tokens 2K --tokens 64K --quote-every 256 --repeat-every 1024 --copy-first-one-in 2 \
       --out "$work/first.bin" > "$work/first.log" 2>&1 \
   && build/data_tool task-shard --data "$corpus" --doc-tokens 2K --tokens 64K --quote-every 256 --repeat-every 1024 --copy-first-one-in 8 \
       --out "$work/first8.bin" > "$work/first8.log" 2>&1; then
    grep -q "one in 2 from the first lines (copies: [1-9]" "$work/first.log" && ! cmp -s "$work/copies.bin" "$work/first.bin" \
        && cmp -s "$work/copies.bin" "$work/first8.bin" \
        && pass "task-shard --copy-first-one-in 2: more copies from the first lines, said in the summary; 8 is the default's bytes" \
        || fail "task-shard --copy-first-one-in: $(cat "$work/first.log" "$work/first8.log")"
else
    fail "task-shard --copy-first-one-in failed: $(tail -2 "$work/first.log" "$work/first8.log")"
fi
if build/data_tool task-shard --data "$corpus" --doc-tokens 2K --tokens 64K --quote-every 256 --repeat-every 1024 --copy-first-one-in 2 \
       --copy-first-tokens 512 --out "$work/firstwide.bin" > "$work/firstwide.log" 2>&1; then
    grep -q "one in 2 from the first 512 tokens (copies: [1-9]" "$work/firstwide.log" && ! cmp -s "$work/first.bin" "$work/firstwide.bin" \
        && pass "task-shard --copy-first-tokens 512: a wider opening, said in the summary" \
        || fail "task-shard --copy-first-tokens: $(cat "$work/firstwide.log")"
else
    fail "task-shard --copy-first-tokens failed: $(tail -2 "$work/firstwide.log")"
fi
expect_error "bad input: task-shard: --copy-first-tokens without copies" "--copy-first-tokens 512 has no effect without" build/data_tool task-shard --data "$corpus" --doc-tokens 2K --tokens 4K --copy-first-tokens 512 --out "$work/y.bin"
expect_error "bad input: task-shard: --copy-first-tokens of a whole document" "is not an opening of documents" build/data_tool task-shard --data "$corpus" --doc-tokens 2K --tokens 4K --quote-every 256 --copy-first-tokens 2K --out "$work/y.bin"
expect_error "bad input: task-shard: --copy-first-one-in without copies" "--copy-first-one-in 2 has no effect without" build/data_tool task-shard --data "$corpus" --doc-tokens 2K --tokens 4K --copy-first-one-in 2 --out "$work/y.bin"
expect_error "bad input: task-shard: --copy-first-one-in 0" "--copy-first-one-in" build/data_tool task-shard --data "$corpus" --doc-tokens 2K --tokens 4K --quote-every 256 --copy-first-one-in 0 --out "$work/y.bin"
expect_error "bad input: task-shard: --copy-min-distance without copies" "--copy-min-distance 512 has no effect without" build/data_tool task-shard --data "$corpus" --doc-tokens 2K --tokens 4K --copy-min-distance 512 --out "$work/y.bin"
expect_error "bad input: task-shard: --copy-min-distance of half a document" "leaves no room for copies" build/data_tool task-shard --data "$corpus" --doc-tokens 2K --tokens 4K --quote-every 256 --copy-min-distance 1K --out "$work/y.bin"
expect_error "bad input: task-shard: --copy-min-distance abc" "--copy-min-distance" build/data_tool task-shard --data "$corpus" --doc-tokens 2K --tokens 4K --quote-every 256 --copy-min-distance abc --out "$work/y.bin"
expect_error "bad input: task-shard: --random-every 8" "--random-every '8' must be 0 (none) or a number of tokens >= 16" build/data_tool task-shard --data "$corpus" --doc-tokens 1K --tokens 2K --random-every 8 --out "$work/y.bin"
expect_error "bad input: task-shard: --repeat-tokens without --repeat-every" "no effect without --repeat-every or --random-every" build/data_tool task-shard --data "$corpus" --doc-tokens 1K --tokens 2K --repeat-tokens 64 --out "$work/y.bin"
expect_error "bad input: task-shard: --quote-every 5" "--quote-every '5' must be 0 (none) or a number of tokens >= 16" build/data_tool task-shard --data "$corpus" --doc-tokens 1K --tokens 2K --quote-every 5 --out "$work/y.bin"
expect_error "bad input: task-shard: --quote-every abc" "--quote-every 'abc' must be 0" build/data_tool task-shard --data "$corpus" --doc-tokens 1K --tokens 2K --quote-every abc --out "$work/y.bin"
expect_error "bad input: task-shard: --repeat-tokens past 4096" "--repeat-tokens '5000'" build/data_tool task-shard --data "$corpus" --doc-tokens 1K --tokens 2K --repeat-every 512 --repeat-tokens 5000 --out "$work/y.bin"
[ ! -e "$work/y.bin" ] && pass "a refused task-shard command writes nothing" || fail "a refused task-shard command wrote $work/y.bin"

# 3. train with retrieval documents mixed in and a length curriculum: killed and resumed, or run
# in pieces (--stop-at, --time-limit), it gives the losses and checkpoint of one run.
tiny=(--data "$corpus" --layers 2 --width 64 --heads 1 --seq-len 64 --batch 8 --steps 24 --warmup 4 --lr 3e-3 --val-every 8
      --val-batches 2 --ckpt-every 8 --log-every 4 --sample-tokens 0 --schedule 128x4@10,256x2@18
      --mix "$work/tasks.bin:0.5;$work/tasks.bin:0.25;$work/tasks.bin:0.75")
if tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/full" > "$work/full.log" 2>&1; then
    grep -q "^step    10/24 | stage: windows of 128 tokens, 4 per step" "$work/full.log" && grep -q "^step    18/24 | stage: windows of 256" "$work/full.log" \
        && pass "--schedule: the window and batch change at steps 10 and 18" || fail "--schedule: $(grep stage "$work/full.log" | tr '\n' ' ')"
    grep -q "^mix (stage from step 18): $work/tasks.bin (65536 tokens, 32 documents): 75% of the windows" "$work/full.log" \
        && pass "--mix: one list per stage" || fail "--mix: $(grep '^mix' "$work/full.log" | tr '\n' ' ')"
else
    fail "train --mix --schedule failed: $(tail -2 "$work/full.log")"
fi
{ (LNGPT_KILL_AT_STEP=13 exec tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/killed") > /dev/null 2>&1; } 2>/dev/null
tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/killed" --resume > "$work/resume.log" 2>&1
diff <(cut -d, -f1-3 "$work/full/metrics.csv") <(cut -d, -f1-3 "$work/killed/metrics.csv") > /dev/null \
    && cmp -s "$work/full/ckpt_00000024.safetensors" "$work/killed/ckpt_00000024.safetensors" \
    && pass "killed in stage 2 and resumed: every loss and the final checkpoint bit for bit" || fail "resume across stages differs: $(tail -2 "$work/resume.log")"
tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/pieces" --stop-at 11 > "$work/p1.log" 2>&1
tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/pieces" --resume --stop-at 20 > "$work/p2.log" 2>&1
tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/pieces" --resume > "$work/p3.log" 2>&1
grep -q "^stopped after step 11 of 24 (--stop-at)" "$work/p1.log" && diff <(cut -d, -f1-3 "$work/full/metrics.csv") <(cut -d, -f1-3 "$work/pieces/metrics.csv") > /dev/null \
    && cmp -s "$work/full/ckpt_00000024.safetensors" "$work/pieces/ckpt_00000024.safetensors" \
    && pass "--stop-at: a run in three pieces is the run in one" || fail "--stop-at pieces differ: $(tail -1 "$work/p1.log")"
if tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/timed" --time-limit 0.000001 > "$work/timed.log" 2>&1; then
    grep -q "^stopped after step 1 of 24 (--time-limit)" "$work/timed.log" && [ -f "$work/timed/ckpt_00000001.safetensors" ] \
        && pass "--time-limit: stops after the step that passes it, with a checkpoint" || fail "--time-limit: $(tail -1 "$work/timed.log")"
else
    fail "--time-limit run failed: $(tail -1 "$work/timed.log")"
fi
expect_error "bad input: train: a --mix shard that does not exist" "no_such.bin" tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$work/no_such.bin:0.5" --out "$work/bad1"
expect_error "bad input: train: a --mix fraction over 1" "SHARD:FRACTION" tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$work/tasks.bin:2" --out "$work/bad2"
expect_error "bad input: train: --mix lists that do not match the stages" "gives 2 stages" tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$work/tasks.bin:0.5;$work/tasks.bin:0.5" --out "$work/bad3"
expect_error "bad input: train: a --schedule step past --steps" "--schedule entry" tests/last_wins.sh ./build/train "${tiny[@]}" --schedule 128x4@30 --out "$work/bad4"
expect_error "bad input: train: a --schedule window that does not split over --cp" "--schedule" tests/last_wins.sh ./build/train "${tiny[@]}" --schedule 130x4@10 --mix "$work/tasks.bin:0.5" --cp 4 --simulate-ranks 4 --out "$work/bad5"
expect_error "bad input: train: --stop-at past --steps" "--stop-at" tests/last_wins.sh ./build/train "${tiny[@]}" --stop-at 99 --out "$work/bad6"
tests/last_wins.sh ./build/train "${tiny[@]}" --stop-at 11 --out "$work/stop11" > /dev/null 2>&1
expect_error "bad input: train: --resume --stop-at not past the checkpoint" "not past the checkpoint's step 11" tests/last_wins.sh ./build/train "${tiny[@]}" --resume --stop-at 11 --out "$work/stop11"
expect_error "bad input: train: --resume with another --mix" "--mix" tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$work/tasks.bin:0.5" --resume --out "$work/full"
[ ! -e "$work/bad1" ] && [ ! -e "$work/bad2" ] && [ ! -e "$work/bad3" ] && pass "refused runs write nothing" || fail "a refused run wrote its --out"

# 4. infer --tasks through the model's cache: the scorer's rule against what plain greedy
# generation of the same prompt continues with, the same answers in batches as one at a time,
# the report's files. A model trained a little longer than the runs above, so that its
# continuations differ from item to item (else "the same answers" could not fail).
model=$work/reader
build/train --data "$corpus" --layers 2 --width 64 --heads 1 --seq-len 128 --batch 8 --steps 150 --warmup 10 --lr 3e-3 \
    --val-every 0 --ckpt-every 0 --sample-tokens 0 --out "$model" > "$work/reader.log" 2>&1 || fail "training the scoring model: $(tail -1 "$work/reader.log")"
# The first item's prompt through plain greedy generation (infer --prompt-file CONTEXT --prompt
# "\nQUESTION"); its continuation, leading spaces removed, becomes an item's answer (right),
# and with one more character another's (wrong).
ans=$(python3 - "$work/t1.jsonl" "$work/one.jsonl" "$model" <<'EOF'
import json, subprocess, sys
item = json.loads(open(sys.argv[1]).readline())
open(sys.argv[2] + '.ctx', 'w').write(item['context'])
out = subprocess.run(['build/infer', '--checkpoint', sys.argv[3], '--prompt-file', sys.argv[2] + '.ctx', '--prompt',
                      '\n' + item['question'], '--temperature', '0', '--max-new', '4'], capture_output=True, text=True).stdout
cont = out[len('\n' + item['question']):].lstrip(' ')[:2]
right = dict(item, answer=cont); wrong = dict(item, answer=cont + 'Z')
open(sys.argv[2], 'w').write(json.dumps(right) + '\n' + json.dumps(wrong) + '\n')
print(repr(cont))
EOF
)
if [ "$ans" != "''" ] && build/infer --checkpoint "$model" --tasks "$work/one.jsonl" --ctx 2048 --tasks-out "$work/one" > "$work/one.log" 2>&1; then
    python3 -c "import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); sys.exit(not (r[0]['correct']=='1' and r[1]['correct']=='0'))" "$work/one_items.csv" \
        && pass "--tasks: an answer the model's greedy continuation starts with is right, another wrong ($ans)" \
        || fail "--tasks scored the greedy continuation $ans wrongly: $(cat "$work/one_items.csv" | tr '\n' ' ')"
else
    fail "--tasks on one item failed (greedy continuation $ans): $(tail -2 "$work/one.log")"
fi
if build/infer --checkpoint "$model" --tasks "$work/t1.jsonl" --ctx 2048 --tasks-out "$work/b16" > "$work/b16.log" 2>&1 \
   && build/infer --checkpoint "$model" --tasks "$work/t1.jsonl" --ctx 2048 --task-batch 1 --chunk 37 --tasks-out "$work/b1" > "$work/b1.log" 2>&1; then
    distinct=$(python3 -c "import csv,sys; print(len({r['output'] for r in csv.DictReader(open(sys.argv[1]))}))" "$work/b16_items.csv")
    [ "$distinct" -ge 5 ] && cmp -s "$work/b16_items.csv" "$work/b1_items.csv" \
        && pass "--tasks: batches of 16 give each item what one at a time in chunks of 37 gives ($distinct distinct continuations)" \
        || fail "--tasks: batched and single outputs differ, or too few distinct ($distinct): $(diff "$work/b16_items.csv" "$work/b1_items.csv" | head -3 | tr '\n' ' ')"
    [ -s "$work/b16.csv" ] && [ -s "$work/b16_items.csv" ] && [ ! -e "$work/b16.png" ] && grep -q "^multiquery,1024,all," "$work/b16.csv" \
        && grep -q "^accuracy by length" "$work/b16.log" && grep -qF "(heatmap: scripts/plot_heatmap.sh $work/b16.csv)" "$work/b16.log" \
        && pass "--tasks-out: the report CSV and the items CSV; the heatmap's command named" || fail "--tasks-out files: $(ls "$work" | tr '\n' ' ')"
    if command -v gnuplot > /dev/null; then  # the picture from infer's own CSV (tests/test_plot_heatmap.sh tests the script)
        err=$(scripts/plot_heatmap.sh "$work/b16.csv" 2>&1) && [ -s "$work/b16.png" ] && pass "scripts/plot_heatmap.sh draws infer's report CSV" \
            || fail "scripts/plot_heatmap.sh on infer's report CSV: $err"
    fi
else
    fail "--tasks failed: $(tail -2 "$work/b16.log") $(tail -2 "$work/b1.log")"
fi
printf 'not json\n' > "$work/bad.jsonl"
expect_error "bad input: --tasks: a line that is not JSON" "bad.jsonl line 1: not JSON" build/infer --checkpoint "$model" --tasks "$work/bad.jsonl"
printf '\n{"task":"p","context":"c","question":"q","answer":"1","depth":0}\n' > "$work/nolen.jsonl"
expect_error "bad input: --tasks: a missing field" 'nolen.jsonl line 2: no field "length"' build/infer --checkpoint "$model" --tasks "$work/nolen.jsonl"
printf '{"task":"p","context":"c","question":"q","answer":"","length":3,"depth":0}\n' > "$work/noans.jsonl"
expect_error "bad input: --tasks: an empty answer" "noans.jsonl line 1: the answer is empty" build/infer --checkpoint "$model" --tasks "$work/noans.jsonl"
expect_error "bad input: --tasks: a context longer than the model reads" "t1.jsonl line 4: the prompt is" build/infer --checkpoint "$model" --tasks "$work/t1.jsonl" --ctx 800
expect_error "bad input: --tasks-out in a directory that does not exist" "--tasks-out" build/infer --checkpoint "$model" --tasks "$work/t1.jsonl" --ctx 2048 --tasks-out "$work/nodir/x"
expect_error "bad input: --tasks with --prompt" "--tasks scores a task file alone" build/infer --checkpoint "$model" --tasks "$work/t1.jsonl" --prompt hi
expect_error "bad input: --truncate without --tasks" "--truncate" build/infer --checkpoint "$model" --prompt hi --truncate
if build/infer --checkpoint "$model" --tasks "$work/t1.jsonl" --ctx 800 --truncate > "$work/trunc.log" 2>&1; then
    grep -q "^tasks $work/t1.jsonl: [0-9]* of 30 correct" "$work/trunc.log" && pass "--truncate reads the long prompts in their last --ctx tokens" \
        || fail "--truncate: $(tail -1 "$work/trunc.log")"
else
    fail "--truncate failed: $(tail -1 "$work/trunc.log")"
fi


# 5. Task files from anyone, field by field, through infer: each bad field refused in one line
# naming the file line and the field, beside the same item with the field right, which is read.
# The items are the first one of one.jsonl with one field changed (python writes the JSON).
edit() {  # edit NAME FIELD JSON-VALUE...: $work/f_NAME.jsonl, the item with FIELD set to each value (one line each)
    python3 - "$work/one.jsonl" "$work/f_$1.jsonl" "${@:2}" <<'EOF2'
import json, sys
item = json.loads(open(sys.argv[1]).readline())
out = open(sys.argv[2], 'w')
for field, value in zip(sys.argv[3::2], sys.argv[4::2]):
    one = dict(item)
    one[field] = json.loads(value)
    out.write(json.dumps(one) + '\n')
EOF2
}
infer_tasks=(build/infer --checkpoint "$model" --ctx 2048 --tasks)
edit len9 length 1e9; edit len40 length 1099511627776; edit lenok length 268435456
refused "--tasks: a length of 1e9" 'f_len9.jsonl line 1: "length" is 1000000000; it must be an integer in [1, 268435456]' "${infer_tasks[@]}" "$work/f_len9.jsonl"
refused "--tasks: a length of 2^40" 'f_len40.jsonl line 1: "length" is 1099511627776' "${infer_tasks[@]}" "$work/f_len40.jsonl"
accepted "--tasks: a length of 2^28 (a bucket's label over a shorter prompt)" "${infer_tasks[@]}" "$work/f_lenok.jsonl"
edit ntabc needle_token '"abc"'; edit ntok needle_token 7 needle_token null
refused '--tasks: needle_token "abc"' 'f_ntabc.jsonl line 1: "needle_token" is a string; it must be an integer' "${infer_tasks[@]}" "$work/f_ntabc.jsonl"
accepted "--tasks: needle_token 7, and null" "${infer_tasks[@]}" "$work/f_ntok.jsonl"
edit depthstr depth '"0.5"'
refused '--tasks: depth "0.5"' 'f_depthstr.jsonl line 1: "depth" is a string; it must be a number' "${infer_tasks[@]}" "$work/f_depthstr.jsonl"
edit nul task '"pass\u0000key"'; edit nulans answer '"12\u000034"'; edit nlans answer '"12\n34"'; edit okname task '"pass key \u00e9"'
refused "--tasks: a NUL in a task name" "f_nul.jsonl line 1: the task name may not hold" "${infer_tasks[@]}" "$work/f_nul.jsonl"
refused "--tasks: an answer with \\u0000" "f_nulans.jsonl line 1: the answer holds the control character 0x00" "${infer_tasks[@]}" "$work/f_nulans.jsonl"
refused "--tasks: an answer with \\n" "f_nlans.jsonl line 1: the answer holds the control character 0x0a" "${infer_tasks[@]}" "$work/f_nlans.jsonl"
accepted "--tasks: a task name with a space and an accent" "${infer_tasks[@]}" "$work/f_okname.jsonl"
# Raw bytes in the file itself: a NUL and an invalid UTF-8 byte inside the answer's string.
python3 - "$work/one.jsonl" "$work/f_raw" <<'EOF2'
import json, sys
line = json.dumps(dict(json.loads(open(sys.argv[1]).readline()), answer='@ANSWER@')).encode()
open(sys.argv[2] + 'nul.jsonl', 'wb').write(line.replace(b'@ANSWER@', b'1\x002') + b'\n')
open(sys.argv[2] + 'ff.jsonl', 'wb').write(line.replace(b'@ANSWER@', b'1\xff2') + b'\n')
EOF2
refused "--tasks: a raw NUL byte in an answer" "f_rawnul.jsonl line 1: the answer holds the control character 0x00" "${infer_tasks[@]}" "$work/f_rawnul.jsonl"
refused "--tasks: a raw 0xff byte in an answer" "f_rawff.jsonl line 1: the answer is not valid UTF-8 (byte 1)" "${infer_tasks[@]}" "$work/f_rawff.jsonl"
# Depths exactly as given: 0.5, 0.50000000001, 0.5000001 and 0.4999999 are four rows of the
# report; a second item at 0.5 joins the first.
edit depths depth 0.5 depth 0.50000000001 depth 0.5000001 depth 0.4999999 depth 0.5
if build/infer --checkpoint "$model" --ctx 2048 --tasks "$work/f_depths.jsonl" --tasks-out "$work/depths" > "$work/depths.log" 2>&1; then
    got=$(grep -v ',all,' "$work/depths.csv" | cut -d, -f3,4 | LC_ALL=C sort | tr '\n' ' ')
    [ "$got" = "0.4999999,1 0.5,2 0.50000000001,1 0.5000001,1 depth,items " ] && grep -q "^  0.50000000001 " "$work/depths.log" \
        && pass "--tasks: depths 0.5, 0.50000000001, 0.5000001, 0.4999999 are four rows, two items at 0.5 one ($got)" \
        || fail "--tasks: depths merged or split: $got $(grep -A6 '^task' "$work/depths.log" | tr '\n' '|')"
else
    fail "--tasks on five depths failed: $(tail -2 "$work/depths.log")"
fi
# --tasks-out names a file to be (PREFIX.csv, PREFIX_items.csv), never a folder.
mkdir -p "$work/outdir"
for p in "$work/outdir/" "$work/outdir" "$work/outdir/." "$work/outdir/.."; do
    refused "--tasks-out $p" "--tasks-out $p names a folder; give a file name" "${infer_tasks[@]}" "$work/one.jsonl" --tasks-out "$p"
done
[ -z "$(ls -A "$work/outdir")" ] && [ ! -e "$work/outdir.csv" ] && [ ! -e "$work/outdir.longnet-lock" ] && [ ! -e "$work/.csv" ] && pass "a refused --tasks-out writes nothing" \
    || fail "a refused --tasks-out wrote: $(ls -A "$work/outdir") $(ls "$work"/outdir.* "$work"/.csv 2>/dev/null)"
accepted "--tasks-out DIR/results" "${infer_tasks[@]}" "$work/one.jsonl" --tasks-out "$work/outdir/results"
[ -s "$work/outdir/results.csv" ] && [ -s "$work/outdir/results_items.csv" ] && pass "--tasks-out DIR/results writes DIR/results.csv and DIR/results_items.csv" \
    || fail "--tasks-out DIR/results wrote: $(ls -A "$work/outdir")"

summary
