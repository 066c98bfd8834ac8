#!/usr/bin/env bash
# End-to-end tests of build/train and build/infer on a small prepared corpus (made by
# tests/test_data_cli.sh): a short training run, exact resume after a kill, generation and
# perplexity, and every kind of bad input (one-line error, non-zero exit, nothing lost).
# Usage: tests/test_train_cli.sh [CORPUS_DIR]   Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
corpus=${1:-build/test_corpus}
work=build/test_train_cli
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
for bin in build/train build/infer; do [ -x $bin ] || bail "$bin not built"; done
[ -f "$corpus/train.bin" ] || bail "no corpus at $corpus (run tests/test_data_cli.sh first)"

# A tiny model: 2 blocks, width 64, one head of 64, windows of 32.
tiny=(--data "$corpus" --layers 2 --width 64 --heads 1 --seq-len 32 --batch 4 --steps 20 --warmup 4 --lr 3e-3
      --val-every 10 --val-batches 2 --ckpt-every 10 --log-every 5 --sample-tokens 0)

# 1. A run that trains: loss falls, checkpoints and metrics appear.
if tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/full" > "$work/full.log" 2>&1; then
    first=$(awk -F, '$1 == 1 && $2 == "train" { print $3 }' "$work/full/metrics.csv")
    last=$(awk -F, '$1 == 20 && $2 == "train" { print $3 }' "$work/full/metrics.csv")
    if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }'; then pass "training lowers the loss ($first -> $last)"
    else fail "training did not lower the loss ($first -> $last)"; fi
    [ -f "$work/full/ckpt_00000010.safetensors" ] && [ -f "$work/full/ckpt_00000020.safetensors" ] \
        && pass "checkpoints at steps 10 and 20" || fail "checkpoints missing"
    grep -q "tok/s" "$work/full.log" && grep -q "ETA" "$work/full.log" && grep -q "val loss" "$work/full.log" \
        && pass "progress line has loss, tok/s, ETA; val loss printed" || fail "progress line incomplete"
else
    fail "training run failed: $(tail -3 "$work/full.log")"
fi

# 2. Killed right after step 13 (checkpoint at 10), resumed: exactly the same losses.
{ (LNGPT_KILL_AT_STEP=13 exec tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/resumed") > "$work/killed.log" 2>&1; } 2>/dev/null
code=$?
[ $code -eq 137 ] && pass "kill hook ended the run (exit $code)" || fail "kill hook: exit $code"
if tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/resumed" --resume > "$work/resume.log" 2>&1; then
    if diff <(cut -d, -f1-3 "$work/full/metrics.csv") <(cut -d, -f1-3 "$work/resumed/metrics.csv") > "$work/resume.diff"; then
        pass "resumed run reproduces every train and val loss bit for bit"
    else
        fail "resumed losses differ: $(head -4 "$work/resume.diff" | tr '\n' ' ')"
    fi
    cmp -s "$work/full/ckpt_00000020.safetensors" "$work/resumed/ckpt_00000020.safetensors" \
        && pass "final checkpoints are byte-identical" || fail "final checkpoints differ"
else
    fail "resume failed: $(tail -2 "$work/resume.log")"
fi

# 2a. --init-from: a fresh run (step 0, new optimizer) from another run's weights, here at twice
# the window with a dilated pattern (attention has no weights): its first loss is near the trained
# model's last, far below a fresh start's.
if tests/last_wins.sh ./build/train "${tiny[@]}" --steps 2 --seq-len 64 --attn dilated --segments 16,32 --dilations 1,2 --init-from "$work/full" \
        --out "$work/init" > "$work/init.log" 2>&1; then
    a=$(awk -F, '$1 == 1 && $2 == "train" { print $3 }' "$work/init/metrics.csv")
    fresh=$(awk -F, '$1 == 1 && $2 == "train" { print $3 }' "$work/full/metrics.csv")
    if grep -q "^weights from $work/full/ckpt_00000020.safetensors" "$work/init.log" && awk -v a="$a" -v f="$fresh" 'BEGIN { exit !(a < f - 0.3) }'; then
        pass "--init-from: a dilated run at T = 64 starts from the dense T = 32 run's weights (first loss $a, fresh $fresh)"
    else
        fail "--init-from: first loss '$a' vs fresh '$fresh': $(grep -m1 weights "$work/init.log")"
    fi
else
    fail "--init-from run failed: $(tail -2 "$work/init.log")"
fi

# 2b. Gradient checkpointing: --recompute full recomputes every block in the backward and
# reproduces the default run's losses bit for bit; the memory plan is printed.
if tests/last_wins.sh ./build/train "${tiny[@]}" --recompute full --out "$work/rc_full" > "$work/rc_full.log" 2>&1; then
    diff <(cut -d, -f1-3 "$work/full/metrics.csv") <(cut -d, -f1-3 "$work/rc_full/metrics.csv") > /dev/null \
        && pass "--recompute full reproduces every train and val loss bit for bit" || fail "--recompute full: losses differ"
    grep -q "^memory plan for B = 4 x T = 32" "$work/rc_full.log" && grep -q "^  full .*<- chosen" "$work/rc_full.log" \
        && pass "the memory plan is printed, full chosen" || fail "no memory plan in the log"
    grep -q "^  none .*<- chosen" "$work/full.log" && pass "--recompute auto chooses none when it fits" \
        || fail "auto did not choose none: $(grep chosen "$work/full.log")"
else
    fail "--recompute full run failed: $(tail -3 "$work/rc_full.log")"
fi

# 3. Inference: deterministic generation by seed, perplexity over a file.
gen() { ./build/infer --checkpoint "$work/full" --prompt "In the beginning" --max-new 24 --seed "$1" 2>/dev/null; }
a=$(gen 7) b=$(gen 7) c=$(gen 8)
[ -n "$a" ] && [ "$a" == "$b" ] && pass "generation is reproducible by seed" || fail "generation not reproducible"
[ "$a" != "$c" ] && pass "another seed gives other text" || fail "seed has no effect"
printf 'In the beginning God created the heaven and the earth.\n%.0s' {1..40} > "$work/ppl.txt"
out=$(./build/infer --checkpoint "$work/full" --perplexity "$work/ppl.txt" 2>/dev/null)
# The loss must be a number (a NaN would print "nan") between 0 and log(V) plus a margin, and
# the perplexity exp(loss).
if echo "$out" | awk '{ for (i = 1; i < NF; i++) { if ($i == "loss") l = $(i+1); if ($i == "perplexity") p = $(i+1) } }
        END { ok = l ~ /^[0-9]+\.[0-9]+$/ && p ~ /^[0-9]+\.[0-9]+$/ && l > 0 && l < 8 && (p / exp(l) - 1)^2 < 1e-4; exit !ok }'; then
    pass "perplexity mode: $(echo "$out" | grep -o 'loss [0-9.]* nats/token | perplexity [0-9.]*')"
else
    fail "perplexity mode: $out"
fi

# 3b. A dilated (LongNet) model with one dense layer trains, and its checkpoint carries the
#     per-layer patterns to infer.
dil=(--attn dilated --segments 16,32,64 --dilations 1,2,4 --layer-pattern 1:dense)
if tests/last_wins.sh ./build/train "${tiny[@]}" "${dil[@]}" --steps 10 --out "$work/dilated" > "$work/dilated.log" 2>&1 \
   && ./build/infer --checkpoint "$work/dilated" --prompt "In the" --max-new 8 > "$work/dilated_gen.log" 2>&1; then
    pass "dilated model trains and generates ($(grep -o 'val loss [0-9.]*' "$work/dilated.log" | tail -1))"
else
    fail "dilated model: $(tail -2 "$work/dilated.log" "$work/dilated_gen.log" | tr '\n' ' ')"
fi

# 4. Bad input: one line on stderr starting with "error:" that names the culprit, exit != 0,
#    and the files already in --out unchanged.
snapshot() { (cd "$1" && find . -type f | sort | xargs sha256sum) 2>/dev/null; }
before=$(snapshot "$work/full")
mkdir -p "$work/bad"
cp "$corpus"/{train.bin,val.bin,tokenizer.model} "$work/bad/"
head -c 100 "$corpus/train.bin" > "$work/bad/train.bin"
mkdir -p "$work/badtok"
cp "$corpus"/{train.bin,val.bin} "$work/badtok/" && echo "not a model" > "$work/badtok/tokenizer.model"
head -c 5000 "$work/full/ckpt_00000020.safetensors" > "$work/truncated.safetensors"
expect_error "bad input: heads do not divide width" "--heads" tests/last_wins.sh ./build/train "${tiny[@]}" --heads 3 --out "$work/x1"
expect_error "bad input: unsupported head dim" "head dim" tests/last_wins.sh ./build/train "${tiny[@]}" --heads 2 --out "$work/x1"
expect_error "bad input: zero steps" "--steps" tests/last_wins.sh ./build/train "${tiny[@]}" --steps 0 --out "$work/x1"
expect_error "bad input: window longer than the data" "--seq-len" tests/last_wins.sh ./build/train "${tiny[@]}" --seq-len 10000000 --out "$work/x1"
expect_error "bad input: unknown flag" "--bogus" tests/last_wins.sh ./build/train "${tiny[@]}" --bogus 1 --out "$work/x1"
expect_error "bad input: malformed number" "--lr" tests/last_wins.sh ./build/train "${tiny[@]}" --lr fast --out "$work/x1"
expect_error "bad input: missing corpus" "tokenizer.model" tests/last_wins.sh ./build/train "${tiny[@]}" --data "$work/nothing_here" --out "$work/x1"
expect_error "bad input: corrupt shard" "train.bin" tests/last_wins.sh ./build/train "${tiny[@]}" --data "$work/bad" --out "$work/x1"
expect_error "bad input: corrupt tokenizer" "tokenizer.model" tests/last_wins.sh ./build/train "${tiny[@]}" --data "$work/badtok" --out "$work/x1"
expect_error "bad input: out dir holds a run" "--resume" tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/full"
expect_error "bad input: resume with other flags" "--resume" tests/last_wins.sh ./build/train "${tiny[@]}" --steps 30 --out "$work/full" --resume
expect_error "bad input: resume with nothing to resume" "--resume" tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/x2" --resume
expect_error "bad input: dilation above its segment" "dilation 64 exceeds its segment 32" tests/last_wins.sh ./build/train "${tiny[@]}" --attn dilated --segments 16,32 --dilations 1,64 --out "$work/x1"
expect_error "bad input: segment and dilation lists differ" "--dilations has 1" tests/last_wins.sh ./build/train "${tiny[@]}" --attn dilated --segments 16,32 --dilations 1 --out "$work/x1"
expect_error "bad input: zero segment" "must be positive" tests/last_wins.sh ./build/train "${tiny[@]}" --attn dilated --segments 0 --dilations 1 --out "$work/x1"
expect_error "bad input: malformed segment list" "--segments" tests/last_wins.sh ./build/train "${tiny[@]}" --attn dilated --segments 16,x --out "$work/x1"
expect_error "bad input: --layer-pattern layer out of range" "--layer-pattern: layer 5 does not exist" tests/last_wins.sh ./build/train "${tiny[@]}" --attn dilated --layer-pattern 5:dense --out "$work/x1"
expect_error "bad input: unknown pattern" "--attn" tests/last_wins.sh ./build/train "${tiny[@]}" --attn sparse --out "$work/x1"
expect_error "bad input: unknown device" "--device" tests/last_wins.sh ./build/train "${tiny[@]}" --device tpu --out "$work/x1"
expect_error "bad input: missing checkpoint" "checkpoint" ./build/infer --checkpoint "$work/nothing.safetensors" --prompt hi
expect_error "bad input: truncated checkpoint" "truncated.safetensors" ./build/infer --checkpoint "$work/truncated.safetensors" --prompt hi
expect_error "bad input: bad top-p" "--top-p" ./build/infer --checkpoint "$work/full" --top-p 2
expect_error "bad input: missing perplexity file" "no_such_file" ./build/infer --checkpoint "$work/full" --perplexity "$work/no_such_file"
expect_error "bad input: non-finite --lr" "--lr" tests/last_wins.sh ./build/train "${tiny[@]}" --lr inf --out "$work/x1"
expect_error "bad input: --layers 1000000" "--layers" tests/last_wins.sh ./build/train "${tiny[@]}" --layers 1000000 --out "$work/x1"
expect_error "bad input: --width 2147483584 --heads 33554431" "--width" tests/last_wins.sh ./build/train "${tiny[@]}" --width 2147483584 --heads 33554431 --out "$work/x1"
expect_error "bad input: --seq-len 2^31-1" "--seq-len" tests/last_wins.sh ./build/train "${tiny[@]}" --seq-len 2147483647 --out "$work/x1"
expect_error "bad input: --batch x --seq-len overflow" "--batch" tests/last_wins.sh ./build/train "${tiny[@]}" --batch 2147483647 --seq-len 200000000 --out "$work/x1"
expect_error "bad input: --max-bad-steps 0" "--max-bad-steps" tests/last_wins.sh ./build/train "${tiny[@]}" --max-bad-steps 0 --out "$work/x1"
expect_error "bad input: unknown recompute policy" "--recompute" tests/last_wins.sh ./build/train "${tiny[@]}" --recompute some --out "$work/x1"
# 1 MiB for activations: no policy fits; the error says what would, before --out exists.
expect_error "bad input: step larger than memory" "what fits: none: --seq-len <= " tests/last_wins.sh ./build/train "${tiny[@]}" --memory-cap 0.001 --out "$work/x_oom"
expect_error "bad input: negative --memory-cap" "--memory-cap" tests/last_wins.sh ./build/train "${tiny[@]}" --memory-cap -1 --out "$work/x1"
[ ! -e "$work/x_oom" ] && pass "nothing written by the run that did not fit" || fail "the run that did not fit wrote $work/x_oom"

# A shard whose header declares a larger vocabulary than the tokenizer's, with an id past the
# tokenizer's vocabulary as the very last token (a target only). Once: a segfault (an
# out-of-bounds write in the classifier), or training on corrupted memory.
mkdir -p "$work/oov"
cp "$corpus"/{val.bin,tokenizer.model} "$work/oov/"
python3 - "$corpus/train.bin" "$work/oov/train.bin" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
vocab, = struct.unpack_from("<I", b, 32)
struct.pack_into("<I", b, 32, vocab + 100)        # header vocab: tokenizer's + 100
struct.pack_into("<H", b, len(b) - 2, vocab + 50)  # last token: past the tokenizer's vocab
open(sys.argv[2], "wb").write(bytes(b))
PY
expect_error "bad input: shard vocab above the tokenizer's (token >= V as the last target)" "oov/train.bin declares a vocabulary" \
    tests/last_wins.sh ./build/train "${tiny[@]}" --data "$work/oov" --out "$work/x1"

[ "$before" == "$(snapshot "$work/full")" ] && pass "bad inputs left the existing run's files untouched" || fail "existing files changed"
[ ! -e "$work/x1" ] && pass "bad inputs created no output directory" || fail "a failed run created $work/x1"

# 5. Hostile checkpoints: each edit of a good checkpoint must be refused by infer and by
#    train --resume with one line naming the file, and leave the run's files as they were.
edit() { python3 tests/edit_checkpoint.py "$work/full/ckpt_00000020.safetensors" "$@"; }
hostile() {  # name, pattern, edit args...
    local name=$1 pattern=$2; shift 2
    rm -rf "$work/hostile" && mkdir -p "$work/hostile"
    cp "$work/full/ckpt_00000010.safetensors" "$work/full/metrics.csv" "$work/hostile/"
    edit "$work/hostile/ckpt_00000020.safetensors" "$@"
    local keep; keep=$(snapshot "$work/hostile")
    expect_error "bad input: infer: $name" "$pattern" ./build/infer --checkpoint "$work/hostile" --prompt hi --max-new 4
    expect_error "bad input: train --resume: $name" "$pattern" tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/hostile" --resume
    [ "$keep" == "$(snapshot "$work/hostile")" ] || fail "$name: the refused run changed files in its --out"
}
hostile "\\uZZZZ in the metadata" "corrupt" meta format '"\uZZZZ"'
hostile "\\uZZZZ in train_args" "train_args are corrupt" train_arg seed '"\uZZZZ"'
hostile "train_args not JSON" "train_args are corrupt" meta train_args '"garbage{"'
hostile "step -7" '"step" is "-7"' meta step '"-7"'
hostile "NaN in an AdamW moment" "AdamW moments" tensor optim.v.wte nan
hostile "config n_embd 2^30" "--width" meta config '"{\"vocab_size\":512,\"n_layer\":2,\"n_embd\":1073741824,\"n_head\":1,\"rope_theta\":10000,\"layer_attn\":[]}"'
hostile "config n_layer 2e8" "--layers" meta config '"{\"vocab_size\":512,\"n_layer\":200000000,\"n_embd\":64,\"n_head\":1,\"rope_theta\":10000,\"layer_attn\":[]}"'
hostile "config n_embd 1e300" "n_embd" meta config '"{\"vocab_size\":512,\"n_layer\":2,\"n_embd\":1e300,\"n_head\":1,\"rope_theta\":10000,\"layer_attn\":[]}"'
# A layout other than the model's, or values out of range: refused by infer, --resume and
# --init-from alike (the one reader, load_checkpoint), naming the tensor; --init-from writes nothing.
hostile_layout() {  # name, pattern, edit args...
    hostile "$@"
    rm -rf "$work/x_init"
    expect_error "bad input: train --init-from: $1" "$2" tests/last_wins.sh ./build/train "${tiny[@]}" --steps 1 --init-from "$work/hostile" --out "$work/x_init"
    [ ! -e "$work/x_init" ] || fail "$1: the refused --init-from made $work/x_init"
}
hostile_layout "an unknown extra tensor" 'holds a tensor "blocks.0.attn.gate" that the model of its config does not have' add_tensor blocks.0.attn.gate
hostile_layout "a missing tensor" 'has no tensor "blocks.1.ln2.bias"' drop_tensor blocks.1.ln2.bias
hostile_layout "wte's offsets moved onto optim.m.wte's bytes" "overlaps tensor" offsets wte optim.m.wte
hostile_layout "a weight of 1e30" 'weights hold a value beyond +-1e6 (tensor "blocks.0.attn.qkv.weight", element 5: 1e+30)' \
    tensor blocks.0.attn.qkv.weight 1e30 5
hostile_layout "a NaN weight" 'weights hold NaN or Inf (tensor "wte", element 9: nan)' tensor wte nan 9
hostile_layout "an Inf AdamW moment" 'AdamW moments hold NaN or Inf (tensor "optim.m.lnf.bias", element 1: inf)' tensor optim.m.lnf.bias inf 1
# The control: a weight at the bound loads.
rm -rf "$work/bound" && mkdir -p "$work/bound"
edit "$work/bound/ckpt_00000020.safetensors" tensor blocks.0.attn.qkv.weight 1e6 5
check "a weight of exactly 1e6: infer loads it" ./build/infer --checkpoint "$work/bound" --prompt hi --max-new 2 > /dev/null 2>&1
check "the same checkpoint: --init-from starts from it" tests/last_wins.sh ./build/train "${tiny[@]}" --steps 1 --init-from "$work/bound" \
    --out "$work/bound_init" > /dev/null 2>&1
for v in 0 -5 1e12 '"x"'; do
    rm -rf "$work/hostile" && mkdir -p "$work/hostile"
    edit "$work/hostile/ckpt_00000020.safetensors" train_arg seq_len "$v"
    expect_error "bad input: infer, seq_len $v: generation" "seq_len" ./build/infer --checkpoint "$work/hostile" --prompt hi --max-new 4
    expect_error "bad input: infer, seq_len $v: perplexity" "seq_len" ./build/infer --checkpoint "$work/hostile" --perplexity "$work/ppl.txt"
done
# Resume claims: a run resumes only into the state the checkpoint really describes.
rm -rf "$work/claims" && cp -r "$work/resumed" "$work/claims" && rm "$work/claims/ckpt_00000020.safetensors"
keep=$(snapshot "$work/claims")
expect_error "bad input: resume with another --val-batches" "--val-batches" tests/last_wins.sh ./build/train "${tiny[@]}" --val-batches 1 --out "$work/claims" --resume
expect_error "bad input: resume with another --val-every" "--val-every" tests/last_wins.sh ./build/train "${tiny[@]}" --val-every 5 --out "$work/claims" --resume
expect_error "bad input: resume with another --attention" "--attention" tests/last_wins.sh ./build/train "${tiny[@]}" --attention cudnn --doc-mask off --out "$work/claims" --resume
edit_latest() { python3 tests/edit_checkpoint.py "$work/claims/ckpt_00000010.safetensors" "$work/claims2/ckpt_00000010.safetensors" "$@"; }
rm -rf "$work/claims2" && mkdir -p "$work/claims2" && cp "$work/claims/metrics.csv" "$work/claims2/"
edit_latest meta loader_cursor '"3"'
expect_error "bad input: resume where step and loader disagree" "loader is at epoch" tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/claims2" --resume
edit_latest meta step '"25"'
expect_error "bad input: resume from a step past --steps" "past --steps" tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/claims2" --resume
edit_latest meta config '"{\"vocab_size\":512,\"n_layer\":2,\"n_embd\":64,\"n_head\":1,\"rope_theta\":10000,\"layer_attn\":[{\"kind\":\"dense\",\"causal\":false},{\"kind\":\"dense\",\"causal\":true}]}"'
expect_error "bad input: resume a model with a non-causal layer" "not causal" tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/claims2" --resume
grep -q '^20,' "$work/claims2/metrics.csv" && pass "refused resumes kept metrics.csv whole" || fail "a refused resume truncated metrics.csv"
[ "$keep" == "$(snapshot "$work/claims")" ] && pass "refused resumes left the run's files untouched" || fail "a refused resume changed files"

# 6. Non-finite steps are skipped, not fatal; only --max-bad-steps in a row stop the run, and
#    then its last good checkpoint is untouched.
if LNGPT_NAN_STEPS=5-6 tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/nan" > "$work/nan.log" 2>&1; then
    skipped=$(grep -c ',skipped,' "$work/nan/metrics.csv")
    [ "$skipped" -eq 2 ] && ! grep -q '^[56],train,' "$work/nan/metrics.csv" && grep -q '^20,val,' "$work/nan/metrics.csv" \
        && pass "two NaN steps were skipped and logged, training went on to step 20" || fail "NaN steps: $skipped skipped rows"
else
    fail "a run with two NaN steps failed: $(tail -2 "$work/nan.log")"
fi
LNGPT_NAN_STEPS=12-20 tests/last_wins.sh ./build/train "${tiny[@]}" --max-bad-steps 3 --out "$work/nan2" > "$work/nan2.log" 2>"$work/nan2.err"
code=$?
if [ $code -eq 1 ] && grep -q "^error: 3 steps in a row" "$work/nan2.err" && [ "$(wc -l < "$work/nan2.err")" -eq 1 ] \
   && [ "$(ls "$work/nan2" | grep -c ckpt_)" -eq 1 ] && [ -f "$work/nan2/ckpt_00000010.safetensors" ] \
   && cmp -s "$work/nan2/ckpt_00000010.safetensors" "$work/full/ckpt_00000010.safetensors"; then
    pass "3 NaN steps in a row stop the run: $(cat "$work/nan2.err"); step 10's checkpoint untouched"
else
    fail "NaN streak: exit $code, $(cat "$work/nan2.err"), $(ls "$work/nan2")"
fi

# 8. Context and data parallel, with the ranks as threads of one process on the CPU
#    (--simulate-ranks: the same trainer code as NCCL ranks, an in-process communicator): 2
#    data-parallel groups x --cp 2 follow the one-process run's losses step for step; the run
#    writes one set of checkpoints, which a one-process run resumes.
if tests/last_wins.sh ./build/train "${tiny[@]}" --steps 20 --cp 2 --simulate-ranks 4 --out "$work/cp" > "$work/cp.log" 2>&1 \
   && paste <(grep -o '| loss [0-9.]*' "$work/full.log") <(grep -o '| loss [0-9.]*' "$work/cp.log") | \
      awk '{ d = $3 - $6; if (d < 0) d = -d; if (d / $3 > w) w = d / $3; n++ } END { printf "%d %.1e\n", n, w; exit !(n >= 5 && w < 1e-4) }' > "$work/cp.cmp"; then
    pass "--cp 2 x 2 data-parallel groups (4 simulated ranks) track one process: $(awk '{print $1 " logged steps, worst rel diff " $2}' "$work/cp.cmp")"
else
    fail "--cp 2 --simulate-ranks 4: $(cat "$work/cp.cmp" 2>/dev/null) $(tail -2 "$work/cp.log")"
fi
# --time-comm: the split of a step into compute and waiting for the other ranks, printed by
# rank 0 (here the waits are the in-process loss sums; the GPU's stream waits need NCCL ranks).
if tests/last_wins.sh ./build/train "${tiny[@]}" --steps 4 --simulate-ranks 2 --time-comm --out "$work/timed" > "$work/timed.log" 2>&1 \
   && grep -qE '^step +4/4 .* \| step [0-9.]+ ms, comm wait [0-9.]+ ms$' "$work/timed.log" \
   && grep -qE '^time split: [0-9.]+ ms a step, of which [0-9.]+ ms waiting for communication \([0-9.]+%\)$' "$work/timed.log" \
   && ! grep -q 'comm wait' "$work/cp.log"; then
    pass "--time-comm prints each step's time and its waits, and the run's split: $(grep '^time split' "$work/timed.log")"
else
    fail "--time-comm: $(grep -E 'step +4/4|time split|error' "$work/timed.log")"
fi
# --shard-update (data parallel): each of 2 simulated ranks applies AdamW to half the weights and
# sends them on; the losses and the checkpoints (weights and both moments, gathered for the save)
# are the same bits as with every rank updating every weight, and such a checkpoint resumes.
if tests/last_wins.sh ./build/train "${tiny[@]}" --simulate-ranks 2 --shard-update on --out "$work/shard_on" > "$work/shard_on.log" 2>&1 \
   && tests/last_wins.sh ./build/train "${tiny[@]}" --simulate-ranks 2 --shard-update off --out "$work/shard_off" > "$work/shard_off.log" 2>&1 \
   && grep -q 'AdamW split over the ranks' "$work/shard_on.log" && grep -q 'AdamW on every rank' "$work/shard_off.log" \
   && diff <(cut -d, -f1-5 "$work/shard_on/metrics.csv") <(cut -d, -f1-5 "$work/shard_off/metrics.csv") > /dev/null \
   && cmp -s "$work/shard_on/ckpt_00000010.safetensors" "$work/shard_off/ckpt_00000010.safetensors" \
   && cmp -s "$work/shard_on/ckpt_00000020.safetensors" "$work/shard_off/ckpt_00000020.safetensors"; then
    pass "--shard-update: the split AdamW update gives the same losses and checkpoints, bit for bit ($(grep -c ',train,' "$work/shard_on/metrics.csv") steps)"
else
    fail "--shard-update: $(grep -E 'error|AdamW' "$work/shard_on.log" "$work/shard_off.log" | head -4)"
fi
rm "$work/shard_on/ckpt_00000020.safetensors"
if tests/last_wins.sh ./build/train "${tiny[@]}" --simulate-ranks 2 --shard-update on --resume --out "$work/shard_on" > "$work/shard_resume.log" 2>&1 \
   && cmp -s "$work/shard_on/ckpt_00000020.safetensors" "$work/shard_off/ckpt_00000020.safetensors"; then
    pass "a split update's step-10 checkpoint resumes to the same step-20 checkpoint"
else
    fail "resume of a split update: $(grep -E 'error' "$work/shard_resume.log" | head -2)"
fi
if ! tests/last_wins.sh ./build/train "${tiny[@]}" --shard-update on --out "$work/shard_one" > "$work/shard_one.log" 2>&1 \
   && grep -q 'shard-update splits AdamW over data-parallel ranks at --cp 1, and this job has 1 rank at --cp 1' "$work/shard_one.log" \
   && [ ! -e "$work/shard_one/metrics.csv" ]; then
    pass "--shard-update on one rank is refused before the run: $(grep error "$work/shard_one.log")"
else
    fail "--shard-update on one rank: $(tail -2 "$work/shard_one.log")"
fi
# --op-split: on the CPU backend the step cannot be timed op by op, and says so (the GPU's table
# is checked by the GPU suite); a step outside the run is refused.
if tests/last_wins.sh ./build/train "${tiny[@]}" --steps 3 --op-split 2 --out "$work/split" > "$work/split.log" 2>&1 \
   && grep -q '^op split: this backend does not time its ops' "$work/split.log"; then
    pass "--op-split on the CPU says the backend cannot time its ops"
else
    fail "--op-split on the CPU: $(grep -E 'op split|error' "$work/split.log")"
fi
if ! tests/last_wins.sh ./build/train "${tiny[@]}" --steps 3 --op-split 4 --out "$work/split4" > "$work/split4.log" 2>&1 \
   && grep -q 'op-split must be a step in \[1, --steps 3\]' "$work/split4.log" && [ ! -e "$work/split4/metrics.csv" ]; then
    pass "--op-split past --steps is refused before the run: $(grep error "$work/split4.log")"
else
    fail "--op-split 4 of 3 steps: $(tail -2 "$work/split4.log")"
fi
# The 8-GPU shapes as 8 simulated ranks: --cp 8, and 2 data-parallel groups x --cp 4
# at the same tokens per step, each following the one-process run.
for shape in "8 8" "4 8"; do
    read -r c r <<< "$shape"
    if tests/last_wins.sh ./build/train "${tiny[@]}" --steps 20 --cp "$c" --simulate-ranks "$r" --out "$work/cp$c" > "$work/cp$c.log" 2>&1 \
       && paste <(grep -o '| loss [0-9.]*' "$work/full.log") <(grep -o '| loss [0-9.]*' "$work/cp$c.log") | \
          awk '{ d = $3 - $6; if (d < 0) d = -d; if (d / $3 > w) w = d / $3; n++ } END { printf "%d %.1e\n", n, w; exit !(n >= 5 && w < 1e-4) }' > "$work/cp$c.cmp"; then
        pass "--cp $c on $r simulated ranks ($((r / c)) data-parallel groups) tracks one process: $(awk '{print $1 " logged steps, worst rel diff " $2}' "$work/cp$c.cmp")"
    else
        fail "--cp $c --simulate-ranks $r: $(cat "$work/cp$c.cmp" 2>/dev/null) $(tail -2 "$work/cp$c.log")"
    fi
done
if [ "$(ls "$work/cp" | grep -c ckpt_)" -eq 2 ] && grep -q "parallel: 4 ranks = 2 data-parallel groups x --cp 2" "$work/cp.log" \
   && [ "$(grep -c '^saved' "$work/cp.log")" -eq 2 ]; then
    pass "a parallel run prints once and writes one set of checkpoints"
else
    fail "parallel run output: $(ls "$work/cp"), $(grep -c '^saved' "$work/cp.log") saved lines"
fi
cp -r "$work/cp" "$work/cp_resumed"
rm "$work/cp_resumed/ckpt_00000020.safetensors"
if tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/cp_resumed" --resume > "$work/cp_resume.log" 2>&1 \
   && grep -q "resumed from .*ckpt_00000010" "$work/cp_resume.log"; then
    pass "a --cp 2 x 2 checkpoint resumes in one process ($(grep -o 'val loss [0-9.]*' "$work/cp_resume.log" | tail -1))"
else
    fail "resume of a parallel run: $(tail -2 "$work/cp_resume.log")"
fi
expect_error "bad input: window not split into 2 x cp chunks" "multiple of 6" tests/last_wins.sh ./build/train "${tiny[@]}" --cp 3 --simulate-ranks 3 --out "$work/x8"
expect_error "bad input: ranks not groups of cp" "multiple of --cp" tests/last_wins.sh ./build/train "${tiny[@]}" --cp 2 --simulate-ranks 3 --out "$work/x8"
expect_error "bad input: batch not split over data-parallel groups" "data-parallel groups" tests/last_wins.sh ./build/train "${tiny[@]}" --batch 3 --simulate-ranks 2 --out "$work/x8"
expect_error "bad input: --cp without ranks" "launch.sh" tests/last_wins.sh ./build/train "${tiny[@]}" --cp 2 --out "$work/x8"
expect_error "bad input: a bad WORLD_SIZE" "WORLD_SIZE" env WORLD_SIZE=two tests/last_wins.sh ./build/train "${tiny[@]}" --out "$work/x8"
expect_error "bad input: 1000 simulated ranks" "simulate-ranks must be in" tests/last_wins.sh ./build/train "${tiny[@]}" --simulate-ranks 1000 --out "$work/x8"
[ ! -e "$work/x8" ] && pass "the refused parallel runs wrote nothing" || fail "a refused parallel run wrote $work/x8"

# 9. Perplexity with each window split over --cp ranks (simulated) equals one process's.
head -c 3000 "$corpus/bible.txt" > "$work/ppl.txt" 2>/dev/null || head -c 3000 "$corpus/val_text.txt" > "$work/ppl.txt"
p1=$(./build/infer --checkpoint "$work/full" --perplexity "$work/ppl.txt" --ctx 32 --windows fresh 2>/dev/null | grep -o 'loss [0-9.]* nats/token | perplexity [0-9.]*')
p4=$(./build/infer --checkpoint "$work/full" --perplexity "$work/ppl.txt" --ctx 32 --cp 4 --simulate-ranks 4 --windows fresh 2>/dev/null | grep -o 'loss [0-9.]* nats/token | perplexity [0-9.]*')
if [ -n "$p1" ] && [ "$p1" = "$p4" ]; then
    pass "perplexity split over --cp 4 ranks == one process: $p4"
else
    fail "perplexity --cp 4: '$p4' vs '$p1'"
fi
# With --cp the default windows overlap by half (each from scratch over the ring): the same
# scores as one process through the KV cache's windows, and not the consecutive windows'.
pc1=$(./build/infer --checkpoint "$work/full" --perplexity "$work/ppl.txt" --ctx 32 2>/dev/null | grep -o 'loss [0-9.]* nats/token | perplexity [0-9.]*')
pc4=$(./build/infer --checkpoint "$work/full" --perplexity "$work/ppl.txt" --ctx 32 --cp 4 --simulate-ranks 4 2>/dev/null | grep -o 'loss [0-9.]* nats/token | perplexity [0-9.]*')
if [ -n "$pc1" ] && [ "$pc1" = "$pc4" ] && [ "$pc4" != "$p1" ]; then
    pass "--cp 4 in windows overlapping by half == one process through the cache: $pc4 (consecutive windows: $p1)"
else
    fail "--cp 4 sliding windows: '$pc4' vs cached '$pc1' (consecutive '$p1')"
fi
expect_error "bad input: infer --ctx not split into 2 x cp chunks" "multiple of 8" ./build/infer --checkpoint "$work/full" --perplexity "$work/ppl.txt" --ctx 30 --cp 4 --simulate-ranks 4
# Cached scoring (the KV cache, chunks of 64) over the whole file in one window equals a fresh
# forward over it; the per-position losses come as CSV covering every token.
pf=$(./build/infer --checkpoint "$work/full" --perplexity "$work/ppl.txt" --ctx 4096 --windows fresh 2>/dev/null | grep -o 'perplexity [0-9.]*' | cut -d' ' -f2)
pc=$(./build/infer --checkpoint "$work/full" --perplexity "$work/ppl.txt" --ctx 4096 --chunk 64 --per-position "$work/positions.csv" 2>/dev/null | grep -o 'perplexity [0-9.]*' | cut -d' ' -f2)
scored=$(tail -n +2 "$work/positions.csv" 2>/dev/null | awk -F, '{ n += $3 } END { print n + 0 }')
total=$(./build/infer --checkpoint "$work/full" --perplexity "$work/ppl.txt" --ctx 4096 2>/dev/null | grep -o '[0-9]* tokens,' | cut -d' ' -f1)
if [ -n "$pc" ] && awk -v c="$pc" -v f="$pf" 'BEGIN { d = c / f - 1; exit !(d * d < 1e-8) }' && [ "$scored" = "$total" ]; then
    pass "cached perplexity in one window == a fresh forward ($pc vs $pf); per-position CSV covers all $total tokens"
else
    fail "cached perplexity '$pc' vs fresh '$pf', CSV covers $scored of $total tokens"
fi
# A token shard is scored document by document, each from its own start: val.bin's tokens cut
# into documents of 2000, 1500 and the rest tokens (each led by BOS). Every target token is
# scored once (tokens - documents), the positions restart at each document (positions 0 and 1:
# 2 per document), and --min-doc-tokens keeps only the long ones.
python3 - "$corpus/val.bin" "$work/docs.bin" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
n_tok, n_doc, vocab = struct.unpack_from("<QQI", b, 16)
toks = list(struct.unpack_from("<%dH" % n_tok, b, 64 + 8 * n_doc))
starts = [0, 2000, 3500]
for s in starts: toks[s] = 1
head = b"LNGSHARD" + struct.pack("<IIQQI", 1, 2, len(toks), len(starts), vocab) + bytes(28)
open(sys.argv[2], "wb").write(head + struct.pack("<%dQ" % len(starts), *starts) + struct.pack("<%dH" % len(toks), *toks))
PY
n_tok=$(./build/data_tool inspect "$work/docs.bin" | awk '/^n_tokens:/ { print $2 }')
out=$(./build/infer --checkpoint "$work/full" --perplexity "$work/docs.bin" --per-position "$work/docs.csv" 2>/dev/null)
scored=$(grep -o '[0-9]* tokens,' <<< "$out" | cut -d' ' -f1)
first=$(awk -F, '$1 == 0 { print $3 }' "$work/docs.csv" 2>/dev/null)
csv=$(tail -n +2 "$work/docs.csv" 2>/dev/null | awk -F, '{ n += $3 } END { print n + 0 }')
if grep -q ": 3 documents, " <<< "$out" && [ "$scored" = "$((n_tok - 3))" ] && [ "$csv" = "$scored" ] && [ "$first" = 6 ]; then
    pass "a token shard scored document by document: 3 documents, $scored tokens, positions restart at each"
else
    fail "shard perplexity: '$out', $scored of $((n_tok - 3)) tokens, CSV $csv, positions 0-1: '$first' (want 6)"
fi
out=$(./build/infer --checkpoint "$work/full" --perplexity "$work/docs.bin" --min-doc-tokens 1600 2>/dev/null)
grep -q ": 2 documents, $((n_tok - 1500 - 2)) tokens" <<< "$out" && pass "--min-doc-tokens 1600 keeps the 2 long documents" \
    || fail "--min-doc-tokens 1600: $out"
expect_error "bad input: --init-from a model of another width" "--init-from" tests/last_wins.sh ./build/train "${tiny[@]}" --width 128 --heads 2 --init-from "$work/full" --out "$work/x_init"
expect_error "bad input: --init-from with --resume" "--init-from starts a fresh run" tests/last_wins.sh ./build/train "${tiny[@]}" --init-from "$work/full" --resume --out "$work/full"
expect_error "bad input: --min-doc-tokens longer than every document" "--min-doc-tokens" ./build/infer --checkpoint "$work/full" --perplexity "$work/docs.bin" --min-doc-tokens 100000
expect_error "bad input: --min-doc-tokens on a text file" "--min-doc-tokens is for a token shard" ./build/infer --checkpoint "$work/full" --perplexity "$work/ppl.txt" --min-doc-tokens 5
expect_error "bad input: --min-doc-tokens without --perplexity" "--min-doc-tokens" ./build/infer --checkpoint "$work/full" --prompt hi --min-doc-tokens 5
# A prompt's KV cache saved, then loaded and continued by another prompt.
./build/infer --checkpoint "$work/full" --prompt "In the beginning God created" --max-new 0 --save-cache "$work/kv.safetensors" 2>/dev/null >/dev/null
out=$(./build/infer --checkpoint "$work/full" --load-cache "$work/kv.safetensors" --prompt " the" --max-new 8 --seed 7 2>&1)
[ -f "$work/kv.safetensors" ] && grep -q "loaded a KV cache of [0-9]* tokens" <<< "$out" && pass "KV cache saved and loaded by infer" \
    || fail "KV cache save/load: $out"
# A batch of prompts of different lengths continued at once after the loaded cache: each the same
# greedy text as that prompt alone (sequences in one cache never see each other; alone, fed a
# token at a time as the batch feeds it).
printf ' the\\nearth\n\n And God said unto Moses\nx\n' > "$work/prompts.txt"
batch=$(./build/infer --checkpoint "$work/full" --load-cache "$work/kv.safetensors" --prompts-file "$work/prompts.txt" --max-new 6 --temperature 0 2>/dev/null)
same=0
for k in 1 2 3; do
    [ "$k" = 1 ] && p=$' the\nearth'
    [ "$k" = 2 ] && p=' And God said unto Moses'
    [ "$k" = 3 ] && p='x'
    alone=$(./build/infer --checkpoint "$work/full" --load-cache "$work/kv.safetensors" --prompt "$p" --chunk 1 --max-new 6 --temperature 0 2>/dev/null)
    got=$(awk -v k="=== $k ===" '$0 == k { on = 1; next } /^=== [0-9]+ ===$/ { on = 0 } on' <<< "$batch")
    [ -n "$alone" ] && [ "$got" = "$alone" ] && same=$((same + 1))
done
[ "$same" = 3 ] && pass "--prompts-file: 3 prompts (one of two lines) at once == each alone, greedy" \
    || fail "--prompts-file batch differs from single prompts ($same of 3 equal): $batch"
: > "$work/no_prompts.txt"
expect_error "bad input: --prompts-file with no prompt" "has no prompt" ./build/infer --checkpoint "$work/full" --prompts-file "$work/no_prompts.txt"
expect_error "bad input: --prompts-file with --prompt" "drop --prompt" ./build/infer --checkpoint "$work/full" --prompts-file "$work/prompts.txt" --prompt x
head -c 300 "$work/kv.safetensors" > "$work/kv_cut.safetensors"
expect_error "bad input: truncated KV cache file" "KV cache $work/kv_cut.safetensors is truncated or not a safetensors file: prefill again with infer --save-cache" ./build/infer --checkpoint "$work/full" --load-cache "$work/kv_cut.safetensors" --prompt x
# Caches are validated like checkpoints: values (NaN, 1e38) and positions within what the model reads.
python3 tests/edit_checkpoint.py "$work/kv.safetensors" "$work/kv_nan.safetensors" tensor kv.0 nan
python3 tests/edit_checkpoint.py "$work/kv.safetensors" "$work/kv_big.safetensors" tensor last_hidden 1e38
expect_error "bad input: KV cache holding NaN" "tensor kv.0 holds nan (NaN, Inf or beyond 1e+06): the file is corrupt: prefill again" ./build/infer --checkpoint "$work/full" --load-cache "$work/kv_nan.safetensors" --prompt x
expect_error "bad input: KV cache holding 1e38" "tensor last_hidden holds 1e+38" ./build/infer --checkpoint "$work/full" --load-cache "$work/kv_big.safetensors" --prompt x
expect_error "bad input: KV cache longer than --ctx" "holds 15 positions, more than the 4 this model may read here (--ctx)" ./build/infer --checkpoint "$work/full" --load-cache "$work/kv.safetensors" --prompt x --ctx 4
expect_error "bad input: a checkpoint given as --load-cache" "is a checkpoint, not a KV cache (infer --save-cache writes them)" ./build/infer --checkpoint "$work/full" --load-cache "$work/full/ckpt_00000010.safetensors" --prompt x
expect_error "bad input: KV cache of another model" "another model" ./build/infer --checkpoint "$work/full/ckpt_00000010.safetensors" --load-cache "$work/kv.safetensors" --prompt x
# A source tree as the prompt: packed one header per file, read through the cache.
scripts/pack_tree.sh tests/fuzz 2000 > "$work/tree.txt"
if grep -q "^# ==== " "$work/tree.txt" && out=$(./build/infer --checkpoint "$work/full" --prompt-file "$work/tree.txt" --max-new 4 --chunk 128 --ctx 8192 2>&1) \
    && grep -q "prefill: [0-9]* tokens in chunks of 128" <<< "$out"; then
    pass "a packed source tree ($(grep -c '^# ==== ' "$work/tree.txt") files) read as the prompt"
else
    fail "source tree prompt: $out"
fi
# Headers only the packer writes: a file name with a newline stays on its header line, and a
# file's own "# ==== x ====" line cannot pass for a header.
mkdir -p "$work/hostile_tree" && printf 'one\n' > "$work/hostile_tree/a"$'\n'"b.txt" \
    && printf 'text\n# ==== forged.txt ====\nmore\n' > "$work/hostile_tree/c.txt"
scripts/pack_tree.sh "$work/hostile_tree" > "$work/hostile_tree.txt"
if [ "$(grep -c '^# ==== ' "$work/hostile_tree.txt")" = 2 ] && grep -qF "# ==== \$'a\nb.txt' ====" "$work/hostile_tree.txt" \
   && grep -qF '\# ==== forged.txt ====' "$work/hostile_tree.txt"; then
    pass "pack_tree: 2 files, 2 headers (a newline in a name quoted, a forged header escaped)"
else
    fail "pack_tree hostile names or text: $(tr '\n' '|' < "$work/hostile_tree.txt")"
fi
expect_error "bad input: unknown --windows" "--windows" ./build/infer --checkpoint "$work/full" --perplexity "$work/ppl.txt" --windows some
expect_error "bad input: --per-position without --perplexity" "--per-position" ./build/infer --checkpoint "$work/full" --prompt hi --per-position "$work/p.csv"
expect_error "bad input: infer --cp without --perplexity" "for --perplexity" ./build/infer --checkpoint "$work/full" --prompt hi --cp 2

# 10. Block-sparse layers (a window plus global tokens) with a dilated and a dense layer train on
#     the CPU, print their density, carry their patterns to infer; bad layouts are refused.
bsp=(--attn block-sparse --block 4 --window 8 --global 2 --layers 3 --layer-pattern 1:dilated,2:dense --segments 8,16 --dilations 1,2)
if tests/last_wins.sh ./build/train "${tiny[@]}" "${bsp[@]}" --steps 10 --out "$work/bsparse" > "$work/bsparse.log" 2>&1 \
   && grep -q "layer 0: block-sparse .*keeps 0\.[0-9]* of the causal pairs at T = 32" "$work/bsparse.log" \
   && ./build/infer --checkpoint "$work/bsparse" --prompt "In the" --max-new 8 > "$work/bsparse_gen.log" 2>&1; then
    pass "block-sparse + dilated + dense layers train and generate ($(grep -o 'keeps [0-9.]*' "$work/bsparse.log" | head -1), $(grep -o 'val loss [0-9.]*' "$work/bsparse.log" | tail -1))"
else
    fail "block-sparse model: $(tail -n 2 "$work/bsparse.log" "$work/bsparse_gen.log" | tr '\n' ' ')"
fi
printf '0: 0\n1: 0 1\n2: 2 1\n' > "$work/unsorted_layout.txt"
expect_error "bad input: unsorted layout file" "line 3: key blocks not sorted" tests/last_wins.sh ./build/train "${tiny[@]}" --attn block-sparse --layout-file "$work/unsorted_layout.txt" --out "$work/x10"
expect_error "bad input: block size 48" "power of two" tests/last_wins.sh ./build/train "${tiny[@]}" --attn block-sparse --block 48 --window 8 --out "$work/x10"
expect_error "bad input: block-sparse without a builder" "needs a builder" tests/last_wins.sh ./build/train "${tiny[@]}" --attn block-sparse --out "$work/x10"
expect_error "bad input: a negative window" "must not be negative" tests/last_wins.sh ./build/train "${tiny[@]}" --attn block-sparse --window -3 --out "$work/x10"
expect_error "bad input: --dilated-blocks with one number" "r,W" tests/last_wins.sh ./build/train "${tiny[@]}" --attn block-sparse --dilated-blocks 3 --out "$work/x10"
[ ! -e "$work/x10" ] && pass "the refused block-sparse runs wrote nothing" || fail "a refused block-sparse run wrote $work/x10"

# 11. Fixed layers (the Sparse Transformer's pattern) cycled with block-sparse ones by --attn's
#     list train on the CPU, print what each keeps, carry both patterns to infer and to --resume;
#     bad values are refused before anything is written.
fx=(--attn block-sparse,fixed --block 4 --window 8 --stride 16 --summary 4 --layers 3 --seq-len 64)
if tests/last_wins.sh ./build/train "${tiny[@]}" "${fx[@]}" --steps 12 --stop-at 10 --out "$work/fixed" > "$work/fixed.log" 2>&1 \
   && grep -q "layer 0: block-sparse .*keeps 0\.[0-9]* of the causal pairs at T = 64" "$work/fixed.log" \
   && grep -q 'layer 1: fixed {"kind":"fixed","causal":true,"stride":16,"summary":4}, keeps 0\.[0-9]*' "$work/fixed.log" \
   && grep -q "layer 2: block-sparse" "$work/fixed.log" \
   && tests/last_wins.sh ./build/train "${tiny[@]}" "${fx[@]}" --steps 12 --resume --out "$work/fixed" > "$work/fixed_resume.log" 2>&1 \
   && ./build/infer --checkpoint "$work/fixed" --prompt "In the" --max-new 8 > "$work/fixed_gen.log" 2>&1; then
    pass "block-sparse, fixed, block-sparse layers train, resume and generate ($(grep -o 'layer 1: fixed.*keeps [0-9.]*' "$work/fixed.log" | grep -o 'keeps [0-9.]*'))"
else
    fail "fixed model: $(tail -n 2 "$work/fixed.log" "$work/fixed_resume.log" "$work/fixed_gen.log" 2>/dev/null | tr '\n' ' ')"
fi
expect_error "bad input: fixed: a resumed run with another stride" "--resume" tests/last_wins.sh ./build/train "${tiny[@]}" "${fx[@]}" --stride 32 --steps 12 --resume --out "$work/fixed"
expect_error "bad input: fixed: summary 0" "--summary 0 must be in" tests/last_wins.sh ./build/train "${tiny[@]}" --attn fixed --summary 0 --out "$work/x11"
expect_error "bad input: fixed: summary above the stride" "--summary 40 must be in" tests/last_wins.sh ./build/train "${tiny[@]}" --attn fixed --stride 32 --summary 40 --out "$work/x11"
expect_error "bad input: more patterns than layers" "names 3 patterns for 2 layers" tests/last_wins.sh ./build/train "${tiny[@]}" --attn dense,fixed,dense --out "$work/x11"
expect_error "bad input: an empty name in the list" "--attn must be" tests/last_wins.sh ./build/train "${tiny[@]}" --attn fixed, --out "$work/x11"
[ ! -e "$work/x11" ] && pass "the refused fixed runs wrote nothing" || fail "a refused fixed run wrote $work/x11"

# 12. The sample opens with the first held-out document's opening (not a fixed prompt from another
# corpus): on a corpus of one's own notebooks, each opening "Notebook NN of the lighthouse", the
# sample starts with one of those; --sample-prompt replaces it.
mkdir -p "$work/notebooks"
for i in $(seq -w 1 24); do
    { echo "Notebook $i of the lighthouse keeper."; sed -n "$((10#$i * 150)),$((10#$i * 150 + 149))p" "$corpus/bible.txt" | tr 'A-Za-z' 'N-ZA-Mn-za-m'; } > "$work/notebooks/n$i.txt"
done
opening() { sed -n '/^--- sample ---$/{n;p;q}' "$1"; }
if ./build/data_tool prepare --text "$work/notebooks" --out "$work/notes_corpus" --vocab 512 > "$work/notes_prep.log" 2>&1; then
    own=(--data "$work/notes_corpus" "${tiny[@]:2}" --steps 2 --val-every 2 --ckpt-every 2 --sample-tokens 6)
    tests/last_wins.sh ./build/train "${own[@]}" --out "$work/notes_run" > "$work/notes_run.log" 2>&1
    first=$(opening "$work/notes_run.log")
    if [[ $first == "Notebook "[0-2][0-9]" of"* ]]; then
        pass "the sample opens with a held-out notebook's opening (${first:0:14})"
    else
        fail "the sample's opening on one's own text: '$first' $(tail -1 "$work/notes_run.log")"
    fi
    tests/last_wins.sh ./build/train "${own[@]}" --sample-prompt "In the" --out "$work/notes_typed" > "$work/notes_typed.log" 2>&1
    first=$(opening "$work/notes_typed.log")
    if [[ $first == "In the"* ]]; then pass "--sample-prompt \"In the\": the sample opens with it"; else fail "--sample-prompt: '$first'"; fi
else
    fail "prepare of the notebooks: $(tail -1 "$work/notes_prep.log")"
fi

summary
