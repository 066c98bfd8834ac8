#!/usr/bin/env bash
# build/attention_tool on the CPU: the files it writes are checked from outside the project
# (scripts/check_attention_file.py reads them with Python's standard library and recomputes rows
# from the spec), a tampered file is caught, and bad flags give one-line errors.
set -uo pipefail
work=build/test_attention_tool
rm -rf "$work" && mkdir -p "$work"
passed=0 failed=0
pass() { echo "PASS $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
tool=./build/attention_tool
check() {  # name, tool flags...
    local name=$1; shift
    if "$tool" "$@" --out "$work/$name.safetensors" > "$work/$name.log" 2>&1 \
       && python3 scripts/check_attention_file.py "$work/$name.safetensors" >> "$work/$name.log" 2>&1; then
        pass "$name: $(tail -1 "$work/$name.log")"
    else
        fail "$name: $(tail -2 "$work/$name.log" | tr '\n' ' ')"
    fi
}
check dense_causal_fp64 --N 67 --H 3 --D 64 --dtype fp64 --seed 3
check dense_full_fp32 --N 50 --H 2 --D 128 --causal off --dtype fp32 --backward
check dilated_fp64 --pattern dilated --segments 16,40,100 --dilations 3,2,4 --N 90 --H 5 --D 64 --dtype fp64 --backward
check dilated_full_fp32 --pattern dilated --segments 32 --dilations 5 --N 70 --H 3 --D 64 --causal off --dtype fp32
# Tamper with one output value: the checker must notice.
python3 - "$work/dilated_fp64.safetensors" <<'PY'
import json, struct, sys
path = sys.argv[1]
raw = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
begin = json.loads(raw[8:8 + n])["o"]["data_offsets"][0] + 8 + n
for i in range(0, 64 * 8 * 90, 8):  # every row of head 0 and a few more: the sampled rows hit one
    v = struct.unpack("<d", raw[begin + i:begin + i + 8])[0]
    raw[begin + i:begin + i + 8] = struct.pack("<d", v * 1.01)
open(path + ".bad", "wb").write(raw)
PY
python3 scripts/check_attention_file.py "$work/dilated_fp64.safetensors.bad" --rows 200 > "$work/bad.log" 2>&1
code=$?
if [ $code -eq 1 ] && grep -q '^FAIL' "$work/bad.log"; then pass "a tampered output is caught: $(tail -1 "$work/bad.log")"
else fail "a tampered output was not caught (exit $code): $(tail -1 "$work/bad.log")"; fi
for bad in "--D 96" "--pattern dilated --segments 8 --dilations 16" "--dtype bf16" "--N 0"; do
    err=$($tool $bad 2>&1 >/dev/null); code=$?
    if [ $code -ne 0 ] && [[ "$err" == error:* ]] && [ "$(printf '%s\n' "$err" | grep -c .)" -eq 1 ]; then pass "bad flags '$bad' -> $err"
    else fail "bad flags '$bad': exit $code: $err"; fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
