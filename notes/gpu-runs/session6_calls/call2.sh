#!/bin/bash
# issue 23: after the layout fix, the attention tests again (all), then the sanitizers half of the suite
set -u
source .carry/s6/setup.sh
for t in test_attention test_attention_two_sided test_ring test_model test_kv_cache; do
    t0=$SECONDS; b/$t > build/logs/$t.log 2>&1; echo "$t: exit $? $(tail -1 build/logs/$t.log) $((SECONDS - t0)) s"; grep -m3 '^FAIL' build/logs/$t.log
done
tar -czf $OUT/logs2a.tgz build/logs
t0=$SECONDS
PART=sanitizers BIN=b LOGS=build/logs timeout 300 tests/gpu/run_gpu_tests.sh > build/san.log 2>&1; echo "sanitizers exit $? in $((SECONDS - t0)) s"
tar -czf $OUT/logs2.tgz build/logs build/san.log
tail -14 build/san.log
