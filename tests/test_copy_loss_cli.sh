#!/usr/bin/env bash
# End-to-end tests of infer --copy-loss (eval/copy_loss.h) on the CPU with a tiny checkpoint
# trained on the small test corpus (made by tests/test_data_cli.sh): the table and the two CSVs,
# the same files for the same seed (a re-run overwrites its own CSVs), other passages for another
# seed, a window shorter than the sequences said in a note, text files and directories as the
# haystack, and bad inputs (one line, non-zero exit, nothing written).
# Usage: tests/test_copy_loss_cli.sh [CORPUS_DIR]   Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
corpus=${1:-build/test_corpus}
work=build/test_copy_loss_cli
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
stderr_filter() { tr '\r' '\n' | grep -v '^scored' | grep .; }  # expect_error: no progress lines
need_programs build/train build/infer
need_corpus "$corpus" val.bin

model=$work/model
build/train --data "$corpus" --layers 2 --width 64 --heads 1 --seq-len 64 --batch 4 --steps 30 --warmup 4 --lr 3e-3 \
    --val-every 0 --ckpt-every 0 --sample-tokens 0 --device cpu --out "$model" > "$work/train.log" 2>&1 \
    || bail "training the tiny model: $(tail -1 "$work/train.log")"
C=(build/infer --checkpoint "$model" --device cpu)

# 1. The table and the CSVs: a row per gap, a row per passage, the gap's row the mean of its passages'.
run=(--copy-loss "$corpus/val.bin" --gaps 64,256,1K --copy-passage 16 --copy-samples 2 --ctx 2048)
if "${C[@]}" "${run[@]}" --copy-out "$work/a" > "$work/a.log" 2> "$work/a.err"; then
    grep -q "^copy loss by gap" "$work/a.log" && [ "$(grep -cE '^ +(64|256|1K) +2 +16 ' "$work/a.log")" -eq 3 ] \
        && pass "the table: a row per gap (64, 256, 1K), 2 passages of 16 tokens each" || fail "the table: $(cat "$work/a.log")"
    python3 - "$work/a.csv" "$work/a_items.csv" <<'EOF' && pass "a.csv: a row per gap, the mean of its passages in a_items.csv; finite positive losses" || fail "the CSVs: $(cat "$work/a.csv" "$work/a_items.csv" | tr '\n' ' ')"
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
items = list(csv.DictReader(open(sys.argv[2])))
assert open(sys.argv[1]).readline() == "gap,samples,passage,first_loss,repeat_loss,repeat_loss_second_half\n"
assert open(sys.argv[2]).readline() == "gap,sample,start,first_loss,repeat_loss\n"
assert [r['gap'] for r in rows] == ['64', '256', '1024'] and all(r['samples'] == '2' and r['passage'] == '16' for r in rows)
assert [(i['gap'], i['sample']) for i in items] == [(g, s) for g in ('64', '256', '1024') for s in ('0', '1')]
for r in rows:
    mine = [i for i in items if i['gap'] == r['gap']]
    for k in ('first_loss', 'repeat_loss'):
        assert abs(float(r[k]) - sum(float(i[k]) for i in mine) / 2) < 1e-5, (r, k)
    assert all(0 < float(r[k]) < 50 for k in ('first_loss', 'repeat_loss', 'repeat_loss_second_half'))
assert all(len({i['start'] for i in items if i['gap'] == g}) == 2 for g in ('64', '256', '1024'))
EOF
    grep -qxF "wrote $work/a.csv, $work/a_items.csv, $work/a_tokens.csv, $work/a_positions.csv" "$work/a.log" && [ ! -e "$work/a.longnet-lock" ] \
        && pass "--copy-out: the four files named; the lock PREFIX.longnet-lock gone after the run" || fail "--copy-out: $(tail -1 "$work/a.log"); $(ls "$work")"
    # The positions file: tokens 1..P-1 of each passage in order, their ids as the tokens file has
    # them (sequence index 1 + j), and losses whose means over a passage are the items file's.
    python3 - "$work/a_positions.csv" "$work/a_items.csv" "$work/a_tokens.csv" <<'EOF' && pass "a_positions.csv: tokens 1..P-1 of each passage, their ids, losses whose means are a_items.csv's" || fail "a_positions.csv: $(head -c 300 "$work/a_positions.csv")"
import csv, sys
pos = list(csv.DictReader(open(sys.argv[1])))
items = list(csv.DictReader(open(sys.argv[2])))
seqs = list(csv.DictReader(open(sys.argv[3])))
assert open(sys.argv[1]).readline() == "gap,sample,position,token,first_loss,repeat_loss\n"
assert len(pos) == 15 * len(items) == 90
for i, t in zip(items, seqs):
    mine = [p for p in pos if (p['gap'], p['sample']) == (i['gap'], i['sample'])]
    ids = [int(x) for x in t['tokens'].split()]
    assert [int(p['position']) for p in mine] == list(range(1, 16)), i
    assert [int(p['token']) for p in mine] == ids[2:17], i
    for k in ('first_loss', 'repeat_loss'):
        assert abs(sum(float(p[k]) for p in mine) / 15 - float(i[k])) < 1e-5, (i, k)
EOF
    # The tokens file: each sequence as the items file places it, read back from val.bin by hand
    # (its documents in order, BOS dropped and each ended by a newline, the byte piece <0x0A> = id 13,
    # as the haystack reads them): BOS, the passage and the gap's text, the passage again.
    python3 - "$work/a_tokens.csv" "$work/a_items.csv" "$corpus/val.bin" <<'EOF' && pass "a_tokens.csv: every sequence is BOS, H[s, s+P+G), H[s, s+P] of the items' starts" || fail "a_tokens.csv: $(head -c 300 "$work/a_tokens.csv")"
import csv, struct, sys
rows = list(csv.DictReader(open(sys.argv[1])))
items = list(csv.DictReader(open(sys.argv[2])))
assert open(sys.argv[1]).readline() == "gap,sample,first_at,repeat_at,passage,tokens\n"
raw = open(sys.argv[3], 'rb').read()
tb, n_tok, n_docs = struct.unpack_from('<IQQ', raw, 12)
starts = list(struct.unpack_from('<%dQ' % n_docs, raw, 64)) + [n_tok]
tok = list(struct.unpack_from('<%d%s' % (n_tok, 'H' if tb == 2 else 'I'), raw, 64 + 8 * n_docs))
hay = []
for d in range(n_docs):
    doc = [t for t in tok[starts[d]:starts[d + 1]] if t != 1]
    hay += doc + ([13] if doc and doc[-1] != 13 else [])
assert len(rows) == len(items) == 6
for r, i in zip(rows, items):
    G, P, s = int(r['gap']), int(r['passage']), int(i['start'])
    ids = [int(x) for x in r['tokens'].split()]
    assert (r['gap'], r['sample']) == (i['gap'], i['sample'])
    assert int(r['first_at']) == 1 and int(r['repeat_at']) == 1 + P + G and len(ids) == 1 + 2 * P + G, r['gap']
    assert ids[0] == 1 and ids[1:1 + P + G] == hay[s:s + P + G] and ids[1 + P + G:] == hay[s:s + P], (G, s)
EOF
    ! grep -q "^note: gaps" "$work/a.err" && pass "--ctx 2048 holds every sequence: no note of windows" || fail "a note with --ctx 2048: $(grep note "$work/a.err")"
else
    fail "infer --copy-loss failed: $(tail -2 "$work/a.err")"
fi
# The same seed: the same files, written over the run's own CSVs; another seed: other passages.
if cp "$work/a.csv" "$work/first.csv" && cp "$work/a_items.csv" "$work/first_items.csv" && cp "$work/a_tokens.csv" "$work/first_tokens.csv" \
   && cp "$work/a_positions.csv" "$work/first_positions.csv" && "${C[@]}" "${run[@]}" --copy-out "$work/a" > "$work/a3.log" 2>&1 \
   && cmp -s "$work/a.csv" "$work/first.csv" && cmp -s "$work/a_items.csv" "$work/first_items.csv" && cmp -s "$work/a_tokens.csv" "$work/first_tokens.csv" \
   && cmp -s "$work/a_positions.csv" "$work/first_positions.csv"; then
    pass "the same seed writes the same CSVs, over the earlier run's"
else
    fail "a re-run with the same seed: $(tail -1 "$work/a3.log") $(diff "$work/a_items.csv" "$work/first_items.csv" | head -2 | tr '\n' ' ')"
fi
if "${C[@]}" "${run[@]}" --seed 2 --copy-out "$work/b" > "$work/b.log" 2>&1; then
    starts() { cut -d, -f1-3 "$1"; }
    [ "$(starts "$work/b_items.csv")" != "$(starts "$work/first_items.csv")" ] && pass "--seed 2 places other passages" \
        || fail "--seed 2 placed the same passages"
else
    fail "--seed 2: $(tail -1 "$work/b.log")"
fi
# 2. A window shorter than the sequences (the model's own --seq-len, 64): scored in windows, said in a note.
if "${C[@]}" --copy-loss "$corpus/val.bin" --gaps 256,1K --copy-passage 16 --copy-samples 1 > "$work/w.log" 2> "$work/w.err"; then
    grep -q "^note: gaps 256,1K: their sequences are longer than --ctx 64 .* (--ctx 1056 reads them whole)" "$work/w.err" \
        && [ "$(grep -cE '^ +(256|1K) +1 +16 ' "$work/w.log")" -eq 2 ] \
        && pass "--ctx 64 (the model's window): windows of 64, the note names the gaps and the --ctx that reads them whole" \
        || fail "the windowed run: $(grep note "$work/w.err") $(cat "$work/w.log")"
else
    fail "the windowed run failed: $(tail -1 "$work/w.err")"
fi
# 3. A text file and a directory of them as the haystack.
head -c 30000 "$corpus/bible.txt" > "$work/hay.txt"
mkdir -p "$work/hay_dir" && head -c 15000 "$corpus/bible.txt" > "$work/hay_dir/one.txt" && tail -c 15000 "$corpus/bible.txt" > "$work/hay_dir/two.txt"
for hay in "$work/hay.txt" "$work/hay_dir"; do
    if "${C[@]}" --copy-loss "$hay" --gaps 256 --copy-passage 16 --copy-samples 3 --ctx 2048 > "$work/h.log" 2>&1; then
        grep -qE '^ +256 +3 +16 ' "$work/h.log" && pass "a haystack of $( [ -d "$hay" ] && echo "a directory" || echo "a text file")" \
            || fail "haystack $hay: $(cat "$work/h.log")"
    else
        fail "haystack $hay: $(tail -1 "$work/h.log")"
    fi
done

# 3b. --copy-attn: the table of where the heads look, PREFIX_attn.csv a row per sequence, layer and head.
if "${C[@]}" "${run[@]}" --copy-attn --copy-out "$work/at" > "$work/at.log" 2> "$work/at.err"; then
    grep -q "^attention on the first occurrence while reading the repeat" "$work/at.log" \
        && [ "$(grep -cE '^ +(64|256|1K) +h[0-9] +[0-9.]+ / +[0-9.]+ +h[0-9] +[0-9.]+ / +[0-9.]+$' "$work/at.log")" -eq 3 ] \
        && pass "--copy-attn: a row per gap, the best head of each of the 2 layers with its weights" || fail "--copy-attn table: $(cat "$work/at.log")"
    python3 - "$work/at_attn.csv" <<'EOF' && pass "at_attn.csv: 3 gaps x 2 passages x 2 layers x 1 head, weights in [0, 1]" || fail "at_attn.csv: $(head -c 300 "$work/at_attn.csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 12, len(rows)
assert sorted({(r["gap"], r["sample"], r["layer"], r["head"]) for r in rows}) == sorted(
    (g, s, l, "0") for g in ("64", "256", "1024") for s in ("0", "1") for l in ("0", "1")), rows
assert all(0 <= float(r["next"]) <= 1 and 0 <= float(r["same"]) <= 1 for r in rows)
EOF
else
    fail "--copy-attn failed: $(tail -1 "$work/at.err")"
fi
expect_error "bad input: --copy-attn over windows" "--copy-attn reads each sequence in one window: give --ctx 1056 or more" \
    "${C[@]}" --copy-loss "$corpus/val.bin" --gaps 256,1K --copy-passage 16 --copy-samples 1 --copy-attn
expect_error "bad input: --copy-attn in chunks of 2" "--copy-attn reads chunks of 3 or more tokens (got --chunk 2): give --chunk 0 or at least 3" \
    "${C[@]}" "${run[@]}" --copy-attn --chunk 2
expect_error "bad input: --copy-attn without --copy-loss" "--copy-attn is for --copy-loss" "${C[@]}" --prompt hi --copy-attn

# 4. Bad inputs: one line, exit 1, nothing written.
bad=(--copy-loss "$corpus/val.bin" --copy-passage 16 --copy-out "$work/bad")
expect_error "bad input: --gaps with a stray comma" "--gaps '256,,1K': an empty item" "${C[@]}" "${bad[@]}" --gaps 256,,1K
expect_error "bad input: --gaps ending in a comma" "stray comma" "${C[@]}" "${bad[@]}" --gaps 256,
expect_error "bad input: --gaps 0" "--gaps '0' must be an integer" "${C[@]}" "${bad[@]}" --gaps 0
expect_error "bad input: --copy-passage 0" "--copy-passage must be at least 2 (got 0)" "${C[@]}" --copy-loss "$corpus/val.bin" --gaps 256 --copy-passage 0
expect_error "bad input: --copy-samples 0" "--copy-samples must be in" "${C[@]}" "${bad[@]}" --gaps 256 --copy-samples 0
expect_error "bad input: a haystack smaller than passage + gap" "--copy-loss $corpus/val.bin holds [0-9]* tokens, fewer than the 8208 a passage of 16 and a gap of 8K need: give a larger haystack" \
    "${C[@]}" "${bad[@]}" --gaps 256,8K
expect_error "bad input: --copy-loss with --tasks" "--copy-loss scores a haystack alone" "${C[@]}" "${bad[@]}" --gaps 256 --tasks "$work/t.jsonl"
expect_error "bad input: --copy-loss with --perplexity" "--copy-loss scores a haystack alone" "${C[@]}" "${bad[@]}" --gaps 256 --perplexity "$corpus/val.bin"
expect_error "bad input: --copy-loss of a missing file" "--copy-loss $work/none.bin: cannot open it" "${C[@]}" --copy-loss "$work/none.bin" --gaps 256
expect_error "bad input: --copy-loss filler" "--copy-loss filler: the filler repeats one line" "${C[@]}" --copy-loss filler --gaps 256
expect_error "bad input: --copy-loss without --gaps" "--copy-loss needs --gaps" "${C[@]}" --copy-loss "$corpus/val.bin"
expect_error "bad input: --gaps without --copy-loss" "--gaps is for --copy-loss" "${C[@]}" --prompt hi --gaps 256
expect_error "bad input: --copy-loss with --temperature" "--temperature is for generation, not --copy-loss" "${C[@]}" "${bad[@]}" --gaps 256 --temperature 0
expect_error "bad input: --copy-loss with --truncate" "--truncate are for --tasks" "${C[@]}" "${bad[@]}" --gaps 256 --truncate
expect_error "bad input: --copy-loss with --windows" "--windows is for --perplexity" "${C[@]}" "${bad[@]}" --gaps 256 --windows sliding
printf 'my tokens\n' > "$work/mine_tokens.csv"
expect_error "bad input: --copy-out over a file of another kind (PREFIX_tokens.csv)" "--copy-out $work/mine_tokens.csv is an existing file that is not an infer --copy-out CSV" \
    "${C[@]}" --copy-loss "$corpus/val.bin" --gaps 256 --copy-out "$work/mine"
[ "$(cat "$work/mine_tokens.csv")" = "my tokens" ] && [ ! -e "$work/mine.csv" ] && pass "a refused PREFIX_tokens.csv is left as it was, nothing written" ||
    fail "mine_tokens.csv: $(ls "$work" | tr '\n' ' ')"
printf 'my positions\n' > "$work/mine2_positions.csv"
expect_error "bad input: --copy-out over a file of another kind (PREFIX_positions.csv)" "--copy-out $work/mine2_positions.csv is an existing file that is not an infer --copy-out CSV" \
    "${C[@]}" --copy-loss "$corpus/val.bin" --gaps 256 --copy-out "$work/mine2"
[ "$(cat "$work/mine2_positions.csv")" = "my positions" ] && [ ! -e "$work/mine2.csv" ] && pass "a refused PREFIX_positions.csv is left as it was, nothing written" ||
    fail "mine2_positions.csv: $(ls "$work" | tr '\n' ' ')"
printf 'my notes\n' > "$work/notes_items.csv"
expect_error "bad input: --copy-out over a file of another kind" "--copy-out $work/notes_items.csv is an existing file that is not an infer --copy-out CSV" \
    "${C[@]}" --copy-loss "$corpus/val.bin" --gaps 256 --copy-out "$work/notes"
mkdir -p "$work/run"
expect_error "bad input: --copy-out naming a folder (run/)" "--copy-out $work/run/ names a folder; give a file name" \
    "${C[@]}" --copy-loss "$corpus/val.bin" --gaps 256 --copy-out "$work/run/"
expect_error "bad input: --copy-out naming an existing folder (run)" "--copy-out $work/run names a folder; give a file name" \
    "${C[@]}" --copy-loss "$corpus/val.bin" --gaps 256 --copy-out "$work/run"
[ -z "$(ls -A "$work/run")" ] && [ ! -e "$work/run.csv" ] && [ ! -e "$work/run.longnet-lock" ] && pass "a folder named as --copy-out is left empty, nothing beside it" ||
    fail "--copy-out folder: $(ls -A "$work/run" "$work" | tr '\n' ' ')"
[ ! -e "$work/bad.csv" ] && [ ! -e "$work/bad_items.csv" ] && [ ! -e "$work/notes.csv" ] && [ "$(cat "$work/notes_items.csv")" = "my notes" ] \
    && pass "refused runs write nothing and leave the other file as it was" || fail "a refused run wrote: $(ls "$work")"

summary
