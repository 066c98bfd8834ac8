#!/bin/bash
# issue 25: the warp-specialized forward (variant 5): correctness on every case, sanitizers, speed beside cuDNN
set -u
tar -xJf .carry/s6/ws.tar.xz; source .carry/s6/setup.sh
mkdir -p $OUT/c4
t0=$SECONDS; timeout 240 b/test_attention --backend ws > build/logs/ws_test.log 2>&1; echo "test_attention --backend ws: exit $? $(tail -1 build/logs/ws_test.log) $((SECONDS - t0)) s"
grep -m8 '^FAIL' build/logs/ws_test.log; grep -c '^PASS' build/logs/ws_test.log
cp build/logs/ws_test.log $OUT/c4/
t0=$SECONDS; timeout 150 b/bench_attention --variants --out $OUT/c4/bench_variants.md > build/logs/bench.log 2>&1; echo "bench: exit $? $((SECONDS - t0)) s"
cat build/logs/bench.log | grep -v "^#" | head -60
t0=$SECONDS; timeout 100 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 b/test_attention --small --backend ws > build/logs/ws_memcheck.log 2>&1; echo "memcheck: exit $? $(grep -E 'ERROR SUMMARY' build/logs/ws_memcheck.log | tail -1) $((SECONDS - t0)) s"
t0=$SECONDS; timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 b/test_attention --small --backend ws > build/logs/ws_racecheck.log 2>&1; echo "racecheck: exit $? $(grep -E 'RACECHECK SUMMARY' build/logs/ws_racecheck.log | tail -1) $((SECONDS - t0)) s"
t0=$SECONDS; timeout 60 compute-sanitizer --tool synccheck --error-exitcode 9 b/test_attention --small --backend ws > build/logs/ws_synccheck.log 2>&1; echo "synccheck: exit $? $(grep -E 'ERROR SUMMARY' build/logs/ws_synccheck.log | tail -1) $((SECONDS - t0)) s"
cp build/logs/ws_*.log $OUT/c4/
