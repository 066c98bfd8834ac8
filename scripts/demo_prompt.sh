#!/usr/bin/env bash
# scripts/demo_prompt.sh FILE DEPTH PROMPT_OUT TRUTH_OUT: a question about FILE whose answer sits at
# DEPTH (0..1, a fraction of its bytes). The cue is the first half of the first line at or after
# that depth that is at least 48 characters long and whose first half occurs once in FILE; the
# prompt is all of FILE, a blank line, then the cue; the truth is how that line and the next one
# go on in FILE. A model that read FILE answers by continuing the cue with the truth; one that
# cannot see that far back can only guess. Prints the cue's line number and byte offset.
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: scripts/demo_prompt.sh FILE DEPTH PROMPT_OUT TRUTH_OUT" >&2; exit 2; }
file=$1 depth=$2 prompt=$3 truth=$4
[ -f "$file" ] && [ -s "$file" ] || { echo "demo_prompt: $file is not a non-empty file" >&2; exit 1; }
awk -v d="$depth" 'BEGIN { exit !(d ~ /^(0(\.[0-9]+)?|1(\.0*)?)$/) }' ||
    { echo "demo_prompt: DEPTH must be a number in [0, 1] (got '$depth')" >&2; exit 1; }
size=$(wc -c < "$file")
from=$(awk -v d="$depth" -v s="$size" 'BEGIN { printf "%d", d * s }')
# Candidate lines at or after the byte offset: "line number<TAB>first half<TAB>second half".
found=""
while IFS=$'\t' read -r n head rest; do
    [ "$(grep -cF -- "$head" "$file")" -eq 1 ] || continue
    found=$n
    break
done < <(awk -v from="$from" '{ len = length($0) + 1 }
    off + len > from && length($0) >= 48 {
        cut = index(substr($0, int(length($0) / 2)), " ") + int(length($0) / 2) - 1
        if (cut > 8 && cut < length($0)) printf "%d\t%s\t%s\n", NR, substr($0, 1, cut - 1), substr($0, cut)
    }
    { off += len }' "$file" | head -n 200)
[ -n "$found" ] || { echo "demo_prompt: no long, unique line at or after depth $depth of $file" >&2; exit 1; }
line=$(sed -n "${found}p" "$file")
cut=$(awk -v l="$line" 'BEGIN { h = int(length(l) / 2); print index(substr(l, h), " ") + h - 1 }')
{ cat "$file"; printf '\n\n%s' "${line:0:cut-1}"; } > "$prompt"
{ printf '%s\n' "${line:cut-1}"; sed -n "$((found + 1))p" "$file"; } > "$truth"
echo "cue: line $found of $file ($(head -n "$((found - 1))" "$file" | wc -c) bytes in, of $size)"
