#!/usr/bin/env bash
# scripts/reading_study.sh pairs (one device call on a host of several GPUs) with a stand-in for
# the study's own calls (READING_STUDY), which records how it was called: `train` makes the data of
# both runs once, first, then trains A@S and B@S on GPU g for the g-th seed, side by side, each to
# the call's TRAIN_UNTIL less what the data took; `score` finishes a run the call before cut, then
# scores it, on the same GPUs; a call that fails makes pairs fail; bad usage is refused.
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
[ "${FAIL_ON:-}" = "$*" ] && exit 3
sleep 0.2
echo "stub $*"
STUB
chmod +x "$stub"
export READING_STUDY=$stub CALLS=$work/calls.txt

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

: > "$CALLS"; : > "$CALLS.shard"
scripts/reading_study.sh pairs train hybrid128k-readsink2x hybrid128k-readsink 11 12 > "$work/train2x.log" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(head -n 1 "$CALLS" | cut -d'|' -f3)" = "data read read" ] && [ "$(cat "$CALLS.shard")" = 100M ] \
    && pass "pairs train: readsink2x on read's shards, made twice as large (100M tokens)" \
    || fail "pairs train with readsink2x: exit $rc, calls $(cat "$CALLS"), shard size $(cat "$CALLS.shard")"

: > "$CALLS"
scripts/reading_study.sh pairs score hybrid128k-readsink hybrid128k-readconvpart 13 14 > "$work/score.log" 2>&1
rc=$?
g0=$(grep '^0|' "$CALLS" | cut -d'|' -f2-); g1=$(grep '^1|' "$CALLS" | cut -d'|' -f2-)
[ $rc -eq 0 ] && [ "$g0" = $'300|train hybrid128k-readsink@13 hybrid128k-readconvpart@13\n-|score hybrid128k-readsink@13 hybrid128k-readconvpart@13' ] \
    && [ "$g1" = $'300|train hybrid128k-readsink@14 hybrid128k-readconvpart@14\n-|score hybrid128k-readsink@14 hybrid128k-readconvpart@14' ] \
    && ! grep -q 'data' "$CALLS" && pass "pairs score: each GPU finishes its runs, then scores them; no data step" \
    || fail "pairs score: exit $rc, calls: $(cat "$CALLS")"

: > "$CALLS"
FAIL_ON="train hybrid128k-readsink@12 hybrid128k-readconvpart@12" \
    scripts/reading_study.sh pairs train hybrid128k-readsink hybrid128k-readconvpart 11 12 > "$work/fail.log" 2>&1
[ $? -ne 0 ] && pass "pairs: a GPU's failed call fails the call" || fail "pairs: a failed call went unnoticed"

for args in "pairs" "pairs train" "pairs eval a b 1" "pairs train a b"; do
    # shellcheck disable=SC2086
    out=$(scripts/reading_study.sh $args 2>&1); rc=$?
    [ $rc -eq 2 ] && [[ $out == usage:* ]] && pass "refused: reading_study.sh $args" || fail "reading_study.sh $args: exit $rc: $out"
done
summary
