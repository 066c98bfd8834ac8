#!/usr/bin/env bash
# Every input by identity: a token shard records the fingerprint of the
# tokenizer it was encoded with (data/FORMAT.md, version 2), and train (its corpus and --mix),
# infer --perplexity, data_tool tasks --haystack and task-shard --haystack refuse a shard of
# another tokenizer: one of a smaller vocabulary (whose ids are all in range and decode to
# garbage) and one of the same size. data_tool --out never replaces its own --haystack, nor a
# corpus's train.bin without a tokenizer beside it.
# Each refusal has a control: the same command with the right input runs.
# Usage: tests/test_shard_identity.sh [CORPUS_DIR]   Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
corpus=${1:-build/test_corpus}
work=build/test_shard_identity
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
need_programs build/train build/infer build/data_tool
need_corpus "$corpus"

tiny=(--device cpu --data "$corpus" --layers 2 --width 64 --heads 1 --seq-len 32 --batch 2 --steps 2 --warmup 1
      --val-every 0 --val-batches 1 --ckpt-every 1 --log-every 1 --sample-tokens 0)

# Two other tokenizers of the same raw text: a smaller vocabulary, and the same size (trained on
# less text, so other pieces).
small="$work/small" same="$work/same"
build/data_tool prepare --raw "$corpus" --out "$small" --max-bytes 200000 --vocab 400 > "$work/small.log" 2>&1 \
    || bail "prepare of the small-vocabulary corpus: $(tail -1 "$work/small.log")"
build/data_tool prepare --raw "$corpus" --out "$same" --max-bytes 200000 --vocab "$(awk '/^vocab_size:/ { print $2 }' <(build/data_tool inspect "$corpus/val.bin"))" \
    > "$work/same.log" 2>&1 || bail "prepare of the same-size corpus: $(tail -1 "$work/same.log")"
cmp -s "$same/tokenizer.model" "$corpus/tokenizer.model" && bail "the same-size tokenizer is the corpus's own"
fp() { build/data_tool inspect "$1" | awk '/^tokenizer:/ { print $2 }'; }
[ "$(build/data_tool inspect "$corpus/val.bin" | awk '/^version:/ { print $2 }')" = 2 ] && [ -n "$(fp "$corpus/val.bin")" ] \
    && [ "$(fp "$corpus/val.bin")" = "$(fp "$corpus/train.bin")" ] && [ "$(fp "$same/val.bin")" != "$(fp "$corpus/val.bin")" ] \
    && pass "prepare writes version 2 with the tokenizer's fingerprint (one per tokenizer)" || fail "fingerprints: $(fp "$corpus/val.bin") $(fp "$same/val.bin")"

# ---- task-shard and tasks --haystack
T=(build/data_tool task-shard --data "$corpus" --doc-tokens 256 --tokens 1K)
accepted "task-shard --haystack of this corpus" "${T[@]}" --haystack "$corpus/train.bin" --out "$work/good.bin"
[ "$(fp "$work/good.bin")" = "$(fp "$corpus/val.bin")" ] && pass "task-shard records the corpus tokenizer's fingerprint" \
    || fail "task-shard fingerprint $(fp "$work/good.bin")"
refused "task-shard --haystack of a smaller vocabulary" "--haystack $small/train.bin declares a vocabulary of" \
    "${T[@]}" --haystack "$small/train.bin" --out "$work/bad1.bin"
refused "task-shard --haystack of another tokenizer, same vocabulary" "--haystack $same/train.bin was made with another tokenizer" \
    "${T[@]}" --haystack "$same/train.bin" --out "$work/bad2.bin"
Q=(build/data_tool tasks --data "$corpus" --lengths 300 --depths 0.5)
accepted "tasks --haystack of this corpus" "${Q[@]}" --haystack "$corpus/val.bin" --out "$work/good.jsonl"
refused "tasks --haystack of a smaller vocabulary" "--haystack $small/val.bin declares a vocabulary of" \
    "${Q[@]}" --haystack "$small/val.bin" --out "$work/bad1.jsonl"
refused "tasks --haystack of another tokenizer, same vocabulary" "--haystack $same/val.bin was made with another tokenizer" \
    "${Q[@]}" --haystack "$same/val.bin" --out "$work/bad2.jsonl"
[ ! -e "$work/bad1.bin" ] && [ ! -e "$work/bad2.bin" ] && [ ! -e "$work/bad1.jsonl" ] && [ ! -e "$work/bad2.jsonl" ] \
    && pass "the refused commands wrote nothing" || fail "a refused command wrote its --out"

# ---- --out is never an input, nor a corpus split
cp "$work/good.bin" "$work/hay.bin" && cp "$work/good.jsonl" "$work/hay.jsonl"
sum() { cksum < "$1"; }
before=$(sum "$work/hay.bin")
refused "task-shard --haystack S --out S" "--out $work/hay.bin is also the input --haystack" "${T[@]}" --haystack "$work/hay.bin" --out "$work/hay.bin"
[ "$before" = "$(sum "$work/hay.bin")" ] && pass "task-shard left its --haystack as it was" || fail "task-shard changed $work/hay.bin"
before=$(sum "$work/hay.jsonl")
refused "tasks --haystack S --out S" "--out $work/hay.jsonl is also the input --haystack" "${Q[@]}" --haystack "$work/hay.jsonl" --out "$work/hay.jsonl"
[ "$before" = "$(sum "$work/hay.jsonl")" ] && pass "tasks left its --haystack as it was" || fail "tasks changed $work/hay.jsonl"
accepted "task-shard --out over an earlier task shard (not an input)" "${T[@]}" --haystack "$work/hay.bin" --out "$work/good.bin"
accepted "tasks --out over an earlier task file (not an input)" "${Q[@]}" --haystack "$work/hay.jsonl" --out "$work/good.jsonl"
mkdir -p "$work/split" && cp "$corpus/train.bin" "$work/split/train.bin" && cp "$corpus/val.bin" "$work/split/val.bin"
before=$(sum "$work/split/train.bin")
refused "task-shard --out a train.bin without a tokenizer beside it" "--out $work/split/train.bin is a corpus shard" \
    "${T[@]}" --out "$work/split/train.bin"
refused "task-shard --out a val.bin without a tokenizer beside it" "--out $work/split/val.bin is a corpus shard" \
    "${T[@]}" --out "$work/split/val.bin"
[ "$before" = "$(sum "$work/split/train.bin")" ] && pass "the copied train.bin is unchanged" || fail "task-shard replaced $work/split/train.bin"

# ---- train: the corpus's own shards and --mix
accepted "train --mix a task shard of this corpus" tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$work/good.bin:0.25" --out "$work/run_ok"
refused "train --mix a shard of a smaller vocabulary" "--mix $small/train.bin declares a vocabulary of" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$small/train.bin:0.25" --out "$work/run1"
refused "train --mix a shard of another tokenizer, same vocabulary" "--mix $same/train.bin was made with another tokenizer" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$same/train.bin:0.25" --out "$work/run2"
mkdir -p "$work/mixed" && cp "$corpus/tokenizer.model" "$corpus/val.bin" "$work/mixed/" && cp "$same/train.bin" "$work/mixed/train.bin"
refused "train --data whose train.bin is of another tokenizer" "$work/mixed/train.bin was made with another tokenizer" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --data "$work/mixed" --out "$work/run3"
refused "train --mix a missing file: it does not exist, and how shards are made" "--mix $work/none.bin does not exist" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$work/none.bin:0.25" --out "$work/run4"
grep -qF "data_tool task-shard" <<< "$last_error" && ! grep -qF "make data" <<< "$last_error" \
    && pass "the missing --mix message says how shards are made, not 'make data'" || fail "missing --mix message: $last_error"
refused "train --mix a tokenizer: not a token shard" "--mix $corpus/tokenizer.model is not a token shard (bad magic" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --mix "$corpus/tokenizer.model:0.25" --out "$work/run5"
! grep -qF "make data" <<< "$last_error" && pass "the bad-magic --mix message does not say 'make data'" || fail "bad magic --mix message: $last_error"
made=$(for r in run1 run2 run3 run4 run5; do [ -e "$work/$r" ] && echo "$r"; done)
[ -z "$made" ] && pass "the refused runs made no --out" || fail "refused runs made their --out: $made"

# ---- infer --perplexity of a shard: compared with the checkpoint's tokenizer
ppl=(./build/infer --device cpu --checkpoint "$work/run_ok" --ctx 32 --windows fresh)
accepted "infer --perplexity this corpus's val.bin" "${ppl[@]}" --perplexity "$corpus/val.bin"
refused "infer --perplexity a shard of another tokenizer, same vocabulary" "--perplexity $same/val.bin was made with another tokenizer" \
    "${ppl[@]}" --perplexity "$same/val.bin"
refused "infer --perplexity a shard of a smaller vocabulary" "--perplexity $small/val.bin declares a vocabulary of" \
    "${ppl[@]}" --perplexity "$small/val.bin"
finish
