#!/usr/bin/env bash
# scripts/reading_study.sh pairs (one device call on a host of several GPUs) with a stand-in for
# the study's own calls (READING_STUDY), which records how it was called: `train` makes the data of
# both runs once, first, then trains A@S and B@S on GPU g for the g-th seed, side by side, each to
# the call's TRAIN_UNTIL less what the data took; `score` finishes a run the call before cut, then
# scores it, on the same GPUs; `long` and `score1m` the same for the 1M stages; a call that fails
# makes pairs fail; bad usage is refused; `seeds`, four runs of one recipe two a GPU, and the 1M
# stages of each GPU's first seed. Then one call's `train`, `score`, `long` and `score1m` on
# one GPU with stand-ins for the study and infer: the shards each recipe gets, what score runs, the
# 1M stages named from the 128K runs and scored at 512K-1M, and a failed run failing the call.
# Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/lib.sh
source tests/lib.sh
work=build/test_reading_pairs
rm -rf "$work" && mkdir -p "$work"
stub=$work/stub.sh
cat > "$stub" <<'STUB'
#!/usr/bin/env bash
echo "${CUDA_VISIBLE_DEVICES:--}|${TRAIN_UNTIL:--}|$*" >> "$CALLS"
[ "$1" = data ] && echo "${SHARD_TOKENS:--}" >> "$CALLS.shard"
[ "$1" = score ] && echo "${FINISH_UNTIL:--}" >> "$CALLS.finish"
[ "${FAIL_ON:-}" = "$*" ] && exit 3
sleep 0.2
echo "stub $*"
STUB
chmod +x "$stub"
export READING_STUDY=$stub CALLS=$PWD/$work/calls.txt

: > "$CALLS"
TRAIN_UNTIL=500 scripts/reading_study.sh pairs train hybrid128k-readsink hybrid128k-readconvpart 11 12 > "$work/train.log" 2>&1
rc=$?
first=$(head -n 1 "$CALLS")
[ $rc -eq 0 ] && [ "${first#*|*|}" = "data read read" ] && pass "pairs train: the data of both runs first, once (readsink trains on read's shards)" \
    || fail "pairs train: exit $rc, first call '$first'"
grep -qE '^0\|(500|499)\|train hybrid128k-readsink@11 hybrid128k-readconvpart@11$' "$CALLS" \
    && grep -qE '^1\|(500|499)\|train hybrid128k-readsink@12 hybrid128k-readconvpart@12$' "$CALLS" \
    && [ "$(wc -l < "$CALLS")" -eq 3 ] \
    && pass "pairs train: seed 11 on GPU 0, seed 12 on GPU 1, to the call's TRAIN_UNTIL" || fail "pairs train's calls: $(cat "$CALLS")"
grep -q '^== GPU 1, seed 12: stub train hybrid128k-readsink@12 hybrid128k-readconvpart@12$' "$work/train.log" \
    && pass "pairs train: each GPU's last line shown" || fail "pairs train's output: $(cat "$work/train.log")"
[ "$(cat "$CALLS.shard")" = 50M ] && pass "pairs train: the task shards at their default size (50M tokens)" \
    || fail "pairs train's shard size: $(cat "$CALLS.shard")"

# The recipes at more tokens get task shards as many times larger: recipe, its base, shard size, how much.
for spec in "readsink2x|readsink|100M|twice" "readsinkhd128x3|readsinkhd128|150M|three times" "readsinkhd128x3c16|readsinkhd128x3|150M|three times" \
            "readsinkhd128x3c16ptr|readsinkhd128x3c16|150M|three times" "readsinkhd128x3c16ls|readsinkhd128x3c16|150M|three times"; do
    IFS='|' read -r v base size times <<< "$spec"
    : > "$CALLS"; : > "$CALLS.shard"
    scripts/reading_study.sh pairs train "hybrid128k-$v" "hybrid128k-$base" 11 12 > "$work/train_$v.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] && [ "$(head -n 1 "$CALLS" | cut -d'|' -f3)" = "data read read" ] && [ "$(cat "$CALLS.shard")" = "$size" ] \
        && pass "pairs train: $v on read's shards, made $times as large ($size tokens)" \
        || fail "pairs train with $v: exit $rc, calls $(cat "$CALLS"), shard size $(cat "$CALLS.shard")"
done

: > "$CALLS"; : > "$CALLS.finish"
scripts/reading_study.sh pairs score hybrid128k-readsink hybrid128k-readconvpart 13 14 > "$work/score.log" 2>&1
rc=$?
g0=$(grep '^0|' "$CALLS" | cut -d'|' -f2-); g1=$(grep '^1|' "$CALLS" | cut -d'|' -f2-)
[ $rc -eq 0 ] && [ "$g0" = $'300|train hybrid128k-readsink@13 hybrid128k-readconvpart@13\n-|score hybrid128k-readsink@13 hybrid128k-readconvpart@13' ] \
    && [ "$g1" = $'300|train hybrid128k-readsink@14 hybrid128k-readconvpart@14\n-|score hybrid128k-readsink@14 hybrid128k-readconvpart@14' ] \
    && ! grep -q 'data' "$CALLS" && pass "pairs score: each GPU finishes its runs, then scores them; no data step" \
    || fail "pairs score: exit $rc, calls: $(cat "$CALLS")"
[ "$(cat "$CALLS.finish")" = $'0\n0' ] && pass "pairs score: its scores do not finish the runs again (FINISH_UNTIL=0)" \
    || fail "pairs score's FINISH_UNTIL: $(cat "$CALLS.finish")"

: > "$CALLS"
FAIL_ON="train hybrid128k-readsink@12 hybrid128k-readconvpart@12" \
    scripts/reading_study.sh pairs train hybrid128k-readsink hybrid128k-readconvpart 11 12 > "$work/fail.log" 2>&1
[ $? -ne 0 ] && pass "pairs: a GPU's failed call fails the call" || fail "pairs: a failed call went unnoticed"

: > "$CALLS"
TRAIN_UNTIL=500 scripts/reading_study.sh pairs long hybrid128k-readsink2x hybrid128k-readsink 11 12 > "$work/long.log" 2>&1
rc=$?
first=$(head -n 1 "$CALLS")
[ $rc -eq 0 ] && [ "${first#*|*|}" = "data read read" ] \
    && grep -qE '^0\|(500|499)\|long hybrid128k-readsink2x@11 hybrid128k-readsink@11$' "$CALLS" \
    && grep -qE '^1\|(500|499)\|long hybrid128k-readsink2x@12 hybrid128k-readsink@12$' "$CALLS" \
    && pass "pairs long: the data once, then each GPU's 1M stages of its seed's two runs" || fail "pairs long: exit $rc, calls: $(cat "$CALLS")"
: > "$CALLS"
scripts/reading_study.sh pairs score1m hybrid128k-readsink2x hybrid128k-readsink 11 12 > "$work/score1m.log" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(sort "$CALLS")" = $'0|-|score1m hybrid128k-readsink2x@11 hybrid128k-readsink@11\n1|-|score1m hybrid128k-readsink2x@12 hybrid128k-readsink@12' ] \
    && pass "pairs score1m: each GPU scores its seed's 1M stages; no data step" || fail "pairs score1m: exit $rc, calls: $(cat "$CALLS")"

# seeds: four runs of one recipe, two a GPU; the 1M stages of each GPU's first seed, alone.
: > "$CALLS"; : > "$CALLS.shard"
TRAIN_UNTIL=500 scripts/reading_study.sh seeds train hybrid128k-readsinkhd128x3 11 12 13 14 > "$work/seeds_train.log" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(head -n 1 "$CALLS" | cut -d'|' -f3)" = "data read read" ] && [ "$(cat "$CALLS.shard")" = 150M ] \
    && grep -qE '^0\|(500|499)\|train hybrid128k-readsinkhd128x3@11 hybrid128k-readsinkhd128x3@12$' "$CALLS" \
    && grep -qE '^1\|(500|499)\|train hybrid128k-readsinkhd128x3@13 hybrid128k-readsinkhd128x3@14$' "$CALLS" \
    && [ "$(wc -l < "$CALLS")" -eq 3 ] && grep -q '^== GPU 1, seed 13: stub train' "$work/seeds_train.log" \
    && pass "seeds train: the data once, then seeds 11, 12 on GPU 0 and 13, 14 on GPU 1" \
    || fail "seeds train: exit $rc, calls: $(cat "$CALLS"), shard $(cat "$CALLS.shard")"
: > "$CALLS"
scripts/reading_study.sh seeds score hybrid128k-readsinkhd128x3 11 12 13 14 > "$work/seeds_score.log" 2>&1
rc=$?
g1=$(grep '^1|' "$CALLS" | cut -d'|' -f2-)
[ $rc -eq 0 ] && [ "$g1" = $'300|train hybrid128k-readsinkhd128x3@13 hybrid128k-readsinkhd128x3@14\n-|score hybrid128k-readsinkhd128x3@13 hybrid128k-readsinkhd128x3@14' ] \
    && ! grep -q 'data' "$CALLS" && pass "seeds score: each GPU finishes its two runs, then scores them" \
    || fail "seeds score: exit $rc, calls: $(cat "$CALLS")"
: > "$CALLS"
TRAIN_UNTIL=500 scripts/reading_study.sh seeds long hybrid128k-readsinkhd128x3 11 12 13 14 > "$work/seeds_long.log" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -qE '^0\|(500|499)\|long hybrid128k-readsinkhd128x3@11$' "$CALLS" \
    && grep -qE '^1\|(500|499)\|long hybrid128k-readsinkhd128x3@13$' "$CALLS" && [ "$(wc -l < "$CALLS")" -eq 3 ] \
    && pass "seeds long: the 1M stage of each GPU's first seed, alone" || fail "seeds long: exit $rc, calls: $(cat "$CALLS")"
: > "$CALLS"
scripts/reading_study.sh seeds score1m hybrid128k-readsinkhd128x3 11 12 13 14 > "$work/seeds_score1m.log" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(sort "$CALLS")" = $'0|-|score1m hybrid128k-readsinkhd128x3@11\n1|-|score1m hybrid128k-readsinkhd128x3@13' ] \
    && pass "seeds score1m: each GPU scores its first seed's 1M stage" || fail "seeds score1m: exit $rc, calls: $(cat "$CALLS")"

# One call's `train` and `score` on one GPU, in a folder of their own with stand-ins for the study
# (scripts/retrieval_study.sh) and for infer: two seeds of readsink2x side by side get read's shards
# at twice the default size; score asks for both runs' evals, their copy loss and A's 2K control.
site=$work/site
mkdir -p "$site/scripts" "$site/rs/bin" "$site/rs/corpus-long" "$site/rs/demo"
cp scripts/reading_study.sh scripts/gpu_lib_paths.sh "$site/scripts/"
cat > "$site/scripts/retrieval_study.sh" <<'STUB'
#!/usr/bin/env bash
echo "${TOKENS:--}|${VARIANTS:--}|${SHARD_TOKENS:--}|${CTL:--}|$*" >> "$CALLS"
[ -n "${EVAL_MIN:-}" ] && echo "$EVAL_MIN|$*" >> "$CALLS.evalmin"
[[ $* == train:hybrid1m-* ]] && echo "${RECOMPUTE_1M:-auto}|$*" >> "$CALLS.recompute"
case "$*" in "${FAIL_ON:-none}"*) exit 3 ;; esac
STUB
printf '#!/usr/bin/env bash\necho "infer|$*" >> "$CALLS"\n' > "$site/rs/bin/infer"
chmod +x "$site/scripts/retrieval_study.sh" "$site/rs/bin/infer"
touch "$site/rs/bin/train" "$site/rs/corpus-long/val.bin" "$site/rs/demo/net-sctp.txt" && chmod +x "$site/rs/bin/train"
: > "$CALLS"
(cd "$site" && scripts/reading_study.sh train hybrid128k-readsink2x@11 hybrid128k-readsink2x@12 > train.log 2>&1)
rc=$?
[ $rc -eq 0 ] && [ "$(head -n 1 "$CALLS")" = "157286400|read read|100M|-|data" ] \
    && grep -qE '^157286400\|read read\|100M\|-\|train:hybrid128k-readsink2x@11:[0-9.]+$' "$CALLS" \
    && grep -qE '^157286400\|read read\|100M\|-\|train:hybrid128k-readsink2x@12:[0-9.]+$' "$CALLS" \
    && pass "train: two seeds of readsink2x side by side, after the data of read's shards at 100M tokens" \
    || fail "train with readsink2x: exit $rc, calls: $(cat "$CALLS")"
: > "$CALLS"
(cd "$site" && scripts/reading_study.sh train hybrid128k-readsink@11 hybrid128k-readconvpart@11 > train1.log 2>&1)
[ "$(head -n 1 "$CALLS")" = "157286400|read read|50M|-|data" ] && pass "train: readsink beside readconvpart on read's shards at 50M tokens" \
    || fail "train with readsink and readconvpart: calls: $(cat "$CALLS")"
: > "$CALLS"
(cd "$site" && scripts/reading_study.sh train hybrid128k-readsinkhd128@11 hybrid128k-readsink@11 > train2.log 2>&1)
[ "$(head -n 1 "$CALLS")" = "157286400|read read|50M|-|data" ] && pass "train: readsinkhd128 beside readsink on read's shards at 50M tokens" \
    || fail "train with readsinkhd128 and readsink: calls: $(cat "$CALLS")"
: > "$CALLS"
(cd "$site" && scripts/reading_study.sh score hybrid128k-readsink2x@11 hybrid128k-readsink2x@12 > score.log 2>&1)
rc=$?
evals=$(grep -cE '^[^|]*\|[^|]*\|[^|]*\|-\|eval:hybrid128k-readsink2x@1[12]$' "$CALLS")
[ $rc -eq 0 ] && [ "$evals" -eq 2 ] && grep -qE '^[^|]*\|[^|]*\|[^|]*\|2048\|eval:hybrid128k-readsink2x@11$' "$CALLS" \
    && [ "$(grep -c -- '--copy-loss rs/corpus-long/val.bin --gaps 16,128,512,2K,8K,32K,128K' "$CALLS")" -eq 2 ] \
    && ! grep -q 'data' "$CALLS" && pass "score: both runs' evals and copy loss, the first also with 2K of sight; no data step" \
    || fail "score: exit $rc, calls: $(cat "$CALLS")"
# A run the calls before cut (a log without its done line) is trained to its end first, for at most
# FINISH_UNTIL seconds, then both are scored; a finished run's log does not start training.
mkdir -p "$site/build/rs"
echo 'stopped after step 11508 of 11700 (--time-limit): --resume with the same flags continues' > "$site/build/rs/hybrid128k-readsink2x@12_train.log"
echo 'done: 11700 steps, val loss 1.2210' > "$site/build/rs/hybrid128k-readsink2x@11_train.log"
: > "$CALLS"
(cd "$site" && scripts/reading_study.sh score hybrid128k-readsink2x@11 hybrid128k-readsink2x@12 > score_finish.log 2>&1)
rc=$?
first_eval=$(grep -n 'eval:' "$CALLS" | head -n 1 | cut -d: -f1)
last_train=$(grep -n 'train:hybrid128k-readsink2x@12:' "$CALLS" | tail -n 1 | cut -d: -f1)
minutes=$(grep -oE 'train:hybrid128k-readsink2x@12:[0-9.]+$' "$CALLS" | cut -d: -f3)
[ $rc -eq 0 ] && [ -n "$last_train" ] && [ -n "$first_eval" ] && [ "$last_train" -lt "$first_eval" ] \
    && awk -v m="$minutes" 'BEGIN { exit !(m > 0 && m <= 5) }' && [ "$(grep -c 'eval:' "$CALLS")" -eq 3 ] \
    && pass "score: a run the calls before cut trains to its end first (at most 300 s: $minutes minutes), then both are scored" \
    || fail "score after a cut run: exit $rc, calls: $(cat "$CALLS")"
echo 'done: 11700 steps, val loss 1.2210' > "$site/build/rs/hybrid128k-readsink2x@12_train.log"
: > "$CALLS"
(cd "$site" && scripts/reading_study.sh score hybrid128k-readsink2x@11 hybrid128k-readsink2x@12 > score_done.log 2>&1)
! grep -qE 'data|train:' "$CALLS" && [ "$(grep -c 'eval:' "$CALLS")" -eq 3 ] \
    && pass "score: two finished runs are scored without a training step" || fail "score after finished runs: calls: $(cat "$CALLS")"
echo 'stopped after step 11508 of 11700 (--time-limit): --resume with the same flags continues' > "$site/build/rs/hybrid128k-readsink2x@12_train.log"
: > "$CALLS"
(cd "$site" && FINISH_UNTIL=0 scripts/reading_study.sh score hybrid128k-readsink2x@11 hybrid128k-readsink2x@12 > score_nofinish.log 2>&1)
! grep -qE 'data|train:' "$CALLS" && [ "$(grep -c 'eval:' "$CALLS")" -eq 3 ] \
    && pass "score: FINISH_UNTIL=0 (pairs and seeds, which finish their runs first) scores without training" \
    || fail "score with FINISH_UNTIL=0: calls: $(cat "$CALLS")"
# A run whose NoPE heads learn their log-n slopes (ls) gets what it learned beside its scores; the
# other run of the call does not.
cat > "$site/scripts/logn_slopes.py" <<'STUB'
import os, sys
open(os.environ["CALLS"], "a").write("slopes|" + " ".join(sys.argv[1:]) + "\n")
print("| layer | head | slope |")
STUB
: > "$CALLS"
(cd "$site" && FINISH_UNTIL=0 scripts/reading_study.sh score hybrid128k-readsinkhd128x3c16ls@11 hybrid128k-readsinkhd128x3c16@11 > score_ls.log 2>&1)
rc=$?
[ $rc -eq 0 ] && [ "$(grep '^slopes' "$CALLS")" = "slopes|out/study/hybrid128k-readsinkhd128x3c16ls@11" ] \
    && grep -q '^| layer | head | slope |' "$site/build/rs/hybrid128k-readsinkhd128x3c16ls@11_slopes.md" \
    && [ ! -e "$site/build/rs/hybrid128k-readsinkhd128x3c16@11_slopes.md" ] \
    && pass "score: the ls run's learned log-n slopes in its _slopes.md, the other run none" \
    || fail "score with an ls run: exit $rc, calls: $(cat "$CALLS"), files: $(ls "$site/build/rs" | grep slopes)"
rm -r "$site/build/rs"

# weights: a run's weights alone into $OUT (scripts/weights_only.py, on a stand-in training checkpoint:
# its AdamW moments and training state dropped); restore: a run's folder from such a file, not over a
# run of the hold, not from a file that is not there.
cp scripts/weights_only.py "$site/scripts/"
mkdir -p "$site/out/study/hybrid128k-readsink@11" "$site/out_call"
python3 - "$site/out/study/hybrid128k-readsink@11/ckpt_00000100.safetensors" <<'PY'
import json, struct, sys
meta = {"format": "longnet-gpt/1", "config": "{}", "forward": "{}", "tokenizer": "dG9r", "step": "100"}
header = {"__metadata__": meta, "wte": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
          "optim.m.wte": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(text)) + text + struct.pack("<4f", 1, 2, 3, 4))
PY
# Pieces of 64 bytes here (WEIGHTS_PIECE), as a call's 15 MiB pieces of the 56 MB file: each at most
# that size, and restore joins them to the bytes weights_only.py writes.
(cd "$site" && WEIGHTS_PIECE=64 OUT=$PWD/out_call scripts/reading_study.sh weights hybrid128k-readsink@11 > weights.log 2>&1)
rc=$?
site_abs=$(cd "$site" && pwd)
p=$site_abs/out_call/hybrid128k-readsink-11_weights.safetensors.xz.
w=$site_abs/whole.safetensors
python3 scripts/weights_only.py "$site/out/study/hybrid128k-readsink@11" "$w" > /dev/null
pieces=$(ls "$p"* 2> /dev/null | wc -l)
big=$(find "$site/out_call" -type f -size +64c | wc -l)
[ $rc -eq 0 ] && [ "$pieces" -ge 2 ] && [ "$big" -eq 0 ] && cat "$p"* | xz -dc | cmp -s - "$w" \
    && grep -qF '"wte"' "$w" && ! grep -qF 'optim.' "$w" && ! grep -qF '"step"' "$w" \
    && pass "weights: the run's newest checkpoint without its AdamW moments or training state, in \$OUT as $pieces xz pieces" \
    || fail "weights: exit $rc, $pieces pieces, $big over 64 bytes, $(tail -1 "$site/weights.log")"
(cd "$site" && scripts/reading_study.sh restore hybrid128k-readsink@12 "${p}aa" > restore.log 2>&1)
rc=$?
[ $rc -eq 0 ] && cmp -s "$w" "$site/out/study/hybrid128k-readsink@12/ckpt_00000000.safetensors" \
    && pass "restore: the run's folder holds the weights, joined from the call's pieces, as its checkpoint" \
    || fail "restore: exit $rc, $(tail -2 "$site/restore.log")"
(cd "$site" && scripts/reading_study.sh restore hybrid128k-readsink@14 "$w" > restore4.log 2>&1)
[ $? -eq 0 ] && cmp -s "$w" "$site/out/study/hybrid128k-readsink@14/ckpt_00000000.safetensors" \
    && pass "restore: from a whole weights file too" || fail "restore from a whole file: $(tail -2 "$site/restore4.log")"
rm "${p}ab"
(cd "$site" && scripts/reading_study.sh restore hybrid128k-readsink@15 "${p}aa" > restore5.log 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q '^error: restore: the pieces .* do not join' "$site/restore5.log" && [ "$(grep -c "^error:" "$site/restore5.log")" -eq 1 ] \
    && [ ! -e "$site/out/study/hybrid128k-readsink@15" ] \
    && pass "restore: a piece missing is refused in one line, no run's folder left" \
    || fail "restore with a piece missing: exit $rc, $(cat "$site/restore5.log")"
rm "$p"*
(cd "$site" && WEIGHTS=1 FINISH_UNTIL=0 OUT=$PWD/out_call scripts/reading_study.sh score hybrid128k-readsink@11 hybrid128k-readsink@13 \
    > score_weights.log 2>&1)
rc=$?
[ $rc -eq 0 ] && [ -f "${p}aa" ] && [ "$(ls "$site/out_call" | grep -c '_weights.safetensors.xz.aa$')" -eq 1 ] \
    && cat "$p"* | xz -dc | cmp -s - "$w" \
    && pass "score with WEIGHTS=1: the first run's weights alone come back beside its tables" \
    || fail "score with WEIGHTS=1: exit $rc, $(ls "$site/out_call")"
w=${p}aa
(cd "$site" && scripts/reading_study.sh restore hybrid128k-readsink@11 "$w" > restore2.log 2>&1)
rc=$?
[ $rc -eq 2 ] && grep -q 'exists already' "$site/restore2.log" && [ ! -e "$site/out/study/hybrid128k-readsink@11/ckpt_00000000.safetensors" ] \
    && pass "restore: refused over a run of the hold" || fail "restore over a run: exit $rc, $(tail -2 "$site/restore2.log")"
(cd "$site" && scripts/reading_study.sh restore hybrid128k-readsink@13 nothing.safetensors > restore3.log 2>&1)
[ $? -eq 2 ] && grep -q 'no weights file' "$site/restore3.log" && [ ! -e "$site/out/study/hybrid128k-readsink@13" ] \
    && pass "restore: refused without its file" || fail "restore without a file: $(tail -2 "$site/restore3.log")"
(cd "$site" && env -u OUT scripts/reading_study.sh weights hybrid128k-readsink@11 > weights2.log 2>&1)
[ $? -eq 2 ] && grep -q 'OUT .* is not set' "$site/weights2.log" && pass "weights: refused outside a device call (no \$OUT)" \
    || fail "weights without OUT: $(tail -2 "$site/weights2.log")"
rm -r "$site/out" "$site/out_call"

: > "$CALLS"
(cd "$site" && scripts/reading_study.sh long hybrid128k-readsink2x@11 hybrid128k-readsink2x@12 > long.log 2>&1)
rc=$?
[ $rc -eq 0 ] && [ "$(head -n 1 "$CALLS")" = "157286400|read read|100M|-|data" ] \
    && grep -qE '\|train:hybrid1m-readsink2x@11:[0-9.]+$' "$CALLS" && grep -qE '\|train:hybrid1m-readsink2x@12:[0-9.]+$' "$CALLS" \
    && ! grep -q 'train:hybrid128k' "$CALLS" \
    && pass "long: the data, then the 1M stages of both 128K runs side by side" || fail "long: exit $rc, calls: $(cat "$CALLS")"
[ "$(cut -d'|' -f1 "$CALLS.recompute" | sort -u)" = selective ] && pass "long: two 1M stages on one GPU keep less (selective recompute)" \
    || fail "long's recompute: $(cat "$CALLS.recompute")"
: > "$CALLS.recompute"
(cd "$site" && scripts/reading_study.sh long hybrid128k-readsink@11 > long1.log 2>&1)
[ "$(wc -l < "$CALLS.recompute")" -eq 1 ] && grep -qE '^auto\|train:hybrid1m-readsink@11:[0-9.]+$' "$CALLS.recompute" \
    && pass "long: one 1M stage alone takes the fastest policy that fits" || fail "long alone's recompute: $(cat "$CALLS.recompute")"
: > "$CALLS"; : > "$CALLS.evalmin"
(cd "$site" && scripts/reading_study.sh score1m hybrid128k-readsinkhd128@13 > score1m.log 2>&1)
rc=$?
[ $rc -eq 0 ] && grep -qE '\|train:hybrid1m-readsinkhd128@13:[0-9.]+$' "$CALLS" \
    && [ "$(cat "$CALLS.evalmin")" = "524288|eval:hybrid1m-readsinkhd128@13" ] \
    && grep -q -- '--checkpoint out/study/hybrid1m-readsinkhd128@13 --copy-loss rs/corpus-long/val.bin --gaps 128K,512K,1000K .*--ctx 1048576' "$CALLS" \
    && ! grep -q 'data' "$CALLS" \
    && pass "score1m: a 1M stage finished, then scored at 512K-1M with the copy at 128K-1000K back" || fail "score1m: exit $rc, calls: $(cat "$CALLS"), $(cat "$CALLS.evalmin")"
(cd "$site" && scripts/reading_study.sh long > usage.log 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q '^usage:' "$site/usage.log" && pass "refused: reading_study.sh long without a run" || fail "long without a run: exit $rc"

: > "$CALLS"
(cd "$site" && FAIL_ON="train:hybrid128k-readsink@12" scripts/reading_study.sh train hybrid128k-readsink@11 hybrid128k-readsink@12 > fail.log 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q 'train:hybrid128k-readsink@11' "$CALLS" && pass "train: a run that fails makes the call exit 1, the other run still runs" \
    || fail "train with a failing run: exit $rc, calls: $(cat "$CALLS")"

for args in "pairs" "pairs train" "pairs eval a b 1" "pairs train a b" "pairs long a b" "seeds train a" "seeds score a 1 2 3" "seeds eval a 1 2"; do
    # shellcheck disable=SC2086
    out=$(scripts/reading_study.sh $args 2>&1); rc=$?
    [ $rc -eq 2 ] && [[ $out == usage:* ]] && pass "refused: reading_study.sh $args" || fail "reading_study.sh $args: exit $rc: $out"
done
summary
