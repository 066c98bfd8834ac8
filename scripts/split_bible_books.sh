#!/usr/bin/env bash
# Splits the King James Bible (the output of `bible Gen1:1-Rev22:21`) into one file per book:
#   scripts/split_bible_books.sh BIBLE.txt OUTDIR   ->   OUTDIR/01-Genesis.txt ... OUTDIR/66-Revelation.txt
# A book begins at its first chapter header, a line such as "Genesis 1" or "1 Samuel 1"; the
# files concatenated in order give back the input. Fails unless it finds exactly 66 books.
set -euo pipefail
in=${1:?usage: scripts/split_bible_books.sh BIBLE.txt OUTDIR}
dir=${2:?usage: scripts/split_bible_books.sh BIBLE.txt OUTDIR}
[ -s "$in" ] || { echo "error: $in is missing or empty: write it with \`bible Gen1:1-Rev22:21 > $in\`" >&2; exit 1; }
mkdir -p "$dir"
head -1 "$in" | grep -qE '^$|^Genesis 1$' || { echo "error: $in does not begin with Genesis 1: write it with \`bible Gen1:1-Rev22:21\`" >&2; exit 1; }
awk -v dir="$dir" '
    /^[0-9A-Z][A-Za-z0-9 ]* [0-9]+$/ {
        book = $0; sub(/ [0-9]+$/, "", book)
        if (book != current) {
            current = book; n++
            name = book; gsub(/ /, "_", name)
            if (file) close(file)
            file = sprintf("%s/%02d-%s.txt", dir, n, name)
            printf "%s", before > file  # the blank lines before Genesis 1 (none after)
            before = ""
        }
    }
    { if (file) print > file; else before = before $0 "\n" }' "$in"
n=$(find "$dir" -name '[0-9][0-9]-*.txt' | wc -l)
[ "$n" -eq 66 ] || { echo "error: found $n books in $in, expected 66: reinstall bible-kjv (apt-get install --reinstall bible-kjv)" >&2; exit 1; }
