#!/usr/bin/env bash
# scripts/plot_heatmap.sh, the heatmap of infer --tasks-out's report CSV drawn by gnuplot: a PNG
# beside the CSV; as SVG (text), the labels read back: every length, depth and task, and each
# cell's percent, rounded as the printed report rounds it; a CSV of another kind or a malformed one
# refused with one line naming its line, drawing nothing; an OUT that is not a heatmap this script
# drew (the CSV, another PNG or SVG: each heatmap carries its mark) never replaced. gnuplot comes with scripts/install_deps.sh (make test runs it); without it the test
# says so and checks nothing.
# Usage: tests/test_plot_heatmap.sh   Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
work=build/test_plot_heatmap
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
plot=scripts/plot_heatmap.sh
if ! command -v gnuplot > /dev/null; then
    echo "SKIP gnuplot not found: scripts/install_deps.sh installs gnuplot-nox (make test does)"
    finish
fi

# Two tasks (in this order: the panels' order), lengths 600, 1536, 2048 and 1M, depths 0, 0.25,
# 0.5, 1; multikey has no item at 1M (gray cells); the per-length rows are not drawn.
cat > "$work/r.csv" << 'EOF'
task,length,depth,items,correct,accuracy
passkey,600,0,3,2,0.666667
passkey,600,1,3,0,0.000000
passkey,600,all,6,2,0.333333
passkey,1048576,0,8,1,0.125000
passkey,1048576,0.5,2,2,1.000000
passkey,1048576,all,10,3,0.300000
multikey,1536,0.25,4,3,0.750000
multikey,1536,all,4,3,0.750000
multikey,2048,1,7,6,0.857143
multikey,2048,all,7,6,0.857143
all,600,all,6,2,0.333333
EOF
# The texts of an SVG, one a line (gnuplot's noenhanced text: one <text> element each).
svg_texts() { grep -o '>[^<>]*</text>' "$1" | sed 's/<\/text>$//; s/^>//; s/^ *//'; }

# 1. The PNG, beside the CSV by default.
if out=$($plot "$work/r.csv" 2>&1); then
    sig=$(od -An -tx1 -N8 "$work/r.png" 2>/dev/null | tr -d ' \n')
    [ "$sig" = 89504e470d0a1a0a ] && [ "$(stat -c %s "$work/r.png")" -gt 2000 ] && [ "$out" = "wrote $work/r.png" ] &&
        pass "a PNG beside the CSV ($(stat -c %s "$work/r.png") bytes)" || fail "the PNG: signature '$sig', said '$out'"
    # IHDR: width and height, big-endian at bytes 16..23; 2 panels of 4 lengths and 1 column between: 9 columns of 64 pixels.
    read -r w h < <(od -An -tu1 -j16 -N8 "$work/r.png" | awk '{ print ($1 * 2^24 + $2 * 2^16 + $3 * 256 + $4), ($5 * 2^24 + $6 * 2^16 + $7 * 256 + $8) }')
    [ "$w" -ge $((9 * 64)) ] && [ "$h" -ge $((4 * 44)) ] && pass "the image holds 9 columns of cells and 4 rows (${w}x$h)" ||
        fail "the image is ${w}x$h, too small for 9 x 4 cells"
    [ -z "$(find "$work" -name '.r.png.*')" ] && pass "no temporary file left" || fail "left behind: $(find "$work" -name '.r.png.*')"
else
    fail "plot_heatmap.sh on a report CSV failed: $out"
fi

# 2. What it draws, read back from the SVG.
if $plot "$work/r.csv" "$work/r.svg" "model@1 on eval.jsonl" > /dev/null 2>&1; then
    texts=$(svg_texts "$work/r.svg" | tr '\n' '|')
    for want in "|0.00|0.25|0.50|1.00|" "|600|1.5K|2K|1M|600|1.5K|2K|1M|" "|passkey|multikey|" "|model@1 on eval.jsonl|" \
                "|context length (tokens)|" "|needle depth|" "|correct (%)|"; do
        [[ "|$texts" == *"$want"* ]] && pass "the SVG shows $want" || fail "the SVG lacks $want: $texts"
    done
    # The cells' percents in the CSV's order: 66.67 -> 67, 12.5 -> 13 (as infer's table rounds).
    cells=$(sed 's/.*|context length (tokens)|//' <<< "$texts" | cut -d'|' -f1-6)
    [ "$cells" = "67|0|13|100|75|86" ] && pass "each cell shows its percent ($cells)" || fail "cell labels '$cells', want 67|0|13|100|75|86 ($texts)"
    ! svg_texts "$work/r.svg" | grep -qx 'all' && pass "the per-length rows (task or depth all) are not drawn" || fail "a row of 'all' was drawn"
else
    fail "plot_heatmap.sh to SVG failed"
fi
# The check reads the values: one accuracy changed, another label.
sed 's/^multikey,2048,1,7,6,0.857143/multikey,2048,1,7,1,0.142857/' "$work/r.csv" > "$work/changed.csv"
$plot "$work/changed.csv" "$work/changed.svg" > /dev/null 2>&1
changed=$(svg_texts "$work/changed.svg" 2>/dev/null | tr '\n' '|')
[[ "$changed" == *"|75|14|"* ]] && [[ "$changed" != *"|86|"* ]] && pass "a changed accuracy changes its cell's label (86 -> 14)" ||
    fail "the changed CSV's labels: $changed"

# 3. Refused, with one line "error: ..." and nothing drawn.
bad=0
refused() {  # name, the message's words, CSV text
    bad=$((bad + 1))
    local name=$1 pattern=$2 f="$work/bad$bad.csv" err code
    printf '%s' "$3" > "$f"
    err=$($plot "$f" "$work/bad.png" 2>&1); code=$?
    if [ $code -ne 0 ] && [ "$(grep -c . <<< "$err")" -eq 1 ] && [[ "$err" == error:* ]] && grep -qF -- "$pattern" <<< "$err" && [ ! -e "$work/bad.png" ]; then
        pass "refused: $name -> $err"
    else
        fail "refused: $name (exit $code, $(ls "$work"/bad.png* 2>/dev/null)): $err"
    fi
}
h="task,length,depth,items,correct,accuracy"
refused "a run's metrics.csv" "line 1: the header is not task,length,depth" $'step,split,loss,lr\n1,train,3.2,0.001\n'
refused "an items CSV" "line 1: the header is not" $'line,task,length,depth,tokens,answer,output,correct\n1,passkey,600,0,600,42,42,1\n'
refused "a row of 5 fields" "line 3: 5 fields, not 6" "$h"$'\npasskey,600,0,1,1,1\npasskey,600,0,1,1\n'
refused "more correct than items" "line 2: items \"2\" and correct \"3\"" "$h"$'\npasskey,600,0,2,3,1.5\n'
refused "an accuracy over 1" "line 2: the accuracy \"1.5\"" "$h"$'\npasskey,600,0,2,2,1.5\n'
refused "a depth that is not a number" "line 2: the depth \"deep\"" "$h"$'\npasskey,600,deep,2,2,1\n'
refused "a length that is not a number" "line 2: the length \"2K\"" "$h"$'\npasskey,2K,0,2,2,1\n'
refused "a cell twice" "line 3: task passkey, length 600, depth 0 a second time (line 2)" "$h"$'\npasskey,600,0,2,2,1\npasskey,600,0,2,1,0.5\n'
refused "no cells, only per-length rows" "holds no cells" "$h"$'\npasskey,600,all,2,2,1\nall,600,all,2,2,1\n'
refused "an empty file" "is empty" ""
wide=$(for t in $(seq 60); do for l in 1024 2048 4096 8192; do echo "t$t,$l,0,1,1,1"; done; done)
refused "a grid too wide to draw (60 tasks)" "over 16384 pixels a side" "$h"$'\n'"$wide"$'\n'
err=$($plot "$work/none.csv" 2>&1) && fail "a missing CSV was accepted" || { [[ "$err" == "error: $work/none.csv not found"* ]] &&
    pass "refused: a missing CSV -> $err" || fail "a missing CSV: $err"; }

# 4. OUT: an earlier heatmap is replaced; any other file (the CSV itself, another PNG or SVG) is
#    not. The mark is a PNG text chunk: the PNG stays well-formed (each chunk's CRC checked).
mark="drawn by longnet-gpt scripts/plot_heatmap.sh"
head -c 200 "$work/r.png" | grep -aqF "$mark" && pass "the PNG carries the mark in its first bytes" || fail "the PNG lacks the mark"
if command -v python3 > /dev/null; then
    chunks=$(python3 -c '
import struct, sys, zlib
d = open(sys.argv[1], "rb").read(); i = 8; out = []
while i < len(d):
    n, = struct.unpack(">I", d[i:i + 4]); t = d[i + 4:i + 8]
    ok = zlib.crc32(d[i + 4:i + 8 + n]) == struct.unpack(">I", d[i + 8 + n:i + 12 + n])[0]
    out.append(t.decode() + ("" if ok else "(bad crc)")); i += 12 + n
print(" ".join(out))' "$work/r.png")
    [[ "$chunks" == "IHDR tEXt "*" IEND" && "$chunks" != *"bad crc"* ]] && pass "the marked PNG's chunks are well-formed ($chunks)" ||
        fail "the marked PNG's chunks: $chunks"
fi
grep -qF "<!-- $mark -->" "$work/r.svg" && pass "the SVG carries the mark" || fail "the SVG lacks the mark"
$plot "$work/r.csv" "$work/r.png" > /dev/null 2>&1 && pass "an earlier heatmap is replaced" || fail "redrawing over $work/r.png failed"
$plot "$work/r.csv" "$work/r.svg" > /dev/null 2>&1 && pass "an earlier SVG heatmap is replaced" || fail "redrawing over $work/r.svg failed"
gnuplot -e "set terminal pngcairo size 200,100; set output '$work/loss.png'; plot x" 2> /dev/null
gnuplot -e "set terminal svg; set output '$work/other.svg'; plot x" 2> /dev/null
not_replaced() {  # name, OUT, what the message says
    local sum err
    sum=$(md5sum < "$2")
    err=$($plot "$work/r.csv" "$2" 2>&1) && fail "$1 was drawn over" ||
        { [ "$(grep -c . <<< "$err")" -eq 1 ] && [[ "$err" == "error: $2 is $3"* ]] && [ "$(md5sum < "$2")" = "$sum" ] &&
            pass "$1 keeps its bytes -> $err" || fail "OUT over $1: $err"; }
}
not_replaced "an OUT that is not an image (the CSV)" "$work/r.csv" "an existing file that is not an image"
not_replaced "an OUT that is another PNG (a loss curve)" "$work/loss.png" "an image this script did not draw"
not_replaced "an OUT that is another SVG" "$work/other.svg" "an image this script did not draw"

summary
