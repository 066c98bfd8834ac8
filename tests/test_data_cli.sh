#!/usr/bin/env bash
# End-to-end test of build/data_tool on a small real slice of the corpus: prepare, inspect,
# encode/decode round trips, reproducibility, and one-line errors for bad inputs.
# The prepared files are written next to the raw corpus in build/test_corpus, where
# tests/test_train_cli.sh expects them. Prints PASS/FAIL lines and "N passed, M failed";
# exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

tool=build/data_tool
raw=build/test_corpus            # made by scripts/get_corpus.sh (one-time ~2 MB apt download)
out=$raw                         # prepare's outputs do not collide with the raw files
outputs=(tokenizer.model train.bin val.bin manifest.txt)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/lib.sh
source tests/lib.sh

if [ ! -x "$tool" ]; then
    fail "$tool is missing: run make build/data_tool"
    finish
fi

if ! scripts/get_corpus.sh "$raw" > "$work/corpus.log" 2>&1; then
    cat "$work/corpus.log"
    fail "scripts/get_corpus.sh $raw"
    finish
fi
check "get_corpus.sh made bible.txt, code/ and SOURCES.txt" \
    test -s "$raw/bible.txt" -a -d "$raw/code" -a -s "$raw/SOURCES.txt"
check "get_corpus.sh is idempotent" grep -q 'complete' <(scripts/get_corpus.sh "$raw" 2>&1)

for f in "${outputs[@]}"; do rm -f "$out/$f"; done
if "$tool" prepare --raw "$raw" --out "$out" --max-bytes 400000 --vocab 512 > "$work/prepare.log" 2>&1; then
    pass "data_tool prepare --max-bytes 400000 --vocab 512"
else
    cat "$work/prepare.log"
    fail "data_tool prepare --max-bytes 400000 --vocab 512"
    finish
fi
for f in "${outputs[@]}"; do
    check "prepare wrote $f" test -s "$out/$f"
done
check "no .tmp files left behind" test -z "$(find "$out" -name '*.tmp')"
for f in train.bin val.bin; do
    check "inspect loads $f" grep -q '^vocab_size: 512$' \
        <("$tool" inspect "$out/$f" --tokenizer "$out/tokenizer.model" 2>&1)
done
check "manifest has a positive unigram baseline" \
    awk '/^unigram_baseline_nats:/ { ok = ($2 > 0) } END { exit !ok }' "$out/manifest.txt"

# Same inputs, same bytes.
"$tool" prepare --raw "$raw" --out "$work/again" --max-bytes 400000 --vocab 512 > /dev/null 2>&1
for f in "${outputs[@]}"; do
    check "prepare is reproducible: $f" cmp -s "$out/$f" "$work/again/$f"
done

# Round trips: a Bible line, and Python code whose indentation must survive.
roundtrip() {
    "$tool" encode --tokenizer "$out/tokenizer.model" < "$1" \
        | "$tool" decode --tokenizer "$out/tokenizer.model" > "$1.out" && cmp -s "$1" "$1.out"
}
sed -n '1000p' "$raw/bible.txt" > "$work/bible_line"
check "encode/decode round-trips a Bible line" roundtrip "$work/bible_line"
grep -m1 -A8 '^    def ' "$raw/code/json/decoder.py" > "$work/code_snippet"
check "code snippet has indentation" grep -q '^        ' "$work/code_snippet"
check "encode/decode round-trips Python code with indentation" roundtrip "$work/code_snippet"
printf '\tcaf\xc3\xa9 \xe2\x88\x91   x\n\n' > "$work/odd_text"
check "encode/decode round-trips tabs, unseen unicode and blank lines" roundtrip "$work/odd_text"

# Bad inputs: one line each, non-zero exit.
cp "$out/train.bin" "$work/truncated.bin" && truncate -s -1 "$work/truncated.bin"
cp "$out/train.bin" "$work/badmagic.bin" && printf 'XXXX' | dd of="$work/badmagic.bin" conv=notrunc status=none
expect_error "missing raw dir" "" "$tool" prepare --raw build/no_such_corpus --out "$work/x"
expect_error "truncated shard" "" "$tool" inspect "$work/truncated.bin"
expect_error "shard with bad magic" "" "$tool" inspect "$work/badmagic.bin"
expect_error "missing shard" "" "$tool" inspect "$work/none.bin"
expect_error "missing tokenizer file" "" "$tool" inspect "$out/train.bin" --tokenizer "$work/none.model"
expect_error "corrupt tokenizer file" "" "$tool" encode --tokenizer "$out/train.bin" < /dev/null
expect_error "--vocab 0" "" "$tool" prepare --raw "$raw" --out "$work/x" --vocab 0
expect_error "--vocab abc" "" "$tool" prepare --raw "$raw" --out "$work/x" --vocab abc
expect_error "--val-fraction 2" "" "$tool" prepare --raw "$raw" --out "$work/x" --val-fraction 2
expect_error "unknown flag" "" "$tool" prepare --raw "$raw" --out "$work/x" --frobnicate
expect_error "flag without value" "" "$tool" prepare --raw "$raw" --out
expect_error "unknown command" "" "$tool" frobnicate
expect_error "no command" "" "$tool"

# A failing prepare (vocabulary too small for the characters) must not damage earlier outputs.
mkdir -p "$work/before"
for f in "${outputs[@]}"; do cp -p "$out/$f" "$work/before/"; done
expect_error "vocab too small for the corpus" "" \
    "$tool" prepare --raw "$raw" --out "$out" --max-bytes 400000 --vocab 265
check "the small-vocab error names --vocab and the least that works" grep -q "^error: --vocab 265 is less than the [0-9]* pieces this corpus needs" <<< "$last_error"
for f in "${outputs[@]}"; do
    check "failed prepare leaves $f intact" cmp -s "$work/before/$f" "$out/$f"
done

# The long-document layout (scripts/get_long_corpus.sh): the Bible split into its books, and
# every file under docs/ one document, whole documents held out by the hash of their name.
rm -rf "$work/long" && mkdir -p "$work/long/docs/code"
check "split_bible_books.sh: 66 books that concatenate to the Bible" \
    bash -c "scripts/split_bible_books.sh '$raw/bible.txt' '$work/long/docs/bible' && [ \$(ls '$work/long/docs/bible' | wc -l) -eq 66 ] \
             && cat '$work/long/docs/bible'/* | cmp -s - '$raw/bible.txt' && [ -s '$work/long/docs/bible/19-Psalms.txt' ]"
expect_error "split_bible_books.sh on a file that is not the Bible" "" scripts/split_bible_books.sh "$raw/SOURCES.txt" "$work/nobible"
cp "$raw/code/json/"*.py "$work/long/docs/code/"
n_files=$(find "$work/long/docs" -type f | wc -l)
if "$tool" prepare --raw "$work/long" --out "$work/long_out" --vocab 512 --val-fraction 0.2 > "$work/long.log" 2>&1; then
    docs=$(awk '/^(train|val)_docs:/ { n += $2 } END { print n }' "$work/long_out/manifest.txt")
    val=$(awk '/^val_docs:/ { print $2 }' "$work/long_out/manifest.txt")
    longest=$(awk '/^val_longest_doc_tokens:/ { print $2 }' "$work/long_out/manifest.txt")
    if [ "$docs" = "$n_files" ] && [ "$val" -gt 0 ] && [ "$longest" -gt 0 ]; then
        pass "prepare reads docs/: $n_files files are $docs documents, $val held out (longest $longest tokens)"
    else
        fail "prepare of docs/: $docs documents for $n_files files, $val held out, longest '$longest'"
    fi
else
    fail "data_tool prepare --raw with docs/: $(tail -2 "$work/long.log")"
fi
# Source directories packed into subsystem documents (scripts/pack_subsystems.sh, as the long
# corpus packs the kernel), on this repository's layers/ and tests/ with a 60 KB cap: every text
# file lands in exactly one document, a directory over the cap is split, and a document over the
# cap holds only one directory's own files.
if scripts/pack_subsystems.sh . 60000 "$work/packed" layers tests > "$work/pack.log" 2>&1; then
    want=$(find layers tests -type f -print0 | xargs -0 grep -lI . | LC_ALL=C sort)
    got=$(cat "$work/packed"/*.txt | sed -n 's/^# ==== \(.*\) ====$/\1/p' | LC_ALL=C sort)
    n_docs=$(ls "$work/packed" | wc -l)
    over_ok=1
    for f in "$work/packed"/*.txt; do
        [ "$(wc -c < "$f")" -le 60000 ] && continue
        dirs=$(sed -n 's/^# ==== \(.*\) ====$/\1/p' "$f" | xargs -n1 dirname | sort -u)
        [ "$(wc -l <<< "$dirs")" -eq 1 ] && [ "$(tr / - <<< "$dirs").txt" = "$(basename "$f")" ] || over_ok=0
    done
    if [ "$want" = "$got" ] && [ "$n_docs" -gt 4 ] && [ "$over_ok" = 1 ]; then
        pass "pack_subsystems.sh: $(wc -l <<< "$want") files, each in one of $n_docs documents; big directories split"
    else
        fail "pack_subsystems.sh: files packed != files present ($(diff <(echo "$want") <(echo "$got") | head -3 | tr '\n' ' ')), $n_docs documents, over-cap check $over_ok"
    fi
else
    fail "pack_subsystems.sh: $(tail -2 "$work/pack.log")"
fi
expect_error "pack_subsystems.sh with MAX_BYTES 0" "" scripts/pack_subsystems.sh . 0 "$work/x" layers
expect_error "pack_subsystems.sh with a missing directory" "" scripts/pack_subsystems.sh . 1000 "$work/x" no_such_dir
mkdir -p "$work/empty/docs"
expect_error "docs/ with no documents" "" "$tool" prepare --raw "$work/empty" --out "$work/x" --vocab 512
# A corpus of two tiny lines cannot give 8192 pieces: the flag and the fix, not SentencePiece's
# internal check (and no warning lines before it).
mkdir -p "$work/tiny_raw/code" && printf 'a\nb\n' > "$work/tiny_raw/bible.txt" && printf 'c\n' > "$work/tiny_raw/code/x.c"
expect_error "a corpus too small for --vocab" "" "$tool" prepare --raw "$work/tiny_raw" --out "$work/x_tiny" --vocab 8192
if grep -q "more than this corpus can give" <<< "$last_error" && [ ! -e "$work/x_tiny/tokenizer.model" ]; then
    pass "the small-corpus error names --vocab and the fix, and writes no tokenizer ($(cut -c1-120 <<< "$last_error"))"
else
    fail "small corpus: $(head -c 300 <<< "$last_error")"
fi

# Your own text (prepare --text; make train TEXT=path through scripts/prepare_text.sh): one file,
# a folder of two files in any layout (too few for whole validation files: each file's last lines
# go to validation), a folder of many (whole files by the hash of their path), binaries skipped.
mkdir -p "$work/own/deep/er" "$work/many"
head -c 150000 "$raw/bible.txt" > "$work/own/book.txt"
tail -c 120000 "$raw/bible.txt" > "$work/own/deep/er/notes.md"
printf 'bin\0ary' > "$work/own/blob.dat"
for i in $(seq 1 60); do sed -n "$((i * 400)),$((i * 400 + 399))p" "$raw/bible.txt" > "$work/many/part$i.txt"; done
if "$tool" prepare --text "$work/own/book.txt" --out "$work/t1" --vocab 512 > "$work/t1.log" 2>&1 &&
   grep -q '1 train docs, 1 val docs' "$work/t1.log" && grep -q '^text: ' "$work/t1/manifest.txt"; then
    pass "prepare --text FILE: one file, its last lines held out ($(head -1 "$work/t1.log" | cut -c1-80))"
else
    fail "prepare --text FILE: $(tail -2 "$work/t1.log")"
fi
if "$tool" prepare --text "$work/own" --out "$work/t2" --vocab 512 > "$work/t2.log" 2>&1 &&
   grep -q '2 train docs, 2 val docs (1 binary files skipped)' "$work/t2.log"; then
    pass "prepare --text DIR of two files in any layout: each file's last lines held out, the binary skipped"
else
    fail "prepare --text DIR (two files): $(head -2 "$work/t2.log")"
fi
if "$tool" prepare --text "$work/many" --out "$work/t3" --vocab 512 > "$work/t3.log" 2>&1 &&
   n=$(sed -n 's/.*: \([0-9]*\) train docs, \([0-9]*\) val docs.*/\1 \2/p' "$work/t3.log") && [ "${n% *}" -gt 40 ] && [ "${n#* }" -ge 1 ] &&
   [ $(( ${n% *} + ${n#* } )) -eq 60 ]; then
    pass "prepare --text DIR of 60 files: whole files held out ($n)"
else
    fail "prepare --text DIR (60 files): $(head -2 "$work/t3.log")"
fi
expect_error "prepare --text with a missing path" "" "$tool" prepare --text "$work/nope" --out "$work/x" --vocab 512
mkdir -p "$work/bins" && printf '\0\0' > "$work/bins/a"
expect_error "prepare --text with only binaries" "" "$tool" prepare --text "$work/bins" --out "$work/x" --vocab 512
expect_error "prepare --text with --out inside it" "" "$tool" prepare --text "$work/own" --out "$work/own/prepared" --vocab 512
[ ! -e "$work/own/prepared" ] && pass "a refused --out inside --text writes nothing" || fail "--out inside --text: $work/own/prepared was made"
expect_error "prepare with both --raw and --text" "" "$tool" prepare --raw "$raw" --text "$work/own" --out "$work/x" --vocab 512
# scripts/prepare_text.sh prepares once, again when a file changes.
scripts/prepare_text.sh "$work/own" "$work/t4" 512 > "$work/t4a.log" 2>&1
scripts/prepare_text.sh "$work/own" "$work/t4" 512 > "$work/t4b.log" 2>&1
echo "more text" >> "$work/own/book.txt"
scripts/prepare_text.sh "$work/own" "$work/t4" 512 > "$work/t4c.log" 2>&1
if grep -q 'prepare: wrote' "$work/t4a.log" && grep -q 'is prepared from' "$work/t4b.log" && grep -q 'prepare: wrote' "$work/t4c.log"; then
    pass "prepare_text.sh: prepares once, and again when the text changed"
else
    fail "prepare_text.sh: $(tail -1 "$work/t4a.log") | $(tail -1 "$work/t4b.log") | $(tail -1 "$work/t4c.log")"
fi

# make data TEXT=path picks a vocabulary for the text's size (one piece per 512 bytes, a power of
# two from 512 to 8192) and says so; DATA_VOCAB overrides it, and a change of either prepares again.
head -c 600000 "$raw/bible.txt" > "$work/mid.txt"
mk() { make --no-print-directory -o build/data_tool data TEXT="$work/mid.txt" DATA_DIR="$work/t5" "$@"; }
vocab_of() { sed -n 's/^vocab_size: //p' "$work/t5/manifest.txt"; }
mk > "$work/t5a.log" 2>&1; v1=$(vocab_of)
mk > "$work/t5b.log" 2>&1
if grep -qx 'data: vocabulary 1024 for 600000 bytes of text (one piece per 512 bytes, a power of two from 512 to 8192; DATA_VOCAB=N to choose)' "$work/t5a.log" &&
   [ "$v1" = 1024 ] && grep -q 'is prepared from' "$work/t5b.log"; then
    pass "make data TEXT= (600000 bytes): vocabulary 1024 chosen, said and used; the same again is kept"
else
    fail "make data TEXT= vocabulary by size: manifest $v1: $(grep -m1 '^data: voc' "$work/t5a.log") | $(tail -1 "$work/t5b.log")"
fi
mk DATA_VOCAB=512 > "$work/t5c.log" 2>&1; v2=$(vocab_of)
mk > "$work/t5d.log" 2>&1; v3=$(vocab_of)
if grep -qx 'data: vocabulary 512, as given (DATA_VOCAB)' "$work/t5c.log" && grep -q 'prepare: wrote' "$work/t5c.log" && [ "$v2" = 512 ] &&
   grep -q 'prepare: wrote' "$work/t5d.log" && [ "$v3" = 1024 ]; then
    pass "make data TEXT= DATA_VOCAB=512: honoured (prepared again at 512), and back to 1024 without it"
else
    fail "DATA_VOCAB override: manifest $v2 then $v3: $(grep -m1 '^data: voc' "$work/t5c.log") | $(tail -1 "$work/t5d.log")"
fi
before=$(md5sum "$work/t5/tokenizer.model")
expect_error "prepare_text.sh with DATA_VOCAB=abc" "DATA_VOCAB=abc: give a number of pieces" scripts/prepare_text.sh "$work/mid.txt" "$work/t5" abc
if [ "$(md5sum "$work/t5/tokenizer.model")" = "$before" ]; then pass "a refused DATA_VOCAB leaves the prepared corpus as it was"
else fail "DATA_VOCAB=abc changed $work/t5"; fi

check "data_tool --help" grep -q 'usage: data_tool' <("$tool" --help)

finish
