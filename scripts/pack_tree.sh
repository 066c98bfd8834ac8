#!/usr/bin/env bash
# Packs a source tree into one text document, a header line per file, for infer --prompt-file
# (a codebase as a prompt) or --perplexity:
#   scripts/pack_tree.sh DIR [MAX_BYTES_PER_FILE] > tree.txt
#   # ==== relative/path ====
#   <the file's text>
# Files in sorted path order; binary files (grep -I) and .git are skipped; a file longer than
# MAX_BYTES_PER_FILE (default 1000000) is cut there with a note. The headers are ours alone: a
# path holding a control character (a newline would split its header) is written shell-quoted
# ($'a\nb'), and a line of a file that begins as a header does gets a backslash before it.
# A file or folder that cannot be read is an error naming it, before anything is written: a
# prompt that silently lacks a file would be scored as if it held the whole tree.
set -euo pipefail
dir=${1:?usage: scripts/pack_tree.sh DIR [MAX_BYTES_PER_FILE] > tree.txt}
max=${2:-1000000}
[ -d "$dir" ] || { echo "error: $dir is not a directory: give the root of a source tree" >&2; exit 1; }
[[ "$max" =~ ^[0-9]+$ ]] && [ "$max" -gt 0 ] || { echo "error: MAX_BYTES_PER_FILE must be a positive integer (got '$max')" >&2; exit 1; }
cd -- "$dir"
unreadable() { echo "error: $dir/${1#./} cannot be read: give read permission (chmod -R u+rX) or move it out of $dir" >&2; exit 1; }
bad=$(find . -name .git -prune -o \( -type d \( ! -readable -o ! -executable \) -o -type f ! -readable \) -print -quit)
[ -z "$bad" ] || unreadable "$bad"
find . -name .git -prune -o -type f -print0 | LC_ALL=C sort -z | while IFS= read -r -d '' f; do
    code=0
    grep -Iq . -- "$f" 2>/dev/null || code=$?
    [ $code -eq 1 ] && continue  # binary or empty
    [ $code -eq 0 ] || unreadable "$f"
    name=${f#./}
    [[ "$name" == *[[:cntrl:]]* ]] && name=$(printf '%q' "$name")
    printf '# ==== %s ====\n' "$name"
    head -c "$max" "$f" | sed 's/^# ==== /\\# ==== /'  # GNU sed keeps a missing last newline missing
    [ "$(wc -c < "$f")" -le "$max" ] || printf '\n# (cut at %s bytes)' "$max"
    printf '\n'
done
