#!/usr/bin/env bash
# Build the raw training corpus in OUTDIR (idempotent: does nothing when it is complete).
#
#   OUTDIR/bible.txt    the King James Bible, Gen 1:1 - Rev 22:21 (package bible-kjv), ~4.3 MB
#   OUTDIR/code/        Python 3.11 standard library sources from a PINNED Debian package,
#                       one document per file, relative paths kept (e.g. code/json/decoder.py)
#   OUTDIR/SOURCES.txt  packages, versions and sha256 of everything taken, so the corpus can be
#                       reproduced; written last, so its presence marks a complete corpus
#
# The code corpus is the .py files of libpython3.11-stdlib under usr/lib/python3.11, minus test,
# GUI and vendored-installer directories, sorted by path (C locale) and cut before the first file
# that would take the total past MAX_CODE_BYTES. `data_tool prepare` reads this layout.
set -euo pipefail

if [ "$#" -ne 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    echo "usage: scripts/get_corpus.sh OUTDIR" >&2
    exit 2
fi
out=$1
here=$(cd "$(dirname "$0")" && pwd)

PY_PKG=libpython3.11-stdlib
# Pinned to the bookworm point-release version; the security pocket moves faster (deb12u9 at the
# time of writing) and old security versions disappear from the mirrors.
PY_PIN=3.11.2-6+deb12u8
MAX_CODE_BYTES=6000000
EXCLUDE_DIRS='test|tests|idlelib|tkinter|turtledemo|lib2to3|ensurepip|site-packages'

if [ -f "$out/SOURCES.txt" ] && [ -s "$out/bible.txt" ] && [ -d "$out/code" ]; then
    echo "corpus: $out is complete (delete $out/SOURCES.txt to rebuild)"
    exit 0
fi

"$here/install_deps.sh" bible-kjv   # provides the `bible` command
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- Bible: one long text; written to .tmp and renamed so a partial file never looks done.
if [ -s "$out/bible.txt" ]; then
    echo "corpus: $out/bible.txt exists, keeping it"
else
    echo "corpus: writing $out/bible.txt"
    bible Gen1:1-Rev22:21 > "$out/bible.txt.tmp"
    size=$(stat -c %s "$out/bible.txt.tmp")
    if [ "$size" -lt 4000000 ]; then
        echo "error: bible printed only $size bytes into $out/bible.txt.tmp: reinstall bible-kjv (apt-get install --reinstall bible-kjv)" >&2
        exit 1
    fi
    mv "$out/bible.txt.tmp" "$out/bible.txt"
fi

# ---- Code: download (not install) the pinned .deb and unpack it privately.
# Without package lists (fresh image) apt knows no versions at all: fetch them once.
if [ -z "$(apt-cache madison "$PY_PKG" 2>/dev/null)" ]; then
    echo "corpus: no apt lists for $PY_PKG, running apt-get update"
    apt-get update -qq >/dev/null
fi
if apt-cache madison "$PY_PKG" | awk -F'|' '{gsub(/ /, "", $2); print $2}' | grep -qxF "$PY_PIN"; then
    version=$PY_PIN
else
    version=$(apt-cache policy "$PY_PKG" | awk '/Candidate:/ {print $2}')
    if [ -z "$version" ] || [ "$version" = "(none)" ]; then
        echo "error: apt has no version of $PY_PKG: check /etc/apt/sources.list, run apt-get update, then re-run scripts/get_corpus.sh" >&2
        exit 1
    fi
    echo "warning: pinned $PY_PKG=$PY_PIN is no longer downloadable; using the candidate $version (the code corpus will differ from the pinned one)" >&2
fi

echo "corpus: downloading $PY_PKG=$version"
mkdir -p "$tmp/deb"
apt_opts=(-qq)
# As root apt drops to user _apt, which cannot write into our private mktemp directory.
[ "$(id -u)" -eq 0 ] && apt_opts+=(-o APT::Sandbox::User=root)
if ! (cd "$tmp/deb" && apt-get download "${apt_opts[@]}" "$PY_PKG=$version" >/dev/null); then
    echo "error: apt-get download $PY_PKG=$version failed: check the network / apt sources, then re-run scripts/get_corpus.sh" >&2
    exit 1
fi
deb=$(ls "$tmp"/deb/*.deb)
dpkg-deb -x "$deb" "$tmp/x"
lib="$tmp/x/usr/lib/python3.11"

# Regular files only (the package ships a dangling _sysconfigdata symlink), C-locale sort so the
# order and the cap do not depend on the machine's locale.
(cd "$lib" && find . -type f -name '*.py' | sed 's|^\./||' \
    | grep -Ev "(^|/)($EXCLUDE_DIRS)/" | LC_ALL=C sort) > "$tmp/all_files"

mkdir -p "$tmp/code"
total=0
n=0
while IFS= read -r f; do
    size=$(stat -c %s "$lib/$f")
    [ $((total + size)) -gt "$MAX_CODE_BYTES" ] && break
    mkdir -p "$tmp/code/$(dirname "$f")"
    cp "$lib/$f" "$tmp/code/$f"
    total=$((total + size))
    n=$((n + 1))
done < "$tmp/all_files"
echo "corpus: took $n of $(wc -l < "$tmp/all_files") .py files, $total bytes"

rm -rf "$out/code"
mv "$tmp/code" "$out/code"

{
    echo "# Raw corpus sources, written by scripts/get_corpus.sh (re-run it to reproduce)."
    echo "bible: package bible-kjv $(dpkg-query -W -f='${Version}' bible-kjv)," \
         "command: bible Gen1:1-Rev22:21"
    echo "bible: sha256 $(sha256sum < "$out/bible.txt" | cut -d' ' -f1) bible.txt"
    echo "code: package $PY_PKG $version (pinned $PY_PIN), file $(basename "$deb")"
    echo "code: deb sha256 $(sha256sum < "$deb" | cut -d' ' -f1)"
    echo "code: $n files, $total bytes, usr/lib/python3.11/**/*.py minus ($EXCLUDE_DIRS)/, C-sorted, cap $MAX_CODE_BYTES bytes"
    echo "# sha256 of every file taken:"
    (cd "$out" && find code -type f | LC_ALL=C sort | xargs -d '\n' sha256sum)
} > "$out/SOURCES.txt.tmp"
mv "$out/SOURCES.txt.tmp" "$out/SOURCES.txt"
echo "corpus: wrote $out/SOURCES.txt"
