#!/usr/bin/env bash
# data_tool prepare swaps a corpus in whole, TEXT names are taken literally, and inputs that are
# not text are refused:
#   1. prepare over an existing corpus, stopped after each of its steps (a kill -9 or a SIGTERM
#      through the test hook LNGPT_PREPARE_KILL_AT): the old corpus keeps its bytes and loads;
#      stopped within the swap by kill -9: no train.bin (never a new tokenizer beside old
#      tokens); by SIGTERM: the new corpus whole; the next prepare cleans up after any of them.
#   2. TEXT: "--text DIR/" with --out inside it; a name starting with "-"; quotes, spaces and $ in
#      make's TEXT; a TEXT that is or holds a link (edits of the file it reaches prepare again);
#      invalid UTF-8 refused naming the file and byte, valid UTF-8 kept byte for byte.
#   3. data_tool tasks / task-shard: a binary or non-UTF-8 --haystack, an --X-every past the
#      tokens a shard holds (one that gives a document none is said); scripts/pack_tree.sh on a
#      tree with a file it cannot read.
# Each refusal has an accepted twin beside it.
# Usage: tests/test_prepare_text.sh [CORPUS_DIR]   Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
corpus=${1:-build/test_corpus}
work=build/test_prepare_text
rm -rf "$work" && mkdir -p "$work"
repo=$PWD
# shellcheck source=tests/lib.sh
source tests/lib.sh
need_programs build/data_tool
need_corpus "$corpus" bible.txt
need_corpus "$corpus"
tool=build/data_tool

sums() { (cd "$1" && for f in tokenizer.model train.bin val.bin manifest.txt; do md5sum "$f" 2>&1; done); }
loads() {  # the corpus in $1: both splits load with its tokenizer
    "$tool" inspect "$1/train.bin" --tokenizer "$1/tokenizer.model" > /dev/null 2>&1 &&
        "$tool" inspect "$1/val.bin" --tokenizer "$1/tokenizer.model" > /dev/null 2>&1
}
quiet() { { "$@"; } 2> /dev/null; }  # no "Killed" line from bash

# ---- 1. prepare swaps the corpus in whole
head -c 120000 "$corpus/bible.txt" > "$work/a.txt"
tail -c 120000 "$corpus/bible.txt" > "$work/b.txt"
c="$work/c"
P=("$tool" prepare --out "$c" --vocab 512)
"${P[@]}" --text "$work/a.txt" > "$work/a.log" 2>&1 || bail "prepare of a.txt: $(tail -1 "$work/a.log")"
"$tool" prepare --text "$work/b.txt" --out "$work/ref_b" --vocab 512 > /dev/null 2>&1 || bail "prepare of b.txt"
old=$(sums "$c")
for phase in read tokenizer val manifest train; do
    (LNGPT_PREPARE_KILL_AT=$phase quiet "${P[@]}" --text "$work/b.txt" > "$work/k_$phase.log" 2>&1)
    code=$?
    if [ $code -eq 137 ] && [ "$(sums "$c")" = "$old" ] && loads "$c"; then
        pass "prepare killed (-9) after its step '$phase': the old corpus keeps its bytes and loads"
    else
        fail "prepare killed after '$phase': exit $code, corpus $([ "$(sums "$c")" = "$old" ] && echo unchanged || echo changed), $(loads "$c" && echo loads || echo 'does not load')"
    fi
done
if "${P[@]}" --text "$work/a.txt" > "$work/again.log" 2>&1 && grep -q "removed $c/.longnet-prepare, left by an interrupted prepare" "$work/again.log" &&
   grep -q "^note: $c.longnet-lock was left by pid [0-9]*, which ended without removing it" "$work/again.log" &&
   [ ! -e "$c/.longnet-prepare" ] && [ ! -e "$c.longnet-lock" ] && [ "$(sums "$c")" = "$old" ]; then
    pass "the next prepare removes what the kill left (the stage folder, the lock, each named) and makes the same corpus"
else
    fail "the prepare after the kills: $(grep -v '^prepare: [tre]' "$work/again.log" | head -3 | tr '\n' ' ') $(ls -A "$c" "$work" | tr '\n' ' ')"
fi
(LNGPT_PREPARE_KILL_AT=tokenizer:TERM quiet "${P[@]}" --text "$work/b.txt" > "$work/term.log" 2>&1)
code=$?
if [ $code -eq 143 ] && [ "$(sums "$c")" = "$old" ] && [ ! -e "$c/.longnet-prepare" ] && [ ! -e "$c.longnet-lock" ]; then
    pass "prepare ended by SIGTERM (exit 143): the old corpus as it was, its stage folder and its lock removed"
else
    fail "prepare under SIGTERM: exit $code, $(ls -A "$c" "$work" | tr '\n' ' ')"
fi
(LNGPT_PREPARE_KILL_AT=swap:TERM quiet "${P[@]}" --text "$work/b.txt" > "$work/swap_term.log" 2>&1)
code=$?
if [ $code -eq 143 ] && [ "$(sums "$c" | cut -c1-32)" = "$(sums "$work/ref_b" | cut -c1-32)" ] && [ ! -e "$c.longnet-lock" ] &&
   [ ! -e "$c/.longnet-prepare" ]; then
    pass "SIGTERM within the swap waits for it: exit 143 with the new corpus whole, the lock removed"
else
    fail "SIGTERM within the swap: exit $code, $(ls -A "$c" | tr '\n' ' ')"
fi
"${P[@]}" --text "$work/a.txt" > /dev/null 2>&1
(LNGPT_PREPARE_KILL_AT=swap quiet "${P[@]}" --text "$work/b.txt" > "$work/swap_kill.log" 2>&1)
code=$?
if [ $code -eq 137 ] && [ ! -e "$c/train.bin" ] && ! loads "$c"; then
    pass "kill -9 within the swap: no train.bin, so no corpus (never the new tokenizer beside the old tokens)"
else
    fail "kill -9 within the swap: exit $code, $(ls -A "$c" | tr '\n' ' ')"
fi
if "${P[@]}" --text "$work/b.txt" > "$work/after_swap.log" 2>&1 && loads "$c" && [ ! -e "$c/.longnet-prepare" ]; then
    pass "prepare after it makes the corpus whole"
else
    fail "prepare after the swap's kill: $(tail -1 "$work/after_swap.log")"
fi
mkdir -p "$c/.longnet-prepare" && echo "my notes" > "$c/.longnet-prepare/notes.txt"
old=$(sums "$c")
expect_error -F "a folder of that name holding a file prepare does not write" \
    "--out $c: $c/.longnet-prepare holds notes.txt, which prepare does not write" "${P[@]}" --text "$work/a.txt"
[ "$(cat "$c/.longnet-prepare/notes.txt")" = "my notes" ] && [ "$(sums "$c")" = "$old" ] &&
    pass "it is left as it is, and the corpus too" || fail "the foreign stage folder or the corpus changed"
rm -rf "$c/.longnet-prepare"

# ---- 2. TEXT taken literally
mkdir -p "$work/own" && cp "$work/a.txt" "$work/own/a.txt"
inside() { (cd "$work/own" && "$repo/$tool" prepare --text "$1" --out "$2" --vocab 512); }
expect_error -F "prepare --text \"\$PWD/\" --out prepared (relative, not there yet)" "--out prepared lies inside --text $repo/$work/own/" \
    inside "$repo/$work/own/" prepared
expect_error -F "prepare --text . --out new/prepared" "--out new/prepared lies inside --text ." inside . new/prepared
expect_error -F "prepare --text DIR/ with --out DIR/prepared" "lies inside --text" \
    "$tool" prepare --text "$work/own/" --out "$work/own/prepared" --vocab 512
[ "$(ls -A "$work/own")" = a.txt ] && pass "they made nothing there" || fail "$work/own holds $(ls -A "$work/own")"
accepted "prepare --text DIR/ with --out beside it (a name that only starts like it)" \
    "$tool" prepare --text "$PWD/$work/own/" --out "$work/own_prepared" --vocab 512

# A TEXT named "-notes.txt", beside another file: that file alone is prepared.
mkdir -p "$work/dash" && cp "$work/a.txt" "$work/dash/-notes.txt" && cp "$work/b.txt" "$work/dash/other.txt"
if (cd "$work/dash" && "$repo/scripts/prepare_text.sh" -notes.txt out 512) > "$work/dash.log" 2>&1 &&
   grep -qx "text: $repo/$work/dash/-notes.txt" "$work/dash/out/manifest.txt" && grep -q ': 1 train docs, 1 val docs' "$work/dash.log"; then
    pass "prepare_text.sh -notes.txt prepares that file, not the folder"
else
    fail "prepare_text.sh -notes.txt: $(grep -m1 '^text:' "$work/dash/out/manifest.txt" 2>/dev/null) $(tail -1 "$work/dash.log")"
fi
# make's TEXT holding a double quote, a single quote, a space, $ and a leading -.
mkdir -p "$work/q"
odd="$repo/$work/q/-a\"b 'c\$d.txt"
cp "$work/a.txt" "$odd"
if make --no-print-directory -o build/data_tool data TEXT="$odd" DATA_DIR="$work/qc" DATA_VOCAB=512 > "$work/make.log" 2>&1 &&
   grep -qxF "text: $odd" "$work/qc/manifest.txt"; then
    pass "make data TEXT='$odd': prepared from that file"
else
    fail "make data TEXT with quotes: $(grep -v '^build:' "$work/make.log" | tail -2 | tr '\n' ' ')"
fi

# Links: a TEXT that is a link to a file, a folder holding a link to a file outside it; an edit
# of the file reached prepares again, no edit does not.
mkdir -p "$work/ln/dir" && cp "$work/a.txt" "$work/ln/real.txt" && ln -s real.txt "$work/ln/link.txt"
cp "$work/b.txt" "$work/ln/dir/b.txt" && cp "$work/a.txt" "$work/ln/outside.txt" && ln -s ../outside.txt "$work/ln/dir/a.txt"
for case in "link.txt real.txt" "dir outside.txt"; do
    set -- $case
    S=(scripts/prepare_text.sh "$work/ln/$1" "$work/ln_out_$1" 512)
    "${S[@]}" > "$work/ln1.log" 2>&1; "${S[@]}" > "$work/ln2.log" 2>&1
    echo "And a line added to the text reached through the link." >> "$work/ln/$2"
    "${S[@]}" > "$work/ln3.log" 2>&1
    if grep -q 'prepare: wrote' "$work/ln1.log" && grep -q 'is prepared from' "$work/ln2.log" && grep -q 'prepare: wrote' "$work/ln3.log"; then
        pass "TEXT=$1 (a link to $2 on the way): unchanged is kept, an edit of $2 prepares again"
    else
        fail "TEXT=$1: $(tail -1 "$work/ln1.log") | $(tail -1 "$work/ln2.log") | $(tail -1 "$work/ln3.log")"
    fi
done

# UTF-8: anything else refused naming the file and the byte offset; valid UTF-8 kept exactly.
mkdir -p "$work/u"
printf 'line one\nline two caf\xe9\nline three\n' > "$work/u/latin1.txt"
expect_error -F "prepare --text of a Latin-1 file" "--text: $work/u/latin1.txt is not UTF-8 text (at byte offset 21, 0xe9" \
    "$tool" prepare --text "$work/u/latin1.txt" --out "$work/u_out" --vocab 512
for bad in 'overlong \xc0\xaf' 'surrogate \xed\xa0\x80' 'cut \xe2\x88'; do
    printf "%s\n" "$(head -c 3000 "$work/a.txt")" > "$work/u/bad.txt"; printf "${bad}\nend\n" >> "$work/u/bad.txt"
    expect_error "prepare --text with a malformed sequence (${bad%% *})" "is not UTF-8 text (at byte offset [0-9]*, 0x" \
        "$tool" prepare --text "$work/u/bad.txt" --out "$work/u_out" --vocab 512
done
mkdir -p "$work/u/dir" && cp "$work/a.txt" "$work/u/dir/good.txt" && cp "$work/u/latin1.txt" "$work/u/dir/old.txt"
expect_error -F "prepare --text DIR holding one Latin-1 file" "--text: $work/u/dir/old.txt is not UTF-8 text" \
    "$tool" prepare --text "$work/u/dir" --out "$work/u_out" --vocab 512
[ ! -e "$work/u_out" ] && pass "the refused prepares made nothing" || fail "a refused prepare made $work/u_out"
{ cat "$work/a.txt"; printf 'caf\xc3\xa9 \xe2\x88\x91 \xf0\x9f\x98\x80 na\xc3\xafve\n'; } > "$work/u/utf8.txt"
if "$tool" prepare --text "$work/u/utf8.txt" --out "$work/u_ok" --vocab 512 > /dev/null 2>&1 &&
   "$tool" encode --tokenizer "$work/u_ok/tokenizer.model" < "$work/u/utf8.txt" |
   "$tool" decode --tokenizer "$work/u_ok/tokenizer.model" | cmp -s - "$work/u/utf8.txt"; then
    pass "UTF-8 text (2, 3 and 4-byte characters) is prepared and round-trips byte for byte"
else
    fail "prepare and round trip of UTF-8 text"
fi

# ---- 3. data_tool tasks and task-shard: haystacks that are not text, --X-every out of range
Q=("$tool" tasks --data "$corpus" --task passkey --lengths 300 --depths 0.5)
refused "tasks --haystack tokenizer.model" "--haystack: $corpus/tokenizer.model is not text (a NUL byte at offset" \
    "${Q[@]}" --haystack "$corpus/tokenizer.model" --out "$work/t1.jsonl"
refused "tasks --haystack a Latin-1 file" "--haystack: $work/u/latin1.txt is not UTF-8 text (at byte offset 21" \
    "${Q[@]}" --haystack "$work/u/latin1.txt" --out "$work/t2.jsonl"
mkdir -p "$work/hay" && cp "$work/a.txt" "$work/hay/a.txt" && cp "$corpus/tokenizer.model" "$work/hay/z.model"
refused "tasks --haystack a folder holding a binary" "--haystack $work/hay: $work/hay/z.model is not text" \
    "${Q[@]}" --haystack "$work/hay" --out "$work/t3.jsonl"
accepted "tasks --haystack a text file" "${Q[@]}" --haystack "$work/a.txt" --out "$work/t4.jsonl"
T=("$tool" task-shard --data "$corpus" --doc-tokens 1K --tokens 2K)
refused "task-shard --haystack tokenizer.model" "--haystack: $corpus/tokenizer.model is not text" \
    "${T[@]}" --haystack "$corpus/tokenizer.model" --out "$work/s1.bin"
for flag in needle-every passkey-every quote-every repeat-every; do
    refused "task-shard --$flag 1e300" "--$flag 1e+300 is more tokens than a shard can hold: give at most 268435456" \
        "${T[@]}" --"$flag" 1e300 --out "$work/s2.bin"
    refused "task-shard --$flag 1e9" "--$flag 1e+09 is more tokens than a shard can hold" "${T[@]}" --"$flag" 1e9 --out "$work/s2.bin"
    accepted "task-shard --$flag 2048 (one in a document of 1024)" "${T[@]}" --"$flag" 2048 --out "$work/s3.bin"
    if "${T[@]}" --"$flag" 4096 --out "$work/s3.bin" > "$work/every.log" 2>&1 &&
       grep -q "^task-shard: --$flag 4096 gives no .* in a document of --doc-tokens 1024 (it takes at most 2048)" "$work/every.log"; then
        pass "task-shard --$flag 4096 with documents of 1024: made, saying it gives them none"
    else
        fail "task-shard --$flag 4096: $(head -2 "$work/every.log")"
    fi
done
[ ! -e "$work/t1.jsonl" ] && [ ! -e "$work/s1.bin" ] && [ ! -e "$work/s2.bin" ] && pass "the refused commands wrote nothing" ||
    fail "a refused command wrote its --out"

# ---- scripts/pack_tree.sh: a file it cannot read is an error naming it, before any output.
mkdir -p "$work/tree/sub" && echo "hello" > "$work/tree/a.txt" && echo "world" > "$work/tree/sub/b.txt"
if scripts/pack_tree.sh "$work/tree" > "$work/tree.txt" 2> "$work/tree.err" && grep -qx '# ==== sub/b.txt ====' "$work/tree.txt"; then
    pass "pack_tree.sh packs a readable tree"
else
    fail "pack_tree.sh on a readable tree: $(cat "$work/tree.err")"
fi
chmod 000 "$work/tree/sub/b.txt"
as_user=()
[ "$(id -u)" -eq 0 ] && command -v setpriv > /dev/null && as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
if [ "$(id -u)" -eq 0 ] && [ ${#as_user[@]} -eq 0 ]; then
    echo "SKIP pack_tree.sh on an unreadable file: root reads every file, and setpriv is missing"
else
    out=$("${as_user[@]}" scripts/pack_tree.sh "$work/tree" 2> "$work/tree.err"); code=$?
    if [ $code -ne 0 ] && [ -z "$out" ] && [ "$(grep -c . "$work/tree.err")" -eq 1 ] &&
       grep -qF "error: $work/tree/sub/b.txt cannot be read" "$work/tree.err"; then
        pass "pack_tree.sh with an unreadable file: one line naming it, nothing packed -> $(cat "$work/tree.err")"
    else
        fail "pack_tree.sh with an unreadable file: exit $code, $(wc -c <<< "$out") bytes out, $(cat "$work/tree.err")"
    fi
fi
chmod 644 "$work/tree/sub/b.txt"

summary
