#!/usr/bin/env bash
# Build the raw LONG-document corpus in OUTDIR (idempotent: does nothing when it is complete).
# `make data` keeps the small default corpus; `make data CORPUS=corpus-long` prepares this one.
#
#   OUTDIR/docs/bible/NN-Book.txt     the King James Bible split into its 66 books (bible-kjv)
#   OUTDIR/docs/manuals/*.txt         book-length manuals: the Debian Reference (plain text, package
#                                     debian-reference-en) and the Advanced Bash-Scripting Guide
#                                     (its DocBook source, package abs-guide)
#   OUTDIR/docs/linux/DIR.txt         the Linux 6.1 kernel source (package linux-source-6.1): each
#                                     subsystem directory is one document (scripts/pack_subsystems.sh:
#                                     a `# ==== path ====` line per file; a directory over DOC_BYTES
#                                     is split into its own files and each subdirectory, recursively)
#   OUTDIR/SOURCES.txt                packages, versions and sha256 sums; written last, so its
#                                     presence marks a complete corpus
#
# `data_tool prepare` reads OUTDIR/docs: every file is one document, and whole documents go to
# validation by a hash of their name, so validation holds documents of hundreds of thousands of
# tokens (a kernel subsystem is up to DOC_BYTES, ~1M tokens).
set -euo pipefail

if [ "$#" -ne 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    echo "usage: scripts/get_long_corpus.sh OUTDIR" >&2
    exit 2
fi
out=$1
here=$(cd "$(dirname "$0")" && pwd)

# The kernel's core subsystems (about 120 MB of text); drivers/, arch/ and tools/ are left out to
# keep the corpus a size that 2 CPU cores tokenize in minutes.
LINUX_DIRS="block crypto fs init io_uring ipc kernel lib mm net security virt"
DOC_BYTES=3000000
PACKAGES="bible-kjv debian-reference-en abs-guide linux-source-6.1"

if [ -f "$out/SOURCES.txt" ] && [ -d "$out/docs" ]; then
    echo "long corpus: $out is complete (delete $out/SOURCES.txt to rebuild)"
    exit 0
fi

"$here/install_deps.sh" bible-kjv   # provides the `bible` command
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs/bible" "$tmp/docs/manuals" "$tmp/docs/linux" "$tmp/deb"

# ---- Bible: a book begins at its first chapter header ("Genesis 1", "1 Samuel 1").
echo "long corpus: splitting the Bible into books"
bible Gen1:1-Rev22:21 > "$tmp/bible.txt"
"$here/split_bible_books.sh" "$tmp/bible.txt" "$tmp/docs/bible"

# ---- Debian packages: downloaded (not installed) and unpacked privately.
if [ -z "$(apt-cache madison linux-source-6.1 2>/dev/null)" ]; then
    echo "long corpus: no apt lists, running apt-get update"
    apt-get update -qq >/dev/null
fi
apt_opts=(-qq)
[ "$(id -u)" -eq 0 ] && apt_opts+=(-o APT::Sandbox::User=root)  # apt's _apt user cannot write to mktemp dirs
echo "long corpus: downloading debian-reference-en abs-guide linux-source-6.1 (~140 MB)"
if ! (cd "$tmp/deb" && apt-get download "${apt_opts[@]}" debian-reference-en abs-guide linux-source-6.1 >/dev/null); then
    echo "error: apt-get download of debian-reference-en abs-guide linux-source-6.1 failed: check the network and apt sources (apt-get update), then re-run scripts/get_long_corpus.sh" >&2
    exit 1
fi
for deb in "$tmp"/deb/*.deb; do dpkg-deb -x "$deb" "$tmp/x"; done
zcat "$tmp/x/usr/share/debian-reference/debian-reference.en.txt.gz" > "$tmp/docs/manuals/debian-reference.txt"
zcat "$tmp/x/usr/share/doc/abs-guide/abs-book.sgml.gz" > "$tmp/docs/manuals/abs-guide.sgml.txt"

# ---- Linux: one document per subsystem directory, split while it is over DOC_BYTES.
echo "long corpus: unpacking the kernel source"
tar -xJf "$tmp"/x/usr/src/linux-source-6.1.tar.xz -C "$tmp/x"
src=$(ls -d "$tmp"/x/linux-source-6.1)
"$here/pack_subsystems.sh" "$src" "$DOC_BYTES" "$tmp/docs/linux" $LINUX_DIRS
find "$tmp/docs" -type f -empty -delete
echo "long corpus: $(find "$tmp/docs/linux" -type f | wc -l) kernel documents, $(cat "$tmp"/docs/linux/* | wc -c) bytes"

rm -rf "$out/docs"
mkdir -p "$out"
{
    echo "# Raw long-document corpus, written by scripts/get_long_corpus.sh (re-run it to reproduce)."
    echo "bible: package bible-kjv $(dpkg-query -W -f='${Version}' bible-kjv), command: bible Gen1:1-Rev22:21, split at each book's chapter 1"
    for deb in "$tmp"/deb/*.deb; do echo "package: $(basename "$deb") sha256 $(sha256sum < "$deb" | cut -d' ' -f1)"; done
    echo "linux: directories $LINUX_DIRS, split while over $DOC_BYTES bytes of text"
    echo "# sha256 of every document:"
    (cd "$tmp" && find docs -type f | LC_ALL=C sort | xargs -d '\n' sha256sum)
} > "$tmp/SOURCES.txt"
mv "$tmp/docs" "$out/docs"
mv "$tmp/SOURCES.txt" "$out/SOURCES.txt"
echo "long corpus: wrote $out/docs ($(find "$out/docs" -type f | wc -l) documents, $(cat "$out"/docs/*/* | wc -c) bytes) and $out/SOURCES.txt"
