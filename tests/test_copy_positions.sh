#!/usr/bin/env bash
# scripts/copy_positions.py on a positions file written as infer --copy-out writes it, its numbers
# made by hand: the repeat's loss by place and its share at tokens 1-15, the worst tenth's share,
# tokens copied and lost, the hard tokens against the rest and their share; a file of another kind and no file are refused in one line.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/lib.sh
source tests/lib.sh
work=$PWD/build/test_copy_positions
rm -rf "$work" && mkdir -p "$work"
# Gap 16: tokens 1-3 lost (3 nats), the rest copied (0.05); tokens 1-2 were hard the first time
# (5 nats), the rest 1. Gap 2048: every token 1 nat at both occurrences.
{
    echo "gap,sample,position,token,first_loss,repeat_loss"
    for j in $(seq 1 20); do
        f=1.0; [ "$j" -le 2 ] && f=5.0
        r=0.05; [ "$j" -le 3 ] && r=3.0
        echo "16,0,$j,$((100 + j)),$f,$r"
    done
    for j in $(seq 1 20); do echo "2048,0,$j,$((200 + j)),1.0,1.0"; done
} > "$work/run_positions.csv"
out=$(python3 scripts/copy_positions.py "$work/run_positions.csv" 2>&1); rc=$?
row() { grep -F "| $work/run_positions.csv | $1 |" <<< "$out"; }
[ $rc -eq 0 ] && [ "$(row 16)" = "| $work/run_positions.csv | 16 | 0.49 | 3.00 | 0.05 | 0.05 | - | - | 97% | 61% | 85% | 15% | 3.00 | 0.21 | 61% | 20 (2) |" ] \
    && pass "gap 16: by place 3.00 then 0.05, 97% of the loss at 1-15; the worst tenth 61%; 85% copied, 15% lost; hard tokens 3.00 against 0.21, 61% of the loss" \
    || fail "gap 16: exit $rc: $out"
[ "$(row 2048)" = "| $work/run_positions.csv | 2048 | 1.00 | 1.00 | 1.00 | 1.00 | - | - | 75% | 10% | 0% | 0% | - | 1.00 | 0% | 20 (0) |" ] \
    && pass "gap 2048: a flat 1.00, the worst tenth a tenth of it, no hard tokens" || fail "gap 2048: $out"
[ "$(head -n 1 <<< "$out")" = "| file | gap | repeat | at 1-3 | at 4-15 | at 16-63 | at 64-127 | at 128+ | share at 1-15 | worst 10% share | copied (<0.1) | lost (>2) | repeat where first > 4 | elsewhere | their share | tokens (first > 4) |" ] \
    && pass "the header names every column" || fail "header: $(head -n 1 <<< "$out")"

# Two files (two runs): a median row per gap after the files' rows. The second run's repeat at gap
# 2048 costs 3 nats a token: the medians there are the two runs' means.
sed 's/^\(2048,0,[0-9]*,[0-9]*,1.0\),1.0$/\1,3.0/' "$work/run_positions.csv" > "$work/run2_positions.csv"
out=$(python3 scripts/copy_positions.py "$work/run_positions.csv" "$work/run2_positions.csv" 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(grep -F '| median of 2 files | 2048 |' <<< "$out")" = "| median of 2 files | 2048 | 2.00 | 2.00 | 2.00 | 2.00 | - | - | 75% | 10% | 0% | 50% | - | 2.00 | 0% | 20 (0) |" ] \
    && [ "$(grep -F '| median of 2 files | 16 |' <<< "$out")" = "| median of 2 files | 16 | 0.49 | 3.00 | 0.05 | 0.05 | - | - | 97% | 61% | 85% | 15% | 3.00 | 0.21 | 61% | 20 (2) |" ] \
    && pass "two files: each gap's columns, the median over the files" || fail "medians: exit $rc: $out"

# --freq: a shard of 200,000 tokens where id 101 occurs once (5 a million), 102 ten times (50), every
# other passage id 100 times (500), the rest filler (id 0).
python3 - "$work/train.bin" <<'PY'
import struct, sys
ids = [101] + [102] * 10 + [t for t in list(range(103, 121)) + list(range(201, 221)) for _ in range(100)]
ids += [0] * (200000 - len(ids))
with open(sys.argv[1], "wb") as f:
    f.write(b"LNGSHARD" + struct.pack("<IIQQIQ", 2, 2, len(ids), 1, 8192, 0) + bytes(20))
    f.write(struct.pack("<Q", 0) + struct.pack("<%dH" % len(ids), *ids))
PY
out=$(python3 scripts/copy_positions.py --freq "$work/train.bin" "$work/run_positions.csv" 2>&1); rc=$?
frow() { grep -F "| $work/run_positions.csv | $1 | " <<< "$out" | tail -n 1; }
[ $rc -eq 0 ] && [ "$(frow 0-10)" = "| $work/run_positions.csv | 0-10 | 1 | 5.00 | 3.00 | 3.00 | - |" ] \
    && [ "$(frow 10-100)" = "| $work/run_positions.csv | 10-100 | 1 | 5.00 | 3.00 | 3.00 | - |" ] \
    && [ "$(frow 100-1000)" = "| $work/run_positions.csv | 100-1000 | 38 | 1.00 | 0.63 | - | 0.63 |" ] \
    && [ -z "$(frow 10000+)" ] \
    && pass "--freq: the repeats by how common each token is in the shard, every gap together" || fail "--freq: exit $rc: $out"
# By the first occurrence's loss: 4-6 nats holds ids 101 and 102 (5 and 50 a million: rare), both
# lost (3.0); 1-2 the other 38 tokens, none rare (gap 16's 3rd at 3.0 and 17 at 0.05, gap 2048's 20
# at 1.0).
[ "$(grep -F "| $work/run_positions.csv | 4-6 | " <<< "$out")" = "| $work/run_positions.csv | 4-6 | 2 | 3.00 | 3.00 | - |" ] \
    && [ "$(grep -F "| $work/run_positions.csv | 1-2 | " <<< "$out")" = "| $work/run_positions.csv | 1-2 | 38 | 0.63 | - | 0.63 |" ] \
    && pass "--freq: the repeats by the first occurrence's loss, rare tokens apart" || fail "--freq by first loss: $out"
out=$(python3 scripts/copy_positions.py --freq "$work/run_positions.csv" "$work/run_positions.csv" 2>&1); rc=$?
[ $rc -ne 0 ] && [[ $out == "error: $work/run_positions.csv is not a token shard"* ]] && [ "$(wc -l <<< "$out")" -eq 1 ] \
    && pass "--freq with a file that is no shard: one line" || fail "--freq not a shard: exit $rc: $out"
head -c 1000 "$work/train.bin" > "$work/cut.bin"
out=$(python3 scripts/copy_positions.py --freq "$work/cut.bin" "$work/run_positions.csv" 2>&1); rc=$?
[ $rc -ne 0 ] && [[ $out == "error: $work/cut.bin is cut short"* ]] && pass "--freq with a shard cut short: one line" || fail "--freq cut: exit $rc: $out"
out=$(python3 scripts/copy_positions.py --freq 2>&1); rc=$?
[ $rc -ne 0 ] && [[ $out == usage:* ]] && pass "--freq without its shard: the usage" || fail "--freq alone: exit $rc: $out"

echo "gap,sample,start,first_loss,repeat_loss" > "$work/run_items.csv"
out=$(python3 scripts/copy_positions.py "$work/run_items.csv" 2>&1); rc=$?
[ $rc -ne 0 ] && [[ $out == "error: $work/run_items.csv is not an infer --copy-out PREFIX_positions.csv"* ]] && [ "$(wc -l <<< "$out")" -eq 1 ] \
    && pass "an items file is refused in one line naming what it is not" || fail "items file: exit $rc: $out"
printf 'gap,sample,position,token,first_loss,repeat_loss\n16,0,x,5,1,1\n' > "$work/bad_positions.csv"
out=$(python3 scripts/copy_positions.py "$work/bad_positions.csv" 2>&1); rc=$?
[ $rc -ne 0 ] && [[ $out == "error: $work/bad_positions.csv line 2 is not a row"* ]] && pass "a corrupt row is refused naming its line" || fail "corrupt row: exit $rc: $out"
out=$(python3 scripts/copy_positions.py "$work/none.csv" 2>&1); rc=$?
[ $rc -ne 0 ] && [[ $out == "error: cannot read $work/none.csv"* ]] && pass "a missing file: one line" || fail "missing: exit $rc: $out"
out=$(python3 scripts/copy_positions.py 2>&1); rc=$?
[ $rc -ne 0 ] && [[ $out == usage:* ]] && pass "no file: the usage" || fail "no file: exit $rc: $out"
summary
