#!/usr/bin/env bash
# Packs a source tree into one text document, a header line per file, for infer --prompt-file
# (a codebase as a prompt) or --perplexity:
#   scripts/pack_tree.sh DIR [MAX_BYTES_PER_FILE] > tree.txt
#   # ==== relative/path ====
#   <the file's text>
# Files in sorted path order; binary files (grep -I) and .git are skipped; a file longer than
# MAX_BYTES_PER_FILE (default 1000000) is cut there with a note.
set -euo pipefail
dir=${1:?usage: scripts/pack_tree.sh DIR [MAX_BYTES_PER_FILE] > tree.txt}
max=${2:-1000000}
[ -d "$dir" ] || { echo "error: $dir is not a directory: give the root of a source tree" >&2; exit 1; }
[[ "$max" =~ ^[0-9]+$ ]] && [ "$max" -gt 0 ] || { echo "error: MAX_BYTES_PER_FILE must be a positive integer (got '$max')" >&2; exit 1; }
cd "$dir"
find . -name .git -prune -o -type f -print0 | LC_ALL=C sort -z | while IFS= read -r -d '' f; do
    grep -Iq . "$f" 2>/dev/null || continue  # binary or empty
    printf '# ==== %s ====\n' "${f#./}"
    head -c "$max" "$f"
    [ "$(wc -c < "$f")" -le "$max" ] || printf '\n# (cut at %s bytes)' "$max"
    printf '\n'
done
