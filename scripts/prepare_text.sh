#!/usr/bin/env bash
# scripts/prepare_text.sh TEXT OUT VOCAB: your own text as a prepared corpus in OUT (make train
# TEXT=path runs it): TEXT is one text file or a directory of them in any layout (data_tool prepare
# --text). Prepares again only when TEXT names other files or they changed since (OUT/source.txt
# holds TEXT's path and a fingerprint of its files' names, sizes and times).
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: scripts/prepare_text.sh TEXT OUT VOCAB" >&2; exit 2; }
text=$1 out=$2 vocab=$3
[ -e "$text" ] || { echo "error: TEXT=$text: no such file or directory: give a text file or a directory of text files" >&2; exit 1; }
abs=$(cd "$(dirname "$text")" && echo "$PWD/$(basename "$text")")
print=$(find "$abs" -type f -printf '%P %s %T@\n' | LC_ALL=C sort | sha256sum | cut -c1-16)
stamp="text: $abs fingerprint: $print vocab: $vocab"
if [ -f "$out/train.bin" ] && [ "$(cat "$out/source.txt" 2>/dev/null)" = "$stamp" ]; then
    echo "data: $out is prepared from $abs (delete $out/source.txt to prepare again)"
    exit 0
fi
rm -f "$out/source.txt"
if ! build/data_tool prepare --text "$abs" --out "$out" --vocab "$vocab"; then
    echo "error: preparing $abs failed (above); for a small text, a smaller vocabulary: make train TEXT=$text DATA_VOCAB=1024" >&2
    exit 1
fi
echo "$stamp" > "$out/source.txt"
