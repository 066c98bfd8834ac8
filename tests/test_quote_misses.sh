#!/usr/bin/env bash
# scripts/quote_misses.py on an items file written as infer writes them (quoted fields with commas,
# doubled quotes and a line break; passkey rows it must skip), numbers chosen so that each cell's
# share is known here: a word counts only when the output's word ends where the answer's does.
# Then what it refuses: no file, a file that is not an items file, a length that is not a number.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/lib.sh
source tests/lib.sh
work=$PWD/build/test_quote_misses
rm -rf "$work" && mkdir -p "$work"
cat > "$work/run_items.csv" <<'CSV'
line,task,length,depth,tokens,answer,output,correct
1,passkey,2048,0,2040,12345, 99999,0
2,quote,2048,0,2040,located in, located in quest,1
3,quote,2048,0.5,2040,located in, located on the,0
4,quote,2048,1,2040,located in, locatedness,0
5,quote,2048,1,2040,"risk, of"," risk, of the",1
6,quote,8192,0,8100,"say ""hi"" now"," say ""hi"" then",0
7,quote,8192,0.5,8100,= NULL;," = NULL;
}",1
8,quote,8192,1,8100,static int, void,0
9,quote,8192,1,8100,static int, static,0
10,quote-control,2048,0,2000,located in, the end,0
CSV
out=$(python3 scripts/quote_misses.py "$work/run_items.csv" 2>&1); rc=$?
row() { grep -F "| $work/run_items.csv | $1 | $2 |" <<< "$out"; }
[ $rc -eq 0 ] && [ "$(row quote 2048)" = "| $work/run_items.csv | quote | 2048 | 4 | 50% | 25% | 25% |" ] \
    && pass "2K: two right, one missed with a word right (on for in), one with none (locatedness)" || fail "2K row: exit $rc: $out"
[ "$(row quote 8192)" = "| $work/run_items.csv | quote | 8192 | 4 | 25% | 50% | 25% |" ] \
    && pass "8K: quotes and a line break inside fields read; an output that stops after a word has that word" || fail "8K row: $out"
[ "$(row quote-control 2048)" = "| $work/run_items.csv | quote-control | 2048 | 1 | 0% | 0% | 100% |" ] \
    && pass "the control's own row" || fail "control row: $out"
! grep -q passkey <<< "$out" && pass "passkey rows skipped" || fail "a passkey row in: $out"

# Several files (a recipe's runs): a median row per task and length after the files' own rows.
sed 's/^5,quote,2048,1,2040,"risk, of"," risk, of the",1$/5,quote,2048,1,2040,"risk, of"," dog",0/' "$work/run_items.csv" > "$work/run2_items.csv"
cp "$work/run2_items.csv" "$work/run3_items.csv"
out=$(python3 scripts/quote_misses.py "$work/run_items.csv" "$work/run2_items.csv" "$work/run3_items.csv" 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(grep -F '| median of 3 files | quote | 2048 |' <<< "$out")" = "| median of 3 files | quote | 2048 | 4 each | 25% | 25% | 50% |" ] \
    && [ "$(grep -F '| median of 3 files | quote | 8192 |' <<< "$out")" = "| median of 3 files | quote | 8192 | 4 each | 25% | 50% | 25% |" ] \
    && [ "$(grep -c '^| median of' <<< "$out")" -eq 3 ] \
    && pass "three files: each task and length's shares, the median over the files" || fail "medians: exit $rc: $out"
[ "$(python3 scripts/quote_misses.py "$work/run_items.csv" | grep -c '^| median')" -eq 0 ] \
    && pass "one file: no median row" || fail "one file printed a median"

out=$(python3 scripts/quote_misses.py 2>&1); rc=$?
[ $rc -eq 2 ] && [[ $out == usage:* ]] && pass "refused: no file" || fail "no file: exit $rc: $out"
printf 'task,length,depth,items,correct,accuracy\nquote,2048,0,10,5,0.5\n' > "$work/cells.csv"
out=$(python3 scripts/quote_misses.py "$work/cells.csv" 2>&1); rc=$?
[ $rc -eq 1 ] && [[ $out == "error: $work/cells.csv is not an items file"* ]] && [ "$(wc -l <<< "$out")" -eq 1 ] \
    && pass "refused in one line: a cells file, not an items file" || fail "cells file: exit $rc: $out"
out=$(python3 scripts/quote_misses.py "$work/missing.csv" 2>&1); rc=$?
[ $rc -eq 1 ] && [[ $out == "error: cannot read $work/missing.csv"* ]] && pass "refused in one line: a file that is not there" || fail "missing file: exit $rc: $out"
printf 'line,task,length,depth,tokens,answer,output,correct\n1,quote,2K,0,9,a,a,1\n' > "$work/badlen.csv"
out=$(python3 scripts/quote_misses.py "$work/badlen.csv" 2>&1); rc=$?
[ $rc -eq 1 ] && [[ $out == *"length '2K' is not a number"* ]] && pass "refused: a length that is not a number" || fail "bad length: exit $rc: $out"
summary
