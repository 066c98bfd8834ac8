#!/usr/bin/env bash
# scripts/copy_screen.sh with a stand-in for scripts/copy_circuit.sh (COPY_CIRCUIT) that records the
# settings each run got and prints a run's output as copy_circuit.sh prints it, its numbers made from
# the settings: every config runs on every GPU with seed g + 1, a config's VAR=VALUE pairs reach its
# runs only (a value with spaces included), the bench's defaults reach the rest, and the table has
# one row a run with the copy loss on the repeat by gap, quotes (control), validation loss and
# speed, by variant (VARIANTS: several a run). A run that fails fails the call and still gets its
# row; bad configs are refused.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/lib.sh
source tests/lib.sh
work=$PWD/build/test_copy_screen
rm -rf "$work" && mkdir -p "$work"
stub=$work/circuit.sh
cat > "$stub" <<'STUB'
#!/usr/bin/env bash
echo "$CUDA_VISIBLE_DEVICES|$SEED|${QKCONV:-4}|$LR_SEEN|$QKCONV_LAYERS|$BATCH|$MODEL_ARGS|$*" >> "$CALLS"
echo "$WORK" >> "$CALLS.work"
[ "${FAIL_QK:-none}" = "${QKCONV:-4}" ] && { echo "train: out of memory"; exit 3; }
q=${QKCONV:-4} n=0
for v in "$@"; do
    n=$((n + 1))
    echo "== $v: done: 2400 steps, val loss 1.9$q$SEED, 49${q}00$n tokens/s, 2m40s in training steps"
    echo "       gap  samples  passage      first     repeat   repeat 2nd"
    echo "        16       16      256     1.7658     0.4$q$SEED       0.3984"
    echo "        2K       16      256     2.1368     0.$n$q$SEED       0.7109"
    echo "  quote | 2K 6$q.0% (30/50)"
    echo "  quote-control | 2K 1$SEED.0% (6/50)"
    echo "  quote against quote-control (%): | 2K 6$q vs 1$SEED"
done
STUB
chmod +x "$stub"
export COPY_CIRCUIT=$stub CALLS=$work/calls.txt OUT=$work/out SCREEN_DIR=$work/screen SCREEN_WORK=$work/wk CARRY=$work/nocarry GPUS=2 LR_SEEN=-
mkdir -p "$OUT"

: > "$CALLS"
out=$(scripts/copy_screen.sh C H:QKCONV=8 'W:QKCONV=2;MODEL_ARGS=--layers 2 --width 64 --heads 1' 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(wc -l < "$CALLS")" -eq 6 ] && pass "three configs on two GPUs: six runs" || fail "runs: exit $rc, calls: $(cat "$CALLS"); $out"
[ "$(grep -c '^0|1|' "$CALLS")" -eq 3 ] && [ "$(grep -c '^1|2|' "$CALLS")" -eq 3 ] \
    && pass "GPU 0 runs seed 1, GPU 1 seed 2" || fail "seeds by GPU: $(cat "$CALLS")"
grep -qx '0|1|4|-|3,5|16|--layers 6 --width 384 --heads 3 --attn-sink|hybrid-qkconv' "$CALLS" \
    && pass "C: the bench's defaults (W 4 in layers 3 and 5, 16 windows, readsinkhd128's model)" || fail "C's settings: $(cat "$CALLS")"
grep -qx '1|2|8|-|3,5|16|--layers 6 --width 384 --heads 3 --attn-sink|hybrid-qkconv' "$CALLS" \
    && pass "H: QKCONV=8 reaches its runs, the rest stays the bench's" || fail "H's settings: $(cat "$CALLS")"
grep -qx '0|1|2|-|3,5|16|--layers 2 --width 64 --heads 1|hybrid-qkconv' "$CALLS" \
    && pass "W: two settings, one with spaces, reach its runs" || fail "W's settings: $(cat "$CALLS")"
row() { grep -F "| $1 |" "$SCREEN_DIR/table.md"; }
[ "$(row H_s2)" = "| H_s2 | hybrid-qkconv | 0.482 | 0.182 | 68.0 (12.0) | 1.982 | 498001 |" ] \
    && [ "$(row C_s1)" = "| C_s1 | hybrid-qkconv | 0.441 | 0.141 | 64.0 (11.0) | 1.941 | 494001 |" ] \
    && [ "$(head -n 1 "$OUT/table.md")" = "| run | variant | gap 16 | gap 2K | quote (control) % | val loss | tokens/s |" ] \
    && [ "$(grep -c '^| [CHW]_s[12] |' "$OUT/table.md")" -eq 6 ] \
    && pass "the table: a row a run, the repeat's loss by gap, quotes (control), validation loss, speed" \
    || fail "table: $(cat "$SCREEN_DIR/table.md")"
[ -f "$SCREEN_DIR/W_s2.log" ] && grep -q 'call copy_screen' <<< "$out" && pass "each run's output in SCREEN_DIR/NAME_sS.log" || fail "logs: $(ls "$SCREEN_DIR")"
# A device call brings back 8 files at most: OUT holds the table and one archive of everything.
[ "$(ls "$OUT" | tr '\n' ' ')" = "copy_screen.tgz table.md " ] && cmp -s "$OUT/table.md" "$SCREEN_DIR/table.md" \
    && grep -qx 'screen/W_s2.log' <<< "$(tar -tzf "$OUT/copy_screen.tgz")" \
    && pass "OUT: the table and copy_screen.tgz with every run's files, two files" || fail "OUT: $(ls "$OUT" | tr '\n' ' '); $(tar -tzf "$OUT/copy_screen.tgz" | head -3 | tr '\n' ' ')"

: > "$CALLS"
out=$(FAIL_QK=8 scripts/copy_screen.sh C H:QKCONV=8 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q '^H_s1: exit 3 (train: out of memory)' <<< "$out" \
    && [ "$(row C_s2)" = "| C_s2 | hybrid-qkconv | 0.442 | 0.142 | 64.0 (12.0) | 1.942 | 494001 |" ] \
    && [ "$(row H_s1)" = "| H_s1 | - | - | - | - (-) | - | - |" ] \
    && pass "a failed run fails the call, names its cause, and keeps its row" || fail "a failed run: exit $rc: $out; $(cat "$SCREEN_DIR/table.md")"

# VARIANTS: each run trains them all side by side, a row each; QKCONV_LAYERS= (empty) reaches the runs empty.
: > "$CALLS"
out=$(VARIANTS="hybrid-qkconv torch-qkconv-diff" QKCONV_LAYERS='' scripts/copy_screen.sh D 2>&1); rc=$?
[ $rc -eq 0 ] && grep -qx '1|2|4|-||16|--layers 6 --width 384 --heads 3 --attn-sink|hybrid-qkconv torch-qkconv-diff' "$CALLS" \
    && [ "$(grep -F '| D_s1 | torch-qkconv-diff |' "$SCREEN_DIR/table.md")" = "| D_s1 | torch-qkconv-diff | 0.441 | 0.241 | 64.0 (11.0) | 1.941 | 494002 |" ] \
    && [ "$(grep -c '^| D_s[12] |' "$SCREEN_DIR/table.md")" -eq 4 ] \
    && pass "VARIANTS: each run trains every variant named, a row each; an empty QKCONV_LAYERS stays empty" \
    || fail "VARIANTS: exit $rc, calls $(cat "$CALLS"); $(cat "$SCREEN_DIR/table.md")"

# A config screened before into the same folder: its checkpoints are there, and train would refuse
# them one run at a time; the screen refuses at once, before any run, naming the way out.
grep -qx "$work/wk/H_s2" "$CALLS.work" && pass "each run's checkpoints in SCREEN_WORK/NAME_sS" || fail "WORK: $(sort -u "$CALLS.work" | tr '\n' ' ')"
mkdir -p "$work/wk/H_s2/hybrid-qkconv" && touch "$work/wk/H_s2/hybrid-qkconv/ckpt_00002400.safetensors"
: > "$CALLS"
out=$(scripts/copy_screen.sh C H:QKCONV=8 2>&1); rc=$?
[ $rc -eq 2 ] && [[ $out == "error: config H was screened at seed 2 before into $SCREEN_DIR"*"set SCREEN_DIR to a new folder"* ]] \
    && [ "$(wc -l <<< "$out")" -eq 1 ] && [ ! -s "$CALLS" ] \
    && pass "a config screened before into SCREEN_DIR: refused in one line before any run" || fail "screened twice: exit $rc: $out; calls $(cat "$CALLS")"
: > "$CALLS"
out=$(SEED0=3 scripts/copy_screen.sh H:QKCONV=8 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(cut -d'|' -f2 "$CALLS" | sort | tr '\n' ' ')" = "3 4 " ] \
    && pass "the same config and folder at other seeds (SEED0=3) runs" || fail "other seeds: exit $rc: $out"
out=$(SCREEN_DIR=$work/screen2 SCREEN_WORK='' scripts/copy_screen.sh H:QKCONV=8 2>&1); rc=$?
[ $rc -eq 0 ] && grep -qx "out/screen/screen2/H_s1" "$CALLS.work" \
    && pass "another SCREEN_DIR: the same config runs again, its checkpoints in out/screen/<its name>" || fail "a new SCREEN_DIR: exit $rc: $out"

# SEED0: the seeds after the first screen's, the same configs again (GPU g: SEED0 + g).
: > "$CALLS"
out=$(SEED0=3 scripts/copy_screen.sh C 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(cut -d'|' -f1,2 "$CALLS" | sort | tr '\n' ' ')" = "0|3 1|4 " ] && [ -n "$(row C_s4)" ] \
    && pass "SEED0=3: GPU 0 runs seed 3, GPU 1 seed 4, rows C_s3 and C_s4" || fail "SEED0: exit $rc: $(cat "$CALLS"); $out"
# SEEDS_PER_GPU: one GPU runs several seeds side by side (GPU g: SEED0 + g*n ... + n-1).
: > "$CALLS"
out=$(GPUS=1 SEEDS_PER_GPU=2 SEED0=5 scripts/copy_screen.sh C 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(cut -d'|' -f1,2 "$CALLS" | sort | tr '\n' ' ')" = "0|5 0|6 " ] && [ -n "$(row C_s6)" ] \
    && pass "SEEDS_PER_GPU=2 on one GPU: seeds 5 and 6 side by side on GPU 0" || fail "SEEDS_PER_GPU: exit $rc: $(cat "$CALLS"); $out"
: > "$CALLS"
out=$(SEEDS_PER_GPU=2 SEED0=7 scripts/copy_screen.sh C 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(cut -d'|' -f1,2 "$CALLS" | sort | tr '\n' ' ')" = "0|7 0|8 1|10 1|9 " ] \
    && pass "SEEDS_PER_GPU=2 on two GPUs: 7-8 on GPU 0, 9-10 on GPU 1" || fail "SEEDS_PER_GPU on 2: exit $rc: $(cat "$CALLS"); $out"
out=$(SEEDS_PER_GPU=0 scripts/copy_screen.sh C 2>&1); rc=$?
[ $rc -eq 2 ] && [[ $out == "error: SEEDS_PER_GPU '0'"* ]] && pass "SEEDS_PER_GPU=0: refused in one line" || fail "SEEDS_PER_GPU=0: exit $rc: $out"
out=$(SEED0=x scripts/copy_screen.sh C 2>&1); rc=$?
[ $rc -eq 2 ] && [[ $out == "error: SEED0 'x'"* ]] && pass "SEED0 not a number: refused in one line" || fail "SEED0=x: exit $rc: $out"

for args in "" "H:qkconv=8" ":QKCONV=8" "H:QKCONV" "H:QKCONV=8;bad"; do
    # shellcheck disable=SC2086
    out=$(scripts/copy_screen.sh ${args:+"$args"} 2>&1); rc=$?
    [ $rc -eq 2 ] && [[ $out == usage:* || $out == error:* ]] && [ "$(wc -l <<< "$out")" -eq 1 ] \
        && pass "refused: copy_screen.sh '$args'" || fail "copy_screen.sh '$args': exit $rc: $out"
done
out=$(GPUS='' PATH=/usr/bin:/bin scripts/copy_screen.sh C 2>&1); rc=$?
if command -v nvidia-smi > /dev/null; then echo "skip: no GPU (this machine has nvidia-smi)"
else [ $rc -eq 1 ] && [[ $out == error:* ]] && pass "no GPU: one line naming GPUS" || fail "no GPU: exit $rc: $out"; fi
summary
