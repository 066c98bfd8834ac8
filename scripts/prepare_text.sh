#!/usr/bin/env bash
# scripts/prepare_text.sh TEXT OUT VOCAB|auto: your own text as a prepared corpus in OUT (make train
# TEXT=path runs it): TEXT is one text file or a directory of them in any layout (data_tool prepare
# --text). Prepares again only when TEXT names other files, they changed since, or the vocabulary
# differs (OUT/source.txt holds TEXT's path, a fingerprint of its files' names, sizes, times and
# inodes, and the vocabulary).
# VOCAB "auto" suits the vocabulary to the text's size: one piece per 512 bytes, rounded down to a
# power of two from 512 to 8192. A vocabulary much larger than the text leaves most pieces seen a
# handful of times (their embeddings barely trained); 8192 is what the 4.3 MB default corpus uses.
# TEXT is taken literally: a name that starts with "-" is a file, not an option. Links are
# followed as data_tool follows them (TEXT itself, and links to files inside it), so the
# fingerprint changes when the files they point to do.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: scripts/prepare_text.sh TEXT OUT VOCAB|auto" >&2; exit 2; }
text=$1 out=$2 vocab=$3
tool=$(cd -- "$(dirname -- "$0")/.." && pwd)/build/data_tool
[ -e "$text" ] || { echo "error: TEXT=$text: no such file or directory: give a text file or a directory of text files" >&2; exit 1; }
[[ $vocab =~ ^(auto|[1-9][0-9]{0,8})$ ]] || { echo "error: DATA_VOCAB=$vocab: give a number of pieces (e.g. 2048), or auto to suit the text's size" >&2; exit 1; }
abs=$(realpath -e -- "$text")
# Each file data_tool reads (regular files, and links to them; not links to folders), by the
# file it reaches: its size, modification time and inode.
if [ -d "$abs" ]; then
    files=$(cd -- "$abs" && find . -xtype f -print0 | LC_ALL=C sort -z | xargs -0r stat -L --printf '%n %s %.9Y %d:%i\n' --)
else
    files=$(stat -L --printf '%s %.9Y %d:%i\n' -- "$abs")
fi
print=$(printf '%s\n' "$files" | sha256sum | cut -c1-16)
if [ "$vocab" = auto ]; then
    # Each line ends "size time dev:inode" (a name with spaces before it only adds fields).
    bytes=$(printf '%s\n' "$files" | awk 'NF >= 3 { s += $(NF - 2) } END { printf "%d", s }')
    vocab=512
    while [ "$vocab" -lt 8192 ] && [ $((vocab * 2 * 512)) -le "$bytes" ]; do vocab=$((vocab * 2)); done
    echo "data: vocabulary $vocab for $bytes bytes of text (one piece per 512 bytes, a power of two from 512 to 8192; DATA_VOCAB=N to choose)"
else
    echo "data: vocabulary $vocab, as given (DATA_VOCAB)"
fi
stamp="text: $abs fingerprint: $print vocab: $vocab"
if [ -f "$out/train.bin" ] && [ "$(cat -- "$out/source.txt" 2>/dev/null)" = "$stamp" ]; then
    echo "data: $out is prepared from $abs (delete $out/source.txt to prepare again)"
    exit 0
fi
rm -f -- "$out/source.txt"
if ! "$tool" prepare --text "$abs" --out "$out" --vocab "$vocab"; then
    printf -v again '%q' "$text"
    echo "error: preparing $abs failed (above); for a small text, a smaller vocabulary: make train TEXT=$again DATA_VOCAB=$((vocab > 520 ? vocab / 2 : 260))" >&2
    exit 1
fi
echo "$stamp" > "$out/source.txt"
