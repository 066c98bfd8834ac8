#!/usr/bin/env bash
# Proves the gradient checks can fail: the op harness and the whole-model check, built with a
# deliberately wrong GELU backward (-DBREAK_GELU_BACKWARD), must both report FAIL.
set -uo pipefail
passed=0 failed=0
for bin in build/test_ops_cpu_broken_gelu build/test_model_cpu_broken_gelu; do
    if [ ! -x "$bin" ]; then echo "FAIL $bin not built"; failed=$((failed + 1)); continue; fi
    out=$("$bin" 2>&1); code=$?
    if [ $code -ne 0 ] && grep -q '^FAIL' <<< "$out"; then
        echo "PASS $bin: the broken GELU backward is caught ($(grep -c '^FAIL' <<< "$out") checks fail)"
        passed=$((passed + 1))
    else
        echo "FAIL $bin: a broken GELU backward went unnoticed (exit $code)"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
