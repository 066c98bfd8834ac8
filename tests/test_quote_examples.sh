#!/usr/bin/env bash
# scripts/quote_examples.py on a task file and items files written as infer writes them: for each
# depth asked, the first quote item at the length (an earlier length and a control item ignored),
# its cue's last line, the count of runs right over every items file, the first --show runs'
# outputs on one line (tabs and breaks escaped, cut at --width) and the control's; an items file
# scored on part of the task file (other line numbers) still matches. Then what it refuses.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/lib.sh
source tests/lib.sh
work=$PWD/build/test_quote_examples
rm -rf "$work" && mkdir -p "$work"
cat > "$work/t.jsonl" <<'JSON'
{"task":"quote","context":"x","question":"Go on:\nthe first","answer":"one two","length":100,"depth":0,"needle_token":5,"seed":1}
{"task":"quote","context":"x","question":"Go on:\nwrong length","answer":"a b","length":200,"depth":0,"needle_token":5,"seed":1}
{"task":"quote-control","context":"x","question":"Go on:\nthe first","answer":"one two","length":500,"depth":0,"needle_token":5,"seed":1}
{"task":"quote","context":"x","question":"Go on:\nthe\tlast","answer":"three","length":500,"depth":0,"needle_token":5,"seed":1}
{"task":"quote","context":"x","question":"Go on:\nsecond at 0","answer":"four","length":500,"depth":0,"needle_token":5,"seed":1}
{"task":"quote","context":"x","question":"Go on:\nmid","answer":"five six","length":500,"depth":0.33,"needle_token":5,"seed":1}
JSON
cat > "$work/r@1_q_items.csv" <<'CSV'
line,task,length,depth,tokens,answer,output,correct
1,quote,500,0,500,three," three
	x",1
2,quote,500,0.33,500,five six, five seven,0
CSV
cat > "$work/r@2_q_items.csv" <<'CSV'
line,task,length,depth,tokens,answer,output,correct
4,quote,500,0,500,three, three,1
6,quote,500,0.33,500,five six, five six and more words here,1
CSV
cat > "$work/r@3_q_items.csv" <<'CSV'
line,task,length,depth,tokens,answer,output,correct
4,quote,500,0,500,three, tree,0
CSV
cat > "$work/ctl-r@1_q_items.csv" <<'CSV'
line,task,length,depth,tokens,answer,output,correct
4,quote,500,0,500,three, the,0
CSV
out=$(python3 scripts/quote_examples.py --tasks "$work/t.jsonl" --length 500 --depths 0,0.33,0.9 --label Book --show 2 --width 12 \
      --control "$work/ctl-r@1_q_items.csv" "$work/r@1_q_items.csv" "$work/r@2_q_items.csv" "$work/r@3_q_items.csv" 2>&1); rc=$?
want='Book, depth 0: "the\tlast"  the text: "three"  (2 of 3 runs)
    @1: " three\n\tx"  @2: " three"  @1, control: " the"
Book, depth 0.33: "mid"  the text: "five six"  (1 of 2 runs)
    @1: " five seven"  @2: " five six an"'
[ $rc -eq 0 ] && [ "$out" = "$want" ] \
    && pass "the first quote at each depth of the length: cue, text, runs right, two runs' outputs and the control's; a depth without items skipped" \
    || fail "quote_examples: exit $rc:"$'\n'"$out"

printf '{"task":"quote","context":"x","question":"q","answer":"a","length":500,"depth":"deep"}\n' > "$work/baddepth.jsonl"
printf '{"task":"quote","context":"x","question":"q","length":500,"depth":0}\n' > "$work/noanswer.jsonl"
for args in "--tasks $work/baddepth.jsonl --length 500 $work/r@1_q_items.csv" "--tasks $work/noanswer.jsonl --length 500 $work/r@1_q_items.csv" \
            "--length 500 $work/r@1_q_items.csv" "--tasks $work/none.jsonl --length 500 $work/r@1_q_items.csv" \
            "--tasks $work/t.jsonl --length 700 $work/r@1_q_items.csv" "--tasks $work/t.jsonl --length 500 $work/t.jsonl" \
            "--tasks $work/t.jsonl --length 500 --depths 0,x $work/r@1_q_items.csv" "--tasks $work/t.jsonl --length 100 $work/r@1_q_items.csv"; do
    # shellcheck disable=SC2086
    out=$(python3 scripts/quote_examples.py $args 2>&1); rc=$?
    [ $rc -ne 0 ] && [ "$(wc -l <<< "$out")" -eq 1 ] && [[ $out == error:* ]] \
        && pass "refused: quote_examples.py ${args//$work\//}" || fail "quote_examples.py ${args//$work\//}: exit $rc: $out"
done
summary
