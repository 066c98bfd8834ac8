#!/usr/bin/env bash
# Packs directories of a source tree into documents, one per subsystem, for the long-document
# corpus (scripts/get_long_corpus.sh):
#   scripts/pack_subsystems.sh SRC MAX_BYTES OUTDIR DIR [DIR ...]
# Each DIR (relative to SRC) becomes OUTDIR/DIR.txt (slashes as dashes), its text files packed
# like scripts/pack_tree.sh: a `# ==== path ====` line per file, paths relative to SRC, in
# C-locale order. A directory whose document would pass MAX_BYTES is split instead: its own files
# make one document, and each subdirectory is packed the same way (recursively). Binary files
# (grep -I) are skipped. Every text file lands in exactly one document.
set -euo pipefail
usage="usage: scripts/pack_subsystems.sh SRC MAX_BYTES OUTDIR DIR [DIR ...]"
[ $# -ge 4 ] || { echo "$usage" >&2; exit 2; }
src=$1 max=$2 out=$3
shift 3
[ -d "$src" ] || { echo "error: $src is not a directory: give the root of the source tree" >&2; exit 1; }
[[ "$max" =~ ^[0-9]+$ ]] && [ "$max" -gt 0 ] || { echo "error: MAX_BYTES must be a positive integer (got '$max')" >&2; exit 1; }
mkdir -p "$out"

text_bytes() {  # bytes of $1's document as pack_files writes it (relative to $src): each text file
    # with its header line and newline, so that a document under the cap stays under it
    (cd "$src" && find "$1" -type f -print0 | xargs -0 -r grep -lIZ . 2>/dev/null | xargs -0 -r stat -c '%s %n' |
        awk '{ path = substr($0, index($0, " ") + 1); s += $1 + length(path) + 14 } END { print s + 0 }')
}
pack_files() {  # the text files given (relative to $src), one document on stdout
    local f
    for f in "$@"; do
        grep -Iq . "$src/$f" 2>/dev/null || continue
        printf '# ==== %s ====\n' "$f"
        cat "$src/$f"
        printf '\n'
    done
}
emit() {  # emit DIR (relative to $src)
    local dir=$1 name=${1//\//-} files sub
    if [ "$(text_bytes "$dir")" -le "$max" ]; then
        mapfile -d '' files < <(cd "$src" && find "$dir" -type f -print0 | LC_ALL=C sort -z)
        [ "${#files[@]}" -eq 0 ] || pack_files "${files[@]}" > "$out/$name.txt"
    else
        mapfile -d '' files < <(cd "$src" && find "$dir" -maxdepth 1 -type f -print0 | LC_ALL=C sort -z)
        [ "${#files[@]}" -eq 0 ] || pack_files "${files[@]}" > "$out/$name.txt"
        while IFS= read -r -d '' sub; do emit "$sub"; done < <(cd "$src" && find "$dir" -mindepth 1 -maxdepth 1 -type d -print0 | LC_ALL=C sort -z)
    fi
}
for d in "$@"; do
    d=${d%/}
    [ -d "$src/$d" ] || { echo "error: $src/$d is not a directory: give directories of $src" >&2; exit 1; }
    emit "$d"
done
find "$out" -type f -empty -delete
