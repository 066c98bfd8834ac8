#!/usr/bin/env bash
# scripts/prepare_text.sh TEXT OUT VOCAB: your own text as a prepared corpus in OUT (make train
# TEXT=path runs it): TEXT is one text file or a directory of them in any layout (data_tool prepare
# --text). Prepares again only when TEXT names other files or they changed since (OUT/source.txt
# holds TEXT's path and a fingerprint of its files' names, sizes, times and inodes).
# TEXT is taken literally: a name that starts with "-" is a file, not an option. Links are
# followed as data_tool follows them (TEXT itself, and links to files inside it), so the
# fingerprint changes when the files they point to do.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: scripts/prepare_text.sh TEXT OUT VOCAB" >&2; exit 2; }
text=$1 out=$2 vocab=$3
tool=$(cd -- "$(dirname -- "$0")/.." && pwd)/build/data_tool
[ -e "$text" ] || { echo "error: TEXT=$text: no such file or directory: give a text file or a directory of text files" >&2; exit 1; }
abs=$(realpath -e -- "$text")
# Each file data_tool reads (regular files, and links to them; not links to folders), by the
# file it reaches: its size, modification time and inode.
if [ -d "$abs" ]; then
    print=$(cd -- "$abs" && find . -xtype f -print0 | LC_ALL=C sort -z | xargs -0r stat -L --printf '%n %s %.9Y %d:%i\n' -- | sha256sum | cut -c1-16)
else
    print=$(stat -L --printf '%s %.9Y %d:%i\n' -- "$abs" | sha256sum | cut -c1-16)
fi
stamp="text: $abs fingerprint: $print vocab: $vocab"
if [ -f "$out/train.bin" ] && [ "$(cat -- "$out/source.txt" 2>/dev/null)" = "$stamp" ]; then
    echo "data: $out is prepared from $abs (delete $out/source.txt to prepare again)"
    exit 0
fi
rm -f -- "$out/source.txt"
if ! "$tool" prepare --text "$abs" --out "$out" --vocab "$vocab"; then
    printf -v again '%q' "$text"
    echo "error: preparing $abs failed (above); for a small text, a smaller vocabulary: make train TEXT=$again DATA_VOCAB=1024" >&2
    exit 1
fi
echo "$stamp" > "$out/source.txt"
