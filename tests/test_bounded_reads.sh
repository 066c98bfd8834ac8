#!/usr/bin/env bash
# Bounded reads: every input file of build/infer and build/train is a regular file of
# bounded size, refused otherwise with one line before anything is read or written; no input can
# make a program block (a FIFO) or read forever (/dev/zero); a long --prompts-file line is cut to
# the context like --prompt-file, so its cost grows linearly with its length.
# Usage: tests/test_bounded_reads.sh [CORPUS_DIR]   Prints PASS/FAIL lines and "N passed, M failed".
# Every command runs under `timeout`, so the test itself cannot hang.
set -uo pipefail
corpus=${1:-build/test_corpus}
work=build/test_bounded_reads
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
for bin in build/train build/infer; do [ -x $bin ] || bail "$bin not built"; done
[ -f "$corpus/train.bin" ] || bail "no corpus at $corpus (run tests/test_data_cli.sh first)"

# A tiny model (as tests/test_train_cli.sh's): 2 blocks, width 64, one head, windows of 32.
tiny=(--data "$corpus" --layers 2 --width 64 --heads 1 --seq-len 32 --batch 4 --steps 5 --sample-tokens 0 --device cpu)
if ! timeout 120 tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/ck" > "$work/train.log" 2>&1; then
    bail "training the tiny model: $(tail -2 "$work/train.log")"
fi
infer=(timeout 20 ./build/infer --checkpoint "$work/ck" --device cpu --max-new 2)
scorer=(timeout 20 ./build/infer --checkpoint "$work/ck" --device cpu)  # --max-new is refused when scoring


mkfifo "$work/fifo" || bail "mkfifo"
mkdir -p "$work/dir"
printf 'And God said\n' > "$work/prompt.txt"

# 1. FIFOs, devices and directories: refused at once, naming the flag and the file.
expect_error "--prompt-file FIFO" "^error: --prompt-file $work/fifo is a FIFO" \
    "${infer[@]}" --prompt-file "$work/fifo" --save-cache "$work/kv_fifo.safetensors"
[ ! -e "$work/kv_fifo.safetensors" ] && [ ! -e "$work/kv_fifo.safetensors.tmp" ] \
    && pass "the refused --prompt-file wrote no --save-cache file" || fail "a refused run wrote $work/kv_fifo.safetensors"
expect_error "--prompt-file /dev/zero" "^error: --prompt-file /dev/zero is a character device" "${infer[@]}" --prompt-file /dev/zero
expect_error "--prompt-file directory" "^error: --prompt-file $work/dir is a directory" "${infer[@]}" --prompt-file "$work/dir"
expect_error "--prompts-file FIFO" "^error: --prompts-file $work/fifo is a FIFO" "${infer[@]}" --prompts-file "$work/fifo"
expect_error "--prompts-file /dev/zero" "^error: --prompts-file /dev/zero is a character device" "${infer[@]}" --prompts-file /dev/zero
expect_error "--tasks FIFO" "^error: --tasks $work/fifo is a FIFO" "${scorer[@]}" --tasks "$work/fifo"
expect_error "--perplexity FIFO" "^error: --perplexity $work/fifo is a FIFO" "${scorer[@]}" --perplexity "$work/fifo"
expect_error "--load-cache FIFO" "^error: --load-cache $work/fifo is a FIFO" \
    "${infer[@]}" --load-cache "$work/fifo" --prompt " x" --save-cache "$work/kv_load.safetensors"
[ ! -e "$work/kv_load.safetensors" ] && pass "the refused --load-cache wrote no --save-cache file" || fail "a refused --load-cache wrote a cache"
expect_error "--load-cache /dev/zero" "^error: --load-cache /dev/zero is a character device" "${infer[@]}" --load-cache /dev/zero --prompt " x"
expect_error "--checkpoint FIFO" "^error: checkpoint $work/fifo is a FIFO" \
    timeout 20 ./build/infer --checkpoint "$work/fifo" --device cpu --prompt x
expect_error "train --layout-file FIFO" "^error: --layout-file $work/fifo is a FIFO" \
    timeout 20 tests/last_wins.sh ./build/train "${tiny[@]}" --attn block-sparse --layout-file "$work/fifo" --out "$work/lf"
[ ! -e "$work/lf" ] && pass "the refused --layout-file run wrote nothing" || fail "a refused --layout-file run wrote $work/lf"
expect_error "train --layout-file /dev/zero" "^error: --layout-file /dev/zero is a character device" \
    timeout 20 tests/last_wins.sh ./build/train "${tiny[@]}" --attn block-sparse --layout-file /dev/zero --out "$work/lf"
expect_error "attention_tool --layout-file FIFO" "^error: --layout-file $work/fifo is a FIFO" \
    timeout 20 ./build/attention_tool --pattern block-sparse --layout-file "$work/fifo" --N 64 --H 1 --D 64
expect_error "train --data with a FIFO shard" "is a FIFO" bash -c "mkdir -p '$work/fifo_data' && \
    cp '$corpus'/{val.bin,tokenizer.model} '$work/fifo_data/' && mkfifo '$work/fifo_data/train.bin' && \
    timeout 20 ./build/train --data '$work/fifo_data' --layers 2 --width 64 --heads 1 --seq-len 32 --batch 4 --steps 1 --device cpu --out '$work/fd'"

# --mix shards: a FIFO, a directory or a device is refused before any open that could block (the
# identity train records of each --mix shard once opened it blocking: a FIFO hung for ever).
train_tiny=(timeout 20 tests/last_wins.sh ./build/train "${tiny[@]}")
expect_error "train --mix FIFO" "^error: --mix $work/fifo is a FIFO" "${train_tiny[@]}" --mix "$work/fifo:0.5" --out "$work/mix_fifo"
expect_error "train --mix a directory: says so, and what --mix takes" "^error: --mix $work/dir is a directory: give a token shard file" \
    "${train_tiny[@]}" --mix "$work/dir:0.5" --out "$work/mix_dir"
expect_error "train --mix /dev/zero" "^error: --mix /dev/zero is a character device" "${train_tiny[@]}" --mix /dev/zero:0.5 --out "$work/mix_zero"
[ ! -e "$work/mix_fifo" ] && [ ! -e "$work/mix_dir" ] && [ ! -e "$work/mix_zero" ] && pass "the refused --mix runs wrote nothing" \
    || fail "a refused --mix run made its --out"
cp "$corpus/val.bin" "$work/mix.bin"
accepted "train --mix a regular shard (the control)" "${train_tiny[@]}" --steps 2 --mix "$work/mix.bin:0.25" --out "$work/mix_ok"

# A shard's 64-byte header is checked against its size before the body is read: 20 GB sparse
# files (a damaged header; a sound header over a size it does not declare) are refused at once,
# in one line, under 2 GiB of address space (once: read whole first, a generic out-of-memory).
mkdir -p "$work/sparse"
cp "$corpus"/{val.bin,tokenizer.model} "$work/sparse/"
head -c 64 "$corpus/train.bin" > "$work/sparse/train.bin"
head -c 64 "$corpus/val.bin" > "$work/sparse_mix.bin"
: > "$work/zeros.bin"
if truncate -s 20G "$work/sparse/train.bin" "$work/sparse_mix.bin" "$work/zeros.bin" 2>/dev/null; then
    small_memory=(bash -c 'ulimit -v 2097152 && exec "$@"' small_memory)
    expect_error "train --data, a 20 GB train.bin whose header declares less" \
        "^error: $work/sparse/train.bin: file is 21474836480 bytes but the header (.*) implies a different size" \
        "${small_memory[@]}" timeout 20 tests/last_wins.sh ./build/train "${tiny[@]}" --data "$work/sparse" --out "$work/sparse_out"
    expect_error "train --mix, a 20 GB shard whose header declares less" "^error: $work/sparse_mix.bin: file is 21474836480 bytes" \
        "${small_memory[@]}" "${train_tiny[@]}" --mix "$work/sparse_mix.bin:0.5" --out "$work/sparse_out"
    expect_error "train --mix, 20 GB of zeros" "^error: --mix $work/zeros.bin is not a token shard (bad magic" \
        "${small_memory[@]}" "${train_tiny[@]}" --mix "$work/zeros.bin:0.5" --out "$work/sparse_out"
    [ ! -e "$work/sparse_out" ] && pass "the refused sparse shards wrote nothing" || fail "a refused sparse shard made $work/sparse_out"
    expect_error "infer --perplexity, a 20 GB shard whose header declares less" "^error: $work/sparse_mix.bin: file is 21474836480 bytes" \
        "${small_memory[@]}" "${scorer[@]}" --perplexity "$work/sparse_mix.bin"
    expect_error "data_tool tasks --haystack, a 20 GB shard whose header declares less" "^error: $work/sparse_mix.bin: file is 21474836480 bytes" \
        "${small_memory[@]}" timeout 20 ./build/data_tool tasks --data "$corpus" --task passkey --lengths 700 --depths 0.5 \
        --haystack "$work/sparse_mix.bin" --out "$work/sparse_tasks.jsonl"
    [ ! -e "$work/sparse_tasks.jsonl" ] && pass "the refused --haystack wrote no task file" || fail "a refused --haystack wrote $work/sparse_tasks.jsonl"
    accepted "the same memory bound, data_tool tasks over a sound shard (the control)" "${small_memory[@]}" timeout 20 ./build/data_tool tasks \
        --data "$corpus" --task passkey --lengths 700 --depths 0.5 --haystack "$corpus/val.bin" --out "$work/sound_tasks.jsonl"
    accepted "the same memory bound, infer --perplexity of a sound shard (the control)" "${small_memory[@]}" "${scorer[@]}" \
        --perplexity "$corpus/val.bin"
    accepted "the same memory bound, a sound --mix shard (the control)" "${small_memory[@]}" "${train_tiny[@]}" --steps 2 --mix "$work/mix.bin:0.25" \
        --out "$work/sparse_ok"
else
    fail "truncate -s 20G failed: cannot test the header-first shard reads"
fi
rm -f "$work/sparse/train.bin" "$work/sparse_mix.bin" "$work/zeros.bin"

# 2. Sizes refused from the file's size, before reading: sparse files take no disk.
if truncate -s 2G "$work/huge.txt" 2>/dev/null; then
    expect_error "--prompt-file of 2 GiB" "^error: --prompt-file $work/huge.txt holds 2147483648 bytes, more than" \
        "${infer[@]}" --prompt-file "$work/huge.txt"
    expect_error "--prompts-file of 2 GiB" "^error: --prompts-file $work/huge.txt holds 2147483648 bytes, more than" \
        "${infer[@]}" --prompts-file "$work/huge.txt"
else
    fail "truncate -s 2G failed: cannot test the size bounds"
fi
# The tiny model's largest cache (2 layers x 2^28 positions x 128 floats) is above read_file's
# 64 GiB bound, so a 65 GiB (sparse) cache file is refused from its size.
if truncate -s 65G "$work/huge.kv" 2>/dev/null; then
    expect_error "--load-cache of 65 GiB" "^error: --load-cache $work/huge.kv holds" "${infer[@]}" --load-cache "$work/huge.kv" --prompt " x"
else
    fail "truncate -s 65G failed: cannot test the cache bound"
fi

# 3. Regular files still read as before.
out=$("${infer[@]}" --prompt-file "$work/prompt.txt" --temperature 0 2>&1); code=$?
[ $code -eq 0 ] && pass "a regular --prompt-file is read" || fail "a regular --prompt-file: exit $code: $out"

# 4. A long --prompts-file line is cut to the context like --prompt-file, and costs linearly: a
# 40 KB line runs in a few seconds (before: a decode step per token against an ever longer cache,
# quadratic: over 30 s on one thread). One OpenMP thread, so that a loaded 2-core CI machine's
# spinning threads do not decide the time.
awk 'BEGIN { srand(1); split("the and of lord said unto god he them they", w, " ");
             s = ""; while (length(s) < 40000) s = s w[int(rand() * 10) + 1] " "; print substr(s, 1, 40000) }' > "$work/long.txt"
printf 'And God said\n' >> "$work/long.txt"
start=$(date +%s%N)
out=$(OMP_NUM_THREADS=1 timeout 60 ./build/infer --checkpoint "$work/ck" --device cpu --max-new 4 --temperature 0 \
      --prompts-file "$work/long.txt" 2> "$work/long.err"); code=$?
secs=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
if [ $code -eq 0 ] && awk -v s="$secs" 'BEGIN { exit !(s < 10) }'; then pass "a 40 KB --prompts-file line runs in $secs s (< 10)"
else fail "a 40 KB --prompts-file line: exit $code after $secs s: $(tail -1 "$work/long.err")"; fi
grep -q "note: 1 of the --prompts-file prompts are cut to their last 27 tokens" "$work/long.err" \
    && pass "the long line (and only it) is cut to --ctx 32 - --max-new 4 - 1 tokens" \
    || fail "no note of the cut: $(grep note "$work/long.err")"
[ "$(grep -c '^=== ' <<< "$out")" = 2 ] && pass "both prompts are continued" || fail "not 2 continuations: $(head -c 300 <<< "$out")"
# The short prompt's continuation is the same as when it runs alone.
alone=$(OMP_NUM_THREADS=1 timeout 20 ./build/infer --checkpoint "$work/ck" --device cpu --max-new 4 --temperature 0 \
        --prompts-file "$work/prompt.txt" 2>/dev/null | tail -1)
[ -n "$alone" ] && [ "$(tail -1 <<< "$out")" = "$alone" ] && pass "the short prompt beside the long one is continued as alone" \
    || fail "the short prompt differs beside the long one: '$(tail -1 <<< "$out")' vs '$alone'"

# 5. A long --prompt-file is read from its end (not tokenized whole to keep its last tokens): a 50 MB file runs in a few seconds, and continues as its last 8 KB alone do
# (the tiny model keeps 32 - 4 tokens; 64 bytes a token for 32 + 64 tokens are read).
for i in $(seq 1250); do cat "$work/long.txt"; done | head -c 50000000 > "$work/big.txt"
printf 'And God said' >> "$work/big.txt"
tail -c 8000 "$work/big.txt" > "$work/big_tail.txt"
start=$(date +%s%N)
big=$(OMP_NUM_THREADS=1 timeout 60 ./build/infer --checkpoint "$work/ck" --device cpu --max-new 4 --temperature 0 \
      --prompt-file "$work/big.txt" 2> "$work/big.err"); code=$?
secs=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
if [ $code -eq 0 ] && awk -v s="$secs" 'BEGIN { exit !(s < 10) }'; then pass "a 50 MB --prompt-file runs in $secs s (< 10)"
else fail "a 50 MB --prompt-file: exit $code after $secs s: $(tail -1 "$work/big.err")"; fi
grep -q "note: --prompt-file $work/big.txt: read its last 6144 of 50000012 bytes" "$work/big.err" \
    && pass "only its last 64 x (32 + 64) bytes are read" || fail "no note of the tail read: $(grep note "$work/big.err")"
small=$(OMP_NUM_THREADS=1 timeout 20 ./build/infer --checkpoint "$work/ck" --device cpu --max-new 4 --temperature 0 \
        --prompt-file "$work/big_tail.txt" 2>/dev/null)
[ -n "$big" ] && [ "$big" = "$small" ] && pass "the 50 MB file continues as its last 8 KB do: '$big'" \
    || fail "the 50 MB file continues as '$big', its last 8 KB as '$small'"
rm -f "$work/big.txt"

summary
