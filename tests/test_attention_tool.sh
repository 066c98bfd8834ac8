#!/usr/bin/env bash
# build/attention_tool on the CPU: the files it writes are checked from outside the project
# (scripts/check_attention_file.py reads them with Python's standard library and recomputes rows
# from the spec), a tampered file is caught, and bad flags give one-line errors.
set -uo pipefail
work=build/test_attention_tool
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
tool=./build/attention_tool
# bad_flags NAMES FLAGS...: the tool refuses FLAGS with one error line naming NAMES.
bad_flags() {
    local names=$1; shift
    expect_error -F "bad flags '$(printf '%.80s' "$*")'" "$names" timeout 60 "$tool" "$@"
}
check_file() {  # name, tool flags...
    local name=$1; shift
    if "$tool" "$@" --out "$work/$name.safetensors" > "$work/$name.log" 2>&1 \
       && python3 scripts/check_attention_file.py "$work/$name.safetensors" >> "$work/$name.log" 2>&1; then
        pass "$name: $(tail -1 "$work/$name.log")"
    else
        fail "$name: $(tail -2 "$work/$name.log" | tr '\n' ' ')"
    fi
}
check_file dense_causal_fp64 --N 67 --H 3 --D 64 --dtype fp64 --seed 3
check_file dense_full_fp32 --N 50 --H 2 --D 128 --causal off --dtype fp32 --backward
check_file dilated_fp64 --pattern dilated --segments 16,40,100 --dilations 3,2,4 --N 90 --H 5 --D 64 --dtype fp64 --backward
check_file dilated_full_fp32 --pattern dilated --segments 32 --dilations 5 --N 70 --H 3 --D 64 --causal off --dtype fp32
check_file dilated_b2_fp32 --pattern dilated --segments 24,64 --dilations 1,3 --N 80 --B 2 --H 3 --D 128 --dtype fp32 --backward --seed 11
check_file dense_scale_fp64 --N 40 --B 2 --H 2 --D 64 --dtype fp64 --backward --scale 0.3 --seed 5
check_file dense_d128_fp64 --N 30 --H 2 --D 128 --dtype fp64 --backward --seed 9
check_file block_sparse_fp64 --pattern block-sparse --block 16 --window 40 --global 5 --dilated-blocks 3,160 \
    --random-blocks 2,3 --N 203 --B 2 --H 3 --D 64 --dtype fp64 --backward
check_file block_sparse_full_fp32 --pattern block-sparse --block 8 --window 12 --random-blocks 1,9 --causal off --N 61 --H 2 --D 64 --dtype fp32
check_file fixed_fp64 --pattern fixed --stride 16 --summary 5 --N 83 --B 2 --H 2 --D 64 --dtype fp64 --backward --seed 7
printf '0: 0\n1: 0 1\n2: 1 2\n3: 0 3\n' > "$work/layout.txt"
check_file block_sparse_layout_fp64 --pattern block-sparse --block 16 --layout-file "$work/layout.txt" --N 64 --H 2 --D 64 --dtype fp64 --backward
# A layout with key blocks above the diagonal is valid without the causal mask: --causal off is
# read before the layout file, wherever it stands among the flags.
printf '0: 0 2\n1: 0 1 3\n2: 1 2\n3: 0 3\n' > "$work/layout_full.txt"
check_file block_sparse_layout_full_fp64 --pattern block-sparse --block 16 --layout-file "$work/layout_full.txt" --causal off \
    --N 64 --H 2 --D 64 --dtype fp64 --backward
check_file block_sparse_layout_full_first_fp32 --causal off --pattern block-sparse --block 16 --layout-file "$work/layout_full.txt" \
    --N 60 --H 2 --D 64 --dtype fp32
# The checker's block-sparse is its own code: a file whose metadata claims another random seed fails.
python3 - "$work/block_sparse_fp64.safetensors" "$work/bs_wrong_seed.safetensors" <<'PY'
import sys
raw = open(sys.argv[1], "rb").read()
assert raw.count(b'\\"random_seed\\":3') == 1 or raw.count(b'"random_seed":3') == 1, "seed not found in the header"
raw = raw.replace(b'\\"random_seed\\":3', b'\\"random_seed\\":4').replace(b'"random_seed":3', b'"random_seed":4')
open(sys.argv[2], "wb").write(raw)
PY
if python3 scripts/check_attention_file.py "$work/bs_wrong_seed.safetensors" > "$work/bs_wrong_seed.log" 2>&1; then
    fail "a block-sparse file whose layout seed was changed passed the checker"
else
    pass "a block-sparse file whose layout seed was changed is caught: $(grep -m1 '^FAIL' "$work/bs_wrong_seed.log" | cut -c1-120)"
fi

# Tamper with a written file (python3 tamper.py FILE TENSOR OP OUT): OP scale:X multiplies every
# value, flip negates the first value of every (token, head) row, nan / inf set the last value.
cat > "$work/tamper.py" <<'PY'
import json, struct, sys
path, name, op, out = sys.argv[1:5]
raw = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
t = header[name]
fmt, size = {"F64": ("<d", 8), "F32": ("<f", 4)}[t["dtype"]]
begin, end = (x + 8 + n for x in t["data_offsets"])
D = t["shape"][-1]
for i in range(begin, end, size):
    k = (i - begin) // size
    v = struct.unpack(fmt, raw[i:i + size])[0]
    if op.startswith("scale:"):
        v *= float(op[6:])
    elif op == "flip" and k % D == 0:
        v = -v
    elif op in ("nan", "inf") and i == end - size:
        v = float(op)
    raw[i:i + size] = struct.pack(fmt, v)
open(out, "wb").write(raw)
PY
tamper() {  # what, file, tensor, op, tensor the checker must name
    local what=$1 file=$2 tensor=$3 op=$4 names=$5 bad=$work/tampered.safetensors
    python3 "$work/tamper.py" "$file" "$tensor" "$op" "$bad"
    python3 scripts/check_attention_file.py "$bad" > "$work/bad.log" 2>&1
    local code=$?
    if [ $code -eq 1 ] && grep -q "^FAIL $names:" "$work/bad.log" && tail -1 "$work/bad.log" | grep -q "^FAIL .*$names"; then
        pass "$what is caught: $(grep "^FAIL $names:" "$work/bad.log" | head -1)"
    else
        fail "$what was not caught (exit $code): $(tr '\n' ' ' < "$work/bad.log")"
    fi
}
f64=$work/dilated_fp64.safetensors f32=$work/dilated_b2_fp32.safetensors
tamper "o x 1.01 (fp64)" "$f64" o scale:1.01 "o, lse"
tamper "dq x 1.01 (fp64)" "$f64" dq scale:1.01 dq
tamper "dk with one value per row negated (fp64)" "$f64" dk flip dk
tamper "dv x (1 + 1e-6) (fp64)" "$f64" dv scale:1.000001 dv
tamper "dq x 1.01 (fp32)" "$f32" dq scale:1.01 dq
tamper "dk x 0.99 (fp32)" "$f32" dk scale:0.99 dk
tamper "dv with one value per row negated (fp32)" "$f32" dv flip dv
tamper "a NaN in the last value of dv" "$f64" dv nan dv
tamper "a NaN in the last value of lse" "$f32" lse nan lse
tamper "an inf in the last value of o" "$f32" o inf o
tamper "do x 1.01 (dq, dk, dv no longer match it)" "$f64" do scale:1.01 dq

# Bad and hostile flags: exit 1 (no signal, no uncaught exception), one stderr line "error: ..."
long_list=$(python3 -c "print(','.join(['16'] * 65))")
bad_flags --D --D 96
bad_flags --dilations --pattern dilated --segments 8 --dilations 16
bad_flags --dtype --dtype bf16
bad_flags --N --N 0
bad_flags --N --N -5
bad_flags --N --N 1e8
bad_flags --N --N 100000000
bad_flags --B --B 2147483647
bad_flags --H --H 2147483647
bad_flags --N --N 2147483647 --H 1
bad_flags --reps --reps 0
bad_flags --reps --reps 2147483647
bad_flags --segments --pattern dilated --segments 99999999999
bad_flags --dilations --pattern dilated --segments 8 --dilations 0
bad_flags --dilations --pattern dilated --dilations 0
bad_flags --segments --pattern dilated --segments "$long_list" --dilations "$long_list"
bad_flags --segments --pattern dilated --segments "$(printf '9%.0s' $(seq 5000))" --dilations 1
bad_flags --pattern --pattern sparse
bad_flags --scale --scale nan
bad_flags --scale --scale inf
bad_flags --scale --scale 1e30
bad_flags --scale --scale -0.5
bad_flags --out --out /nonexistent/dir/x.safetensors
bad_flags --out --out "$work"
bad_flags --max-cpu-pairs --N 300000 --H 1
bad_flags --max-cpu-pairs --N 4096 --H 12 --B 8 --max-cpu-pairs 1e9
bad_flags --device --device tpu
bad_flags --backend --device cuda --dtype bf16 --backend ours
bad_flags --layout-file --pattern block-sparse --block 16 --layout-file "$work/layout_full.txt" --N 64 --H 2

# Every pattern runs on either device through the pattern registry (layers/attention_pattern.h):
# the tool names no pattern kind, so it can neither refuse one the kernels take nor count another
# one's FLOPs (the FLOP rate is the module's pairs_kept over the time).
if grep -n 'AttnKind' tools/attention_tool.cu > "$work/kinds.log"; then
    fail "attention_tool dispatches on the pattern kind itself: $(tr '\n' ' ' < "$work/kinds.log")"
else
    pass "attention_tool names no pattern kind: every pattern goes through the registry"
fi
# Block-sparse and fixed on --device cuda pass the flag checks: here (no GPU) a run stops only at
# the device; on an H100/H200 it runs, reports a FLOP rate above zero and its file checks.
cuda_check() {  # name, tool flags...
    local name=$1; shift
    local err code rates
    err=$("$tool" --device cuda --dtype bf16 "$@" --N 2048 --H 4 --D 64 --backward --reps 3 --out "$work/$name.safetensors" 2>&1 > "$work/$name.log"); code=$?
    rates=$(grep -o '[0-9.]* TFLOP/s' "$work/$name.log" | tr '\n' ' ')
    if [ $code -eq 1 ] && [[ "$err" == "error: --device cuda: "* ]]; then
        pass "$name on --device cuda is refused only for the device: $err"
    elif [ $code -eq 0 ] && [ -n "$rates" ] && ! grep -q ' 0\.0 TFLOP/s' "$work/$name.log" \
         && python3 scripts/check_attention_file.py "$work/$name.safetensors" >> "$work/$name.log" 2>&1; then
        pass "$name on --device cuda runs at $rates and checks: $(tail -1 "$work/$name.log")"
    else
        fail "$name on --device cuda: exit $code: $err $(tr '\n' ' ' < "$work/$name.log")"
    fi
}
cuda_check bs_cuda --pattern block-sparse --block 64 --window 512 --global 16 --random-blocks 2,5
cuda_check fixed_cuda --pattern fixed --stride 256 --summary 24

# The refused --out must leave nothing behind, and the limits let the sizes they name run.
if [ ! -e /nonexistent/dir ] && [ -z "$(ls "$work" | grep '\.tmp$')" ]; then pass "refused runs leave no .tmp files"
else fail "refused runs left files behind: $(ls "$work" | grep '\.tmp$')"; fi
branches64=$(python3 -c "print(','.join(str(8 + i) for i in range(64)))")
if "$tool" --pattern dilated --segments "$branches64" --dilations "$(python3 -c "print(','.join(['2'] * 64))")" --N 40 --H 2 \
     --out "$work/b64.safetensors" > "$work/b64.log" 2>&1 && python3 scripts/check_attention_file.py "$work/b64.safetensors" >> "$work/b64.log" 2>&1; then
    pass "64 dilated branches (the limit) run and check: $(tail -1 "$work/b64.log")"
else fail "64 dilated branches: $(tail -2 "$work/b64.log" | tr '\n' ' ')"; fi
summary
