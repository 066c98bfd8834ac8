#!/usr/bin/env bash
# Block-sparse layout files (--layout-file; layers/patterns/block_layout.h) are validated like
# checkpoints: every bad file is refused with ONE line naming the file, the line and
# the fix, exit 1, before anything is written; a layout at the limits trains and its checkpoint
# loads in infer (one rule for the file and the checkpoint); a per-head layout names every head;
# empty rows are legal; pattern flags that no layer uses are refused instead of ignored.
# Usage: tests/test_layout_files.sh [CORPUS_DIR]   Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
corpus=${1:-build/test_corpus}
work=build/test_layout_files
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
for bin in build/train build/infer build/attention_tool; do
    [ -x $bin ] || bail "$bin not built"
done
[ -f "$corpus/train.bin" ] || bail "no corpus at $corpus (run tests/test_data_cli.sh first)"

# The tiny model of tests/test_train_cli.sh, one step.
tiny=(--data "$corpus" --layers 2 --width 64 --heads 1 --seq-len 32 --batch 4 --steps 1 --warmup 0 --lr 3e-3
      --val-every 0 --val-batches 1 --ckpt-every 0 --log-every 1 --sample-tokens 0 --device cpu)
bs=(--attn block-sparse --block 4 --window 8)
hint="(expected 'Q: K K ...' or 'H/Q: K K ...' with block numbers)"

# name, the exact stderr line expected, the path that must not exist afterwards, command...:
# exit 1, one line, exactly that text, nothing written.
expect_exact_error() {
    local name=$1 want=$2 out=$3; shift 3
    local err code
    err=$("$@" 2>&1 >/dev/null); code=$?
    if [ $code -eq 1 ] && [ "$err" == "$want" ] && [ ! -e "$out" ]; then
        pass "$name -> $err"
    else
        fail "$name: exit $code, wrote $out: $([ -e "$out" ] && echo yes || echo no)
    got:  $err
    want: $want"
    fi
}
# A train run that must be refused for the layout file: the message is the reader's, file and line.
refuse_layout() {  # name, file contents (printf format), the message after "--layout-file FILE "
    local name=$1 text=$2 msg=$3 f="$work/$1.txt"
    printf -- "$text" > "$f"
    expect_exact_error "layout $name" "error: --layout-file $f $msg" "$work/out_$name" \
        tests/last_wins.sh ./build/train "${tiny[@]}" "${bs[@]}" --layout-file "$f" --out "$work/out_$name"
}

# 1. Numbers: checked 64-bit parses, ranges, no wrap, no junk, one number before ':', no NUL.
refuse_layout wrap '4294967297: 0 1\n' "line 1: query block '4294967297' is out of range: query blocks are numbered 0 to 1048575 (2^20 - 1) $hint"
refuse_layout key_wrap '0: 0\n1: 4294967296\n' "line 2: key block '4294967296' is out of range: key blocks are numbered 0 to 1048575 (2^20 - 1) $hint"
refuse_layout huge '0: 0\n999999999999999999999999999999: 0\n' "line 2: query block '999999999999999999999999...' is out of range: query blocks are numbered 0 to 1048575 (2^20 - 1) $hint"
refuse_layout junk '0: 0\n3x: 1\n' "line 2: a bad query block number '3x': digits only $hint"
refuse_layout key_junk '0: 0\n3: 1 2y\n' "line 2: a bad key block number '2y': digits only $hint"
refuse_layout negative '-1: 0\n' "line 1: a bad query block number '-1': digits only $hint"
refuse_layout two_numbers '0: 0\n3 4: 1\n' "line 2: more than one number before ':': give one query block (Q:) or a head and one (H/Q:) $hint"
refuse_layout nul '0: 0\n1: 0\0001\n2: 0\n' "line 2: a NUL byte: a layout file is text; remove it $hint"
refuse_layout nul_after_rows '0: 0\n1: 0 1\n\000junk' "line 3: a NUL byte: a layout file is text; remove it $hint"
refuse_layout head_range '70000/0: 0\n' "line 1: head '70000' is out of range: heads are numbered 0 to 65535 (2^16 - 1) $hint"
refuse_layout no_colon '0 0\n' "line 1: no ':' $hint"
refuse_layout twice '0: 0\n1: 0\n0: 0\n' "line 3: query block 0 (head 0) is listed twice (first on line 1): merge the two rows $hint"

# 2. Size: an 18-byte file that implies 2^36 rows is refused at its line, before any row is
#    allocated; a file over 256 MiB is refused unread (a sparse file: no disk used).
refuse_layout rows_18_bytes '65535/1048575: 0\n' "line 1: 65536 heads x 1048576 query blocks is more than the 2^20 rows a layout may have: use fewer heads, fewer blocks or a larger --block $hint"
truncate -s 257M "$work/big.txt"
expect_exact_error "a 257 MiB layout file" "error: --layout-file $work/big.txt holds 269484032 bytes, more than the 268435456 it may hold: give a text file of 'Q: K K ...' lines of at most 256 MiB (at most 2^20 rows)" \
    "$work/out_big" tests/last_wins.sh ./build/train "${tiny[@]}" "${bs[@]}" --layout-file "$work/big.txt" --out "$work/out_big"
rm -f "$work/big.txt"
expect_exact_error "a directory as a layout file" "error: --layout-file $work is a directory, not a regular file: only regular files are read (save a stream to a file first and give that)" \
    "$work/out_dir" tests/last_wins.sh ./build/train "${tiny[@]}" "${bs[@]}" --layout-file "$work" --out "$work/out_dir"
expect_exact_error "a missing layout file" "error: --layout-file $work/none.txt: cannot open it (No such file or directory): give a text file of 'Q: K K ...' lines of at most 256 MiB (at most 2^20 rows)" \
    "$work/out_none" tests/last_wins.sh ./build/train "${tiny[@]}" "${bs[@]}" --layout-file "$work/none.txt" --out "$work/out_none"

# 3. One rule for the file and the checkpoint: the last query block the file may name
#    (2^20 - 1) trains a step and its checkpoint loads in infer; the next one is refused (it was
#    accepted up to 2^24 while checkpoints refused n_blocks past 2^24: train wrote what infer refused).
printf '0: 0\n1048575: 0 1048575\n' > "$work/limit.txt"
if tests/last_wins.sh ./build/train "${tiny[@]}" "${bs[@]}" --layout-file "$work/limit.txt" --out "$work/limit" > "$work/limit.log" 2>&1 \
   && grep -qa 'n_blocks\\":1048576,' "$work/limit/"ckpt_*.safetensors \
   && ./build/infer --checkpoint "$work/limit" --prompt "In the" --max-new 4 > "$work/limit_gen.log" 2>&1; then
    pass "a layout at the limit (query block 1048575) trains a step and its checkpoint loads in infer"
else
    fail "a layout at the limit: $(tail -n 2 "$work/limit.log" "$work/limit_gen.log" 2>/dev/null | tr '\n' ' ')"
fi
refuse_layout past_limit '0: 0\n1048576: 0\n' "line 2: query block '1048576' is out of range: query blocks are numbered 0 to 1048575 (2^20 - 1) $hint"
refuse_layout old_limit '0: 0\n16777216: 0\n' "line 2: query block '16777216' is out of range: query blocks are numbered 0 to 1048575 (2^20 - 1) $hint"

# 4. Heads: a per-head layout names every head of the model once, 0 to H-1. One
#    naming only head 0 of two gave head 0's rows to both heads; a head left out kept nothing.
two=(--width 128 --heads 2)  # head dim 64
refuse_heads() {  # name, file contents, the whole message
    local name=$1 text=$2 msg=$3 f="$work/$1.txt"
    printf -- "$text" > "$f"
    expect_exact_error "heads $name" "${msg//FILE/$f}" "$work/out_$name" \
        tests/last_wins.sh ./build/train "${tiny[@]}" "${two[@]}" "${bs[@]}" --layout-file "$f" --out "$work/out_$name"
}
refuse_heads one_of_two '0/0: 0\n0/1: 0 1\n' "error: the per-head layout FILE names only head 0 but not head 1 of the 2: give every head its 'H/Q: ...' rows (heads 0 to 1), or one layout for all heads ('Q: ...' rows) (the model's heads)"
refuse_heads gap '0/0: 0\n2/0: 0\n2/1: 1\n' "error: --layout-file FILE: the per-head layout names heads up to 2 but not head 1: give every head its 'H/Q: K K ...' rows (heads 0 to 2; an empty row 'H/Q:' keeps nothing), or use 'Q: K K ...' rows for one layout for all heads"
refuse_heads three_of_two '0/0: 0\n1/0: 0\n2/0: 0\n' "error: the per-head layout FILE names head 2 but there are 2 heads (0 to 1): give rows for heads 0 to 1 only, or one layout for all heads ('Q: ...' rows) (the model's heads)"
refuse_heads repeated '0/0: 0\n1/0: 0\n1/1: 0 1\n1/0: 0\n' "error: --layout-file FILE line 4: query block 0 (head 1) is listed twice (first on line 2): merge the two rows $hint"
expect_exact_error "heads: attention_tool --H 2, a per-head layout naming only head 0" \
    "error: the per-head layout $work/one_of_two.txt names only head 0 but not head 1 of the 2: give every head its 'H/Q: ...' rows (heads 0 to 1), or one layout for all heads ('Q: ...' rows) (--H)" \
    "$work/tool_one_of_two.safetensors" ./build/attention_tool --pattern block-sparse --block 4 --layout-file "$work/one_of_two.txt" \
    --N 32 --H 2 --out "$work/tool_one_of_two.safetensors"
# Accepted: both heads named (one by an empty row), a shared layout with two heads, and the
# per-head form naming head 0 of a one-head model.
printf '0/0: 0\n0/1: 0 1\n1/0:\n' > "$work/both_heads.txt"
printf '0/0: 0\n0/1: 1\n' > "$work/head0_of_one.txt"
heads_ok() {  # name, file, model flags...
    local name=$1 f=$2; shift 2
    if tests/last_wins.sh ./build/train "${tiny[@]}" "$@" "${bs[@]}" --layout-file "$f" --out "$work/ok_$name" > "$work/ok_$name.log" 2>&1; then
        pass "heads: $name trains"
    else
        fail "heads: $name refused: $(tail -n 2 "$work/ok_$name.log")"
    fi
}
heads_ok "a per-head layout naming both heads of two" "$work/both_heads.txt" "${two[@]}"
printf '0: 0\n1: 0 1\n' > "$work/shared.txt"
heads_ok "a shared layout with two heads" "$work/shared.txt" "${two[@]}"
heads_ok "a per-head layout naming head 0 of one" "$work/head0_of_one.txt" --heads 1

# 5. Empty rows are legal (docs/attention-spec.md, "Empty rows" and block-sparse's special cases:
#    O = 0, L = -inf, no NaN): a layout file alone that lists nothing for query block 1 trains.
printf '0: 0\n2: 0 2\n' > "$work/gap_row.txt"
if tests/last_wins.sh ./build/train "${tiny[@]}" --attn block-sparse --block 4 --layout-file "$work/gap_row.txt" --out "$work/gap_row" \
        > "$work/gap_row.log" 2>&1 && ! grep -qiE 'nan|inf' "$work/gap_row/metrics.csv"; then
    pass "a layout with an unlisted query block (an empty row, legal by the spec) trains, finite loss"
else
    fail "a layout with an unlisted query block: $(tail -n 2 "$work/gap_row.log")"
fi

# 6. A pattern's flags with no layer of that pattern are refused, not ignored.
printf '0: 0\n1: 0 1\n' > "$work/good.txt"
unused() {  # name, flag, pattern, command...
    local name=$1 flag=$2 pattern=$3 out=$work/out_unused_$1; shift 3
    expect_exact_error "unused $name" "error: --$flag has no effect without --attn $pattern (no layer is $pattern): add $pattern to --attn, or drop --$flag" \
        "$out" "$@" --out "$out"
}
unused layout_file layout-file block-sparse tests/last_wins.sh ./build/train "${tiny[@]}" --layout-file "$work/good.txt"
unused window window block-sparse tests/last_wins.sh ./build/train "${tiny[@]}" --attn fixed --window 8
unused block block block-sparse tests/last_wins.sh ./build/train "${tiny[@]}" --attn dilated --segments 8,16 --dilations 1,2 --block 8
unused random random-blocks block-sparse tests/last_wins.sh ./build/train "${tiny[@]}" --random-blocks 1,2
unused all_dense block block-sparse tests/last_wins.sh ./build/train "${tiny[@]}" "${bs[@]}" --layer-pattern 0:dense,1:dense
unused stride stride fixed tests/last_wins.sh ./build/train "${tiny[@]}" "${bs[@]}" --stride 16
unused segments segments dilated tests/last_wins.sh ./build/train "${tiny[@]}" --segments 8,16
# ... but flags of a pattern some layer has pass: --attn lists, --layer-pattern.
if tests/last_wins.sh ./build/train "${tiny[@]}" --attn dense,fixed --stride 16 --summary 4 --layers 2 --layer-pattern 0:dilated --segments 8,16 --dilations 1,2 \
        --out "$work/used" > "$work/used.log" 2>&1; then
    pass "--stride with --attn dense,fixed and --segments with --layer-pattern 0:dilated train"
else
    fail "flags of patterns in use refused: $(tail -n 2 "$work/used.log")"
fi
tool_unused() {  # name, flag, pattern, pattern given, tool flags...
    local name=$1 flag=$2 pattern=$3 given=$4; shift 4
    expect_exact_error "attention_tool unused $name" \
        "error: --$flag has no effect without --pattern $pattern (no layer is $pattern): add $pattern to --pattern, or drop --$flag" \
        "$work/tool_$name.safetensors" ./build/attention_tool --pattern "$given" "$@" --N 32 --H 1 --out "$work/tool_$name.safetensors"
}
tool_unused window window block-sparse dense --window 8
tool_unused layout layout-file block-sparse dilated --segments 16 --dilations 1 --layout-file "$work/good.txt"
tool_unused summary summary fixed block-sparse --block 4 --window 8 --summary 2

summary
