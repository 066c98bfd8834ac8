#!/usr/bin/env bash
# Draws the needle-in-a-haystack heatmap of a scored task file from the report CSV that
# `infer --tasks FILE --tasks-out P` writes (P.csv): one panel per task, context length across,
# needle depth down, each cell colored by the percent of its items answered correctly (red 0,
# yellow 50, green 100) and labelled with it; a cell no item fell in is gray.
#   scripts/plot_heatmap.sh REPORT.csv [OUT.png|OUT.svg] [TITLE]
# OUT defaults to the CSV's name with .png, TITLE to the CSV's name without .csv. An OUT ending
# in .svg is drawn as SVG (text, so a test can read its labels back). Only rows with a task and a
# depth are drawn; the per-length rows (depth or task "all") are the table's. Needs gnuplot
# (scripts/install_deps.sh installs gnuplot-nox).
set -euo pipefail
usage="usage: plot_heatmap.sh REPORT.csv [OUT.png|OUT.svg] [TITLE]"
csv=${1:?$usage}
out=${2:-${csv%.csv}.png}
title=${3:-$(basename "${csv%.csv}")}
[ -f "$csv" ] || { echo "error: $csv not found: write it with infer --tasks FILE --tasks-out ${csv%.csv}" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "error: gnuplot not found: run scripts/install_deps.sh" >&2; exit 1; }
# Every heatmap this script draws carries its mark (a PNG text chunk, an SVG comment), and an
# existing OUT is replaced only when it carries it: an earlier heatmap, never another image (a
# loss curve), the CSV or a log (core/output_path.h's rule: only a file of the output's own kind
# is overwritten). An empty file counts as none.
mark="drawn by longnet-gpt scripts/plot_heatmap.sh"
if [ -s "$out" ]; then
    if ! head -c 4096 -- "$out" | grep -aqF -- "$mark"; then
        case $(od -An -tx1 -N4 -- "$out" | tr -d ' \n') in
            89504e47 | 3c3f786d | 3c737667) what="an image this script did not draw (it lacks the mark \"$mark\")" ;;  # \x89PNG, <?xml, <svg
            *) what="an existing file that is not an image" ;;
        esac
        echo "error: $out is $what: give another path (or remove that file first)" >&2
        exit 1
    fi
fi
tmp=$(mktemp -d)
# The picture is drawn to a new file of its own beside OUT (never to a name a user's file may
# have), then renamed over OUT.
part=$(mktemp -- "$(dirname -- "$out")/.$(basename -- "$out").XXXXXX") ||
    { echo "error: cannot create a file beside $out: give a writable place" >&2; rm -rf "$tmp"; exit 1; }
trap 'rm -rf "$tmp"; rm -f -- "$part"' EXIT

# The CSV checked line by line (a file of another kind fails here, naming its line, not in
# gnuplot); the cells, one "task<TAB>length<TAB>depth<TAB>accuracy" line each.
awk -F, -v csv="$csv" -v cells="$tmp/cells.tsv" '
function bad(msg) {
    printf "error: %s line %d: %s: give the report CSV that infer --tasks FILE --tasks-out P writes (P.csv)\n", csv, NR, msg > "/dev/stderr"
    failed = 1; exit 1
}
function number(s) { return s ~ /^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/ }
NR == 1 { if ($0 != "task,length,depth,items,correct,accuracy") bad("the header is not task,length,depth,items,correct,accuracy"); next }
{
    if (NF != 6) bad(NF " fields, not 6")
    if ($1 == "") bad("no task name")
    if ($2 !~ /^[0-9]+$/ || $2 + 0 < 1) bad("the length \"" $2 "\" is not a number of tokens")
    if ($3 != "all" && (!number($3) || $3 + 0 > 1)) bad("the depth \"" $3 "\" is neither \"all\" nor a number in [0, 1]")
    if ($4 !~ /^[0-9]+$/ || $5 !~ /^[0-9]+$/ || $5 + 0 > $4 + 0) bad("items \"" $4 "\" and correct \"" $5 "\" are not counts with correct <= items")
    if (!number($6) || $6 + 0 > 1) bad("the accuracy \"" $6 "\" is not a number in [0, 1]")
    if ($1 == "all" || $3 == "all") next
    key = $1 SUBSEP ($2 + 0) SUBSEP ($3 + 0)
    if (key in seen) bad("task " $1 ", length " $2 ", depth " $3 " a second time (line " seen[key] ")")
    seen[key] = NR
    printf "%s\t%d\t%.6g\t%s\n", $1, $2, $3, $6 > cells; n++
}
END {
    if (failed) exit 1
    if (NR == 0) { printf "error: %s is empty: give the report CSV that infer --tasks FILE --tasks-out P writes (P.csv)\n", csv > "/dev/stderr"; exit 1 }
    if (!n) { printf "error: %s holds no cells (rows with a task and a depth): nothing to draw\n", csv > "/dev/stderr"; exit 1 }
}' "$csv"

# Panels side by side, one empty column between them: task k, length j at x = k * (lengths + 1) + j;
# depth i at y = i (depth 0 at the top). Lengths as infer prints them (eval/task_report.h's
# format_length: 2K, 1.5K, 1M), depths to two decimals.
awk -F'\t' '!seen[$1]++ { print $1 }' "$tmp/cells.tsv" > "$tmp/tasks"
cut -f2 "$tmp/cells.tsv" | sort -n -u > "$tmp/lengths"
cut -f3 "$tmp/cells.tsv" | sort -g -u > "$tmp/depths"
awk -F'\t' -v dir="$tmp" '
function fmt_len(t,   unit, suffix) {
    if (t < 1024) return sprintf("%d", t)
    unit = t >= 1048576 ? 1048576 : 1024; suffix = t >= 1048576 ? "M" : "K"
    if (t % unit == 0) return sprintf("%d%s", t / unit, suffix)
    return sprintf("%.1f%s", t / unit, suffix)
}
function gp(s) { gsub(/\047/, "\047\047", s); return "\047" s "\047" }  # a gnuplot string: quote doubled
FILENAME == dir "/tasks" { task[$1] = nt++; name[nt - 1] = $1; next }
FILENAME == dir "/lengths" { col[$1] = nl++; len[nl - 1] = $1; next }
FILENAME == dir "/depths" { row[$1] = nd++; dep[nd - 1] = $1; next }
{
    pct = 100 * $4
    printf "%d %d %.4f %d\n", task[$1] * (nl + 1) + col[$2], row[$3], pct, int(pct + 0.5) > (dir "/cells.dat")
}
END {
    nx = nt * (nl + 1) - 1  # columns: the panels and the empty ones between them
    for (k = 0; k < nt; k++) for (j = 0; j < nl; j++) for (i = 0; i < nd; i++) print k * (nl + 1) + j, i > (dir "/grid.dat")
    xt = ""
    for (k = 0; k < nt; k++) for (j = 0; j < nl; j++) xt = xt (xt == "" ? "" : ", ") "\"" fmt_len(len[j]) "\" " k * (nl + 1) + j
    yt = ""
    for (i = 0; i < nd; i++) yt = yt (i ? ", " : "") sprintf("\"%.2f\" %d", dep[i], i)
    printf "set xtics (%s)\nset ytics (%s)\n", xt, yt > (dir "/axes.gp")
    printf "set xrange [-0.5:%g]\nset yrange [%g:-0.5]\n", nx - 0.5, nd - 0.5 > (dir "/axes.gp")
    for (k = 0; k < nt; k++)
        printf "set label %s at first %g, graph 1 center offset 0,1 font \047sans,12\047\n", gp(name[k]), k * (nl + 1) + (nl - 1) / 2 > (dir "/axes.gp")
    # Pixels: cells of 64 x 44, room left for the depths, right for the color bar, above for the
    # titles, below for the lengths; at least 480 wide (the title) and 3 rows tall (the color bar).
    w = 120 + 64 * nx + 130
    printf "%d %d %d %d\n", nx, nd, w < 480 ? 480 : w, 90 + 44 * (nd < 3 ? 3 : nd) + 80 > (dir "/size")
}' "$tmp/tasks" "$tmp/lengths" "$tmp/depths" "$tmp/cells.tsv"

read -r nx _ width height < "$tmp/size"
# Cairo draws at most 32767 pixels a side; a report that wide is unreadable anyway.
if [ "$width" -gt 16384 ] || [ "$height" -gt 16384 ]; then
    echo "error: $csv would be a ${width}x$height image ($(wc -l < "$tmp/tasks") tasks x $(wc -l < "$tmp/lengths") lengths, $(wc -l < "$tmp/depths") depths): over 16384 pixels a side: draw a CSV of fewer tasks, lengths or depths" >&2
    exit 1
fi
gp_str() { local s=${1//\'/\'\'}; printf "'%s'" "$s"; }
case $out in
    *.svg) terminal="svg size $width,$height font 'sans,11' background rgb 'white' noenhanced" ;;
    *)     terminal="pngcairo size $width,$height font 'sans,11' noenhanced" ;;
esac
frac() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", a / b }'; }
gnuplot <<GP
set terminal $terminal
set output $(gp_str "$part")
set title $(gp_str "$title") offset 0,1.6
set lmargin at screen $(frac 120 "$width")
set rmargin at screen $(frac $((120 + 64 * nx)) "$width")
set tmargin at screen $(frac $((height - 90)) "$height")
set bmargin at screen $(frac 80 "$height")
load '$tmp/axes.gp'
set xlabel 'context length (tokens)'
set ylabel 'needle depth'
unset border
set tics scale 0 nomirror
set key off
set colorbox user origin screen $(frac $((120 + 64 * nx + 30)) "$width"), screen $(frac 80 "$height") size screen $(frac 20 "$width"), screen $(frac $((height - 170)) "$height")
set cbrange [0:100]
set cbtics 0,25,100
set cblabel 'correct (%)'
set palette defined (0 '#e25244', 50 '#fade64', 100 '#4ab260')
set style fill solid 1.0 noborder
plot '$tmp/grid.dat' using 1:2:(0.48):(0.47) with boxxyerror lc rgb '#dedede', \
     '$tmp/cells.dat' using 1:2:(0.48):(0.47):3 with boxxyerror lc palette, \
     '$tmp/cells.dat' using 1:2:(sprintf('%d', \$4)) with labels tc rgb '#222222' font 'sans,10'
GP
[ -s "$part" ] || { echo "error: gnuplot wrote nothing to $part" >&2; exit 1; }
# The mark. SVG: a comment after the XML declaration. PNG: a tEXt chunk ("Software", the mark)
# right after the header chunk IHDR (the signature's 8 bytes and IHDR's 25), its CRC-32 over the
# chunk's type and data taken from gzip's trailer (the same CRC, little-endian).
case $out in
    *.svg) sed -i "1a <!-- $mark -->" -- "$part" ;;
    *)
        printf 'tEXtSoftware\0%s' "$mark" > "$tmp/chunk"
        [ "$(od -An -c -j12 -N4 -- "$part" | tr -d ' ')" = IHDR ] || { echo "error: gnuplot wrote no PNG header to $part" >&2; exit 1; }
        be32() { local s; for s in 24 16 8 0; do printf "\\$(printf '%03o' $(($1 >> s & 255)))"; done; }  # 4 bytes, big-endian
        crc=$(gzip -c < "$tmp/chunk" | tail -c 8 | head -c 4 | od -An -tu4 | tr -d ' ')
        { head -c 33 -- "$part"; be32 $(($(stat -c %s "$tmp/chunk") - 4)); cat "$tmp/chunk"; be32 "$crc"; tail -c +34 -- "$part"; } > "$tmp/marked.png"
        cat "$tmp/marked.png" > "$part" ;;
esac
chmod "$(printf '%o' $((0666 & ~$(umask))))" -- "$part"  # mktemp made it 0600: the mode any new file gets
mv -- "$part" "$out"
echo "wrote $out"
