#!/usr/bin/env bash
# Proves the gradient checks can fail: the op harness and the whole-model check, built with a
# deliberately wrong GELU backward (-DBREAK_GELU_BACKWARD), must both report FAIL.
set -uo pipefail
# shellcheck source=tests/lib.sh
source tests/lib.sh
for bin in build/test_ops_cpu_broken_gelu build/test_model_cpu_broken_gelu; do
    if [ ! -x "$bin" ]; then fail "$bin not built"; continue; fi
    out=$("$bin" 2>&1); code=$?
    if [ $code -ne 0 ] && grep -q '^FAIL' <<< "$out"; then
        pass "$bin: the broken GELU backward is caught ($(grep -c '^FAIL' <<< "$out") checks fail)"
    else
        fail "$bin: a broken GELU backward went unnoticed (exit $code)"
    fi
done
summary
