#!/usr/bin/env bash
# scripts/launch.sh on the CPU with stand-in ranks: each rank gets its environment, output lines
# carry the rank, the first rank to fail stops the others at once (a dead rank never leaves the
# job hanging) with its exit code, and bad P values give the usage line.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/lib.sh
source tests/lib.sh
work=build/test_launch
rm -rf "$work" && mkdir -p "$work"

out=$(scripts/launch.sh 3 bash -c 'echo "rank $RANK of $WORLD_SIZE on GPU $LOCAL_RANK, nvls $NCCL_NVLS_ENABLE, rendezvous ${LONGNET_RENDEZVOUS:+set}"' 2>&1)
code=$?
if [ $code -eq 0 ] && [ "$(grep -c 'of 3 on GPU' <<< "$out")" -eq 3 ] && grep -q '^\[rank 2\] rank 2 of 3 on GPU 2, nvls 0, rendezvous set$' <<< "$out"; then
    pass "3 ranks get RANK, WORLD_SIZE, LOCAL_RANK, NCCL_NVLS_ENABLE=0 and a rendezvous file; lines prefixed"
else
    fail "rank environment (exit $code): $out"
fi

start=$SECONDS
# The survivors sleep for a length no other process on the machine uses (this script's pid in
# it), so the check below finds only them.
nap="60.$$"
out=$(scripts/launch.sh 3 bash -c 'if [ "$RANK" = 1 ]; then sleep 0.3; echo "error: rank 1 gave up" >&2; exit 3; fi; sleep '"$nap" 2>&1)
code=$?
took=$((SECONDS - start))
if [ $code -eq 3 ] && [ $took -lt 15 ] && grep -q "launch: rank 1 exited with code 3; stopped the others" <<< "$out" \
   && grep -q '^\[rank 1\] error: rank 1 gave up' <<< "$out"; then
    pass "a failing rank stops the others in ${took} s (they would have run 60 s) and its code is the job's: $(tail -1 <<< "$out")"
else
    fail "failing rank: exit $code after ${took} s: $out"
fi
left=$(for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f" 2>/dev/null | grep -xF "sleep $nap "; done)
if [ -z "$left" ]; then pass "no rank left running"; else fail "ranks left running: $left"; fi

for bad in 0 -1 two 99999; do
    err=$(scripts/launch.sh "$bad" true 2>&1)
    code=$?
    if [ $code -eq 2 ] && grep -q "usage: scripts/launch.sh P command" <<< "$err"; then
        pass "P=$bad refused: $(head -1 <<< "$err")"
    else
        fail "P=$bad: exit $code: $err"
    fi
done
summary
