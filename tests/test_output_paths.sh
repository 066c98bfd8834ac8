#!/usr/bin/env bash
# Outputs never replace inputs (core/output_path.h): every output flag of infer,
# attention_tool, train and data_tool pointed at a file of another kind (a checkpoint, a KV cache,
# a corpus shard, a tokenizer, a run's metrics.csv, a text the user feeds in, a directory) or at an
# unwritable place fails at once with one line "error: ..." naming the flag, and the file on disk
# keeps its bytes (md5 before and after); a file of the same kind (an older output) is still
# overwritten.
# Usage: tests/test_output_paths.sh [CORPUS_DIR]   Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
corpus=${1:-build/test_corpus}
work=build/test_output_paths
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
for bin in build/train build/infer build/attention_tool build/data_tool; do
    [ -x $bin ] || bail "$bin not built"
done
[ -f "$corpus/train.bin" ] || bail "no corpus at $corpus (run tests/test_data_cli.sh first)"

# Inputs to aim at: a tiny run (checkpoint, metrics.csv), a KV cache, a copy of the corpus (so a
# failing test cannot destroy the shared one), a text, a task file.
mkdir -p "$work/corpus" && cp "$corpus"/{train.bin,val.bin,tokenizer.model} "$work/corpus/"
if ! ./build/train --device cpu --data "$corpus" --layers 2 --width 64 --heads 1 --seq-len 32 --batch 4 --steps 5 --warmup 1 \
       --val-every 0 --val-batches 1 --sample-tokens 0 --out "$work/run" > "$work/train.log" 2>&1; then
    bail "tiny training run: $(tail -2 "$work/train.log")"
fi
ckpt=$(ls "$work"/run/ckpt_*.safetensors | tail -1)
metrics="$work/run/metrics.csv"
infer=(./build/infer --device cpu --checkpoint "$work/run")
"${infer[@]}" --prompt "And it came to pass" --max-new 2 --save-cache "$work/old.kv" > "$work/cache.log" 2>&1 \
    || bail "making a KV cache: $(tail -2 "$work/cache.log")"
printf 'In the beginning God created the heaven and the earth. And the earth was without form, and void.\n' > "$work/ppl.txt"
./build/data_tool tasks --data "$corpus" --task passkey --lengths 200 --depths 0,1 --out "$work/old.jsonl" > "$work/tasks.log" 2>&1 \
    || bail "making a task file: $(tail -2 "$work/tasks.log")"

# refused NAME PATTERN TARGET COMMAND...: exit non-zero, one line "error: " with PATTERN, TARGET's
# bytes unchanged (a directory: its listing and files' checksums), within 2 seconds.
sum_of() { if [ -d "$1" ]; then (cd "$1" && find . -type f -exec md5sum {} + | sort); elif [ -e "$1" ]; then md5sum < "$1"; else echo absent; fi; }
refused() {
    local name=$1 pattern=$2 target=$3; shift 3
    local before after err code lines t0 ms
    before=$(sum_of "$target")
    t0=$(date +%s%N)
    err=$("$@" 2>&1 >/dev/null); code=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    after=$(sum_of "$target")
    lines=$(printf '%s\n' "$err" | grep -c .)
    if [ $code -eq 0 ] || [ "$lines" -ne 1 ] || [[ "$err" != error:* ]] || ! grep -q -- "$pattern" <<< "$err"; then
        fail "$name (exit $code, $lines lines): $err"
    elif [ "$before" != "$after" ]; then
        fail "$name: $target changed"
    elif [ "$ms" -gt 2000 ]; then
        fail "$name: took $ms ms, not at once"
    else
        pass "$name ($ms ms) -> $err"
    fi
}

# 1. infer --save-cache and --per-position over inputs.
refused "infer --save-cache over a checkpoint" "--save-cache $ckpt is a checkpoint" "$ckpt" \
    "${infer[@]}" --prompt "And" --max-new 1 --save-cache "$ckpt"
refused "infer --save-cache over a run's metrics.csv" "--save-cache $metrics is a run's metrics.csv" "$metrics" \
    "${infer[@]}" --prompt "And" --max-new 1 --save-cache "$metrics"
refused "infer --save-cache over a corpus shard" "is a corpus shard" "$work/corpus/train.bin" \
    "${infer[@]}" --prompt "And" --max-new 1 --save-cache "$work/corpus/train.bin"
refused "infer --save-cache over a tokenizer model" "is a tokenizer model" "$work/corpus/tokenizer.model" \
    "${infer[@]}" --prompt "And" --max-new 1 --save-cache "$work/corpus/tokenizer.model"
refused "infer --save-cache over a directory" "--save-cache $work/corpus is a directory" "$work/corpus" \
    "${infer[@]}" --prompt "And" --max-new 1 --save-cache "$work/corpus"
refused "infer --save-cache over the prompt file" "is an existing file that is not a KV cache" "$work/ppl.txt" \
    "${infer[@]}" --prompt-file "$work/ppl.txt" --max-new 1 --save-cache "$work/ppl.txt"
refused "infer --per-position over a checkpoint" "--per-position $ckpt is a checkpoint" "$ckpt" \
    "${infer[@]}" --perplexity "$work/ppl.txt" --per-position "$ckpt"
refused "infer --per-position over a run's metrics.csv" "--per-position $metrics is a run's metrics.csv" "$metrics" \
    "${infer[@]}" --perplexity "$work/ppl.txt" --per-position "$metrics"
refused "infer --per-position over its --perplexity text" "is an existing file that is not an infer --per-position CSV" "$work/ppl.txt" \
    "${infer[@]}" --perplexity "$work/ppl.txt" --per-position "$work/ppl.txt"
refused "infer --per-position over a KV cache" "is a KV cache" "$work/old.kv" \
    "${infer[@]}" --perplexity "$work/ppl.txt" --per-position "$work/old.kv"

# 2. Unwritable places fail before the model is loaded or a token scored.
refused "infer --save-cache in a missing directory" "does not exist" "$work/run" \
    "${infer[@]}" --prompt "And" --max-new 1 --save-cache "$work/missing/x.kv"
refused "infer --per-position under a file" "is not a directory" "$metrics" \
    "${infer[@]}" --perplexity "$work/ppl.txt" --per-position "$metrics/x.csv"

# 3. infer --tasks-out: each of its two files (the heatmap is scripts/plot_heatmap.sh's).
cp "$metrics" "$work/rep.csv"
refused "infer --tasks-out over a metrics.csv (PREFIX.csv)" "--tasks-out $work/rep.csv is a run's metrics.csv" "$work/rep.csv" \
    "${infer[@]}" --tasks "$work/old.jsonl" --tasks-out "$work/rep"
cp "$ckpt" "$work/rep2_items.csv"
refused "infer --tasks-out over a checkpoint (PREFIX_items.csv)" "is a checkpoint" "$work/rep2_items.csv" \
    "${infer[@]}" --tasks "$work/old.jsonl" --tasks-out "$work/rep2"

# 4. attention_tool --out.
tool=(./build/attention_tool --device cpu --N 16 --H 1 --D 64 --dtype fp32)
refused "attention_tool --out over a checkpoint" "--out $ckpt is a checkpoint" "$ckpt" "${tool[@]}" --out "$ckpt"
refused "attention_tool --out over a KV cache" "--out $work/old.kv is a KV cache" "$work/old.kv" "${tool[@]}" --out "$work/old.kv"
refused "attention_tool --out over a corpus shard" "is a corpus shard" "$work/corpus/val.bin" "${tool[@]}" --out "$work/corpus/val.bin"

# 5. train --out: a run directory, never a file or a corpus.
tiny=(./build/train --device cpu --data "$corpus" --layers 2 --width 64 --heads 1 --seq-len 32 --batch 4 --steps 5 --warmup 1
      --val-every 0 --val-batches 1 --sample-tokens 0)
refused "train --out a checkpoint file" "--out $ckpt is a checkpoint" "$ckpt" "${tiny[@]}" --out "$ckpt"
refused "train --out a prepared corpus" "--out $work/corpus is a prepared corpus" "$work/corpus" "${tiny[@]}" --out "$work/corpus"
refused "train --out under a file" "is a file, not a directory" "$metrics" "${tiny[@]}" --out "$metrics/sub/run"

# 6. data_tool outputs.
refused "data_tool tasks --out over a checkpoint" "--out $ckpt is a checkpoint" "$ckpt" \
    ./build/data_tool tasks --data "$corpus" --task passkey --lengths 200 --out "$ckpt"
refused "data_tool task-shard --out over a corpus's train.bin" "--out $work/corpus/train.bin is a corpus shard" "$work/corpus/train.bin" \
    ./build/data_tool task-shard --data "$work/corpus" --doc-tokens 256 --tokens 512 --out "$work/corpus/train.bin"
# A task shard written into a corpus's folder is the writer's own: a second run replaces it.
./build/data_tool task-shard --data "$work/corpus" --doc-tokens 256 --tokens 512 --out "$work/corpus/tasks.bin" > "$work/ts1.log" 2>&1 &&
    ./build/data_tool task-shard --data "$work/corpus" --doc-tokens 256 --tokens 512 --seed 2 --out "$work/corpus/tasks.bin" > "$work/ts2.log" 2>&1 &&
    pass "data_tool task-shard --out into a corpus's folder, twice: the second replaces the first" ||
    fail "task-shard into a corpus folder twice: $(tail -1 "$work/ts2.log")"
rm -f "$work/corpus/tasks.bin"
# A copy of a corpus split elsewhere (no tokenizer.model beside it, another name) is a token shard
# by its bytes: task-shard overwrites only its own (documents all of one length), never a copy of
# --data's train.bin or val.bin, nor a split of another corpus.
mkdir -p "$work/texts" && head -c 30000 "$corpus/bible.txt" > "$work/texts/first.txt" && tail -c 50000 "$corpus/bible.txt" > "$work/texts/second.txt"
./build/data_tool prepare --text "$work/texts" --out "$work/other" --vocab 512 > "$work/other.log" 2>&1 || bail "prepare: $(tail -1 "$work/other.log")"
cp "$corpus/train.bin" "$work/backup.bin" && cp "$work/other/train.bin" "$work/other_copy.bin"
refused "data_tool task-shard --out over a copy of --data's train.bin" "--out $work/backup.bin holds the same tokens as $work/corpus/train.bin" \
    "$work/backup.bin" ./build/data_tool task-shard --data "$work/corpus" --doc-tokens 256 --tokens 512 --out "$work/backup.bin"
refused "data_tool task-shard --out over a copy of another corpus's train.bin" "--out $work/other_copy.bin is a token shard whose documents are not all one length" \
    "$work/other_copy.bin" ./build/data_tool task-shard --data "$work/corpus" --doc-tokens 256 --tokens 512 --out "$work/other_copy.bin"

# 7. A file of the same kind is still overwritten.
overwritten() {  # name, target, command...: exit 0 and TARGET's bytes changed
    local name=$1 target=$2; shift 2
    local before; before=$(sum_of "$target")
    if "$@" > "$work/ow.log" 2>&1 && [ "$(sum_of "$target")" != "$before" ]; then pass "$name"
    else fail "$name: $(tail -2 "$work/ow.log" | tr '\n' ' ')"; fi
}
overwritten "infer --save-cache over an older KV cache" "$work/old.kv" \
    "${infer[@]}" --prompt "In the beginning God created the heaven" --max-new 1 --save-cache "$work/old.kv"
printf 'bucket_start,bucket_end,tokens,mean_loss\n0,1,1,1.000000\n' > "$work/pos.csv"
overwritten "infer --per-position over an older per-position CSV" "$work/pos.csv" \
    "${infer[@]}" --perplexity "$work/ppl.txt" --per-position "$work/pos.csv"
"${tool[@]}" --seed 1 --out "$work/dump.safetensors" > /dev/null 2>&1
overwritten "attention_tool --out over an older dump" "$work/dump.safetensors" "${tool[@]}" --seed 2 --out "$work/dump.safetensors"
./build/data_tool task-shard --data "$corpus" --doc-tokens 256 --tokens 1024 --out "$work/old_shard.bin" > /dev/null 2>&1
overwritten "data_tool task-shard --out over an older task shard" "$work/old_shard.bin" \
    ./build/data_tool task-shard --data "$corpus" --doc-tokens 512 --tokens 1024 --seed 3 --out "$work/old_shard.bin"
overwritten "data_tool tasks --out over an older task file" "$work/old.jsonl" \
    ./build/data_tool tasks --data "$corpus" --task passkey --lengths 200 --depths 0.5 --seed 7 --out "$work/old.jsonl"
touch "$work/empty.kv"
overwritten "infer --save-cache over an empty file" "$work/empty.kv" \
    "${infer[@]}" --prompt "And" --max-new 1 --save-cache "$work/empty.kv"
mkdir -p "$work/fresh"
overwritten "train --out an existing empty directory" "$work/fresh" "${tiny[@]}" --out "$work/fresh"
mkdir -p "$work/stale" && printf 'step,split,loss,lr,grad_norm,tokens_per_s,elapsed_s\n1,train,9,0.001,1,1,1\n' > "$work/stale/metrics.csv"
overwritten "train --out a directory with an older run's metrics.csv" "$work/stale/metrics.csv" "${tiny[@]}" --out "$work/stale"
printf 'not metrics\n' > "$work/notes.csv" && mkdir -p "$work/odd" && cp "$work/notes.csv" "$work/odd/metrics.csv"
refused "train --out a directory whose metrics.csv is no run's" "its metrics.csv is an existing file" "$work/odd/metrics.csv" "${tiny[@]}" --out "$work/odd"

summary
