#!/usr/bin/env bash
# scripts/quote_distractors.py on a task file and two runs' items files made here, with `cat` as the
# encoder (a token is a word), so that each item's count of its question's last words in the context
# is known: once, twice, five times, and none (the context holds "foobar", the question ends in
# "foo"). Then what it refuses: items files of other task files, a file that is not an items file,
# a line that is not a task item, no encoder.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/lib.sh
source tests/lib.sh
work=$PWD/build/test_quote_distractors
rm -rf "$work" && mkdir -p "$work"
item() {  # task context question answer
    printf '{"task":"%s","context":"%s","question":"%s","answer":"%s","length":100,"depth":0.5,"needle_token":1,"seed":1}\n' "$@"
}
{
    item passkey "x y z" "What is the pass key?" "123"
    item quote "a b the red cat sat c d" "the red cat" "sat"
    item quote-control "a b c d" "the red cat" "sat"
    item quote "red cat one and red cat two e f" "and red cat" "two"
    item quote "p w cat q w cat r w cat s w cat x w cat v" "x w cat" "v"
    item quote "m foobar n o" "the foo" "bar"
} > "$work/quote.jsonl"
cat > "$work/r1_items.csv" <<'CSV'
line,task,length,depth,tokens,answer,output,correct
1,passkey,100,0.5,100,123, 123,1
2,quote,100,0.5,100,sat, sat,1
3,quote-control,100,0.5,100,sat, ran,0
4,quote,100,0.5,100,two, two,1
5,quote,100,0.5,100,v, x,0
6,quote,100,0.5,100,bar, baz,0
CSV
sed -e 's/^4,quote,100,0.5,100,two, two,1$/4,quote,100,0.5,100,two, one,0/' -e 's/^5,quote,100,0.5,100,v, x,0$/5,quote,100,0.5,100,v, v,1/' \
    "$work/r1_items.csv" > "$work/r2_items.csv"
run() { python3 scripts/quote_distractors.py --encoder cat "$@"; }
out=$(run --k 2 --tasks "$work/quote.jsonl" "$work/r1_items.csv" "$work/r2_items.csv" 2>&1); rc=$?
row() { grep -F "| 100 | $1 |" <<< "$out"; }
[ $rc -eq 0 ] && [ "$(row 1)" = "| 100 | 1 | 1 | 2 | 100% |" ] && pass "once: one item, two runs, both right" || fail "once: exit $rc: $out"
[ "$(row 2-3)" = "| 100 | 2-3 | 1 | 2 | 50% |" ] && pass "twice: right in one run of two" || fail "twice: $out"
[ "$(row 4+)" = "| 100 | 4+ | 1 | 2 | 50% |" ] && pass "five times (the question's end is its last 2 tokens)" || fail "five times: $out"
[ "$(row '0 (tokenized apart)')" = "| 100 | 0 (tokenized apart) | 1 | 2 | 0% |" ] && pass "none: the question's end tokenized apart" || fail "none: $out"
out=$(run --k 3 --tasks "$work/quote.jsonl" "$work/r1_items.csv" 2>&1)
[ "$(row 1)" = "| 100 | 1 | 3 | 3 | 67% |" ] && [ -z "$(row 2-3)$(row 4+)" ] \
    && pass "--k 3: the last 3 tokens of the twice and five-times items (and red cat, x w cat) occur once" || fail "--k 3: $out"

# Refusals: one line each, exit 1.
sed 's/^6,quote,100,0.5,100,bar/6,quote,100,0.5,100,baz/' "$work/r1_items.csv" > "$work/other_items.csv"
expect_error "an items file scored on another task file" "answers 'baz' where the task file's item answers 'bar'" \
    run --tasks "$work/quote.jsonl" "$work/other_items.csv"
head -n 5 "$work/r1_items.csv" > "$work/short_items.csv"
expect_error "an items file with fewer quote rows" "has 2 quote rows at length 100, the task files 4" \
    run --tasks "$work/quote.jsonl" "$work/short_items.csv"
expect_error "a file that is not an items file" "is not an items file" run --tasks "$work/quote.jsonl" "$work/quote.jsonl"
expect_error "a line that is not a task item" "line 1 is not a task item" run --tasks "$work/r1_items.csv" "$work/r1_items.csv"
expect_error "no encoder" "give one of --tokenizer" python3 scripts/quote_distractors.py --tasks "$work/quote.jsonl" "$work/r1_items.csv"
expect_error "an encoder that fails" "the encoder false failed" run --encoder false --tasks "$work/quote.jsonl" "$work/r1_items.csv"
expect_error "no items file" "the following arguments are required: items" run --tasks "$work/quote.jsonl"
finish
