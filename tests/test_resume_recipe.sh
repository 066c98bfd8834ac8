#!/usr/bin/env bash
# train --resume continues only the run its checkpoint records: the same --schedule
# and --mix both ways (a recorded flag left out is refused, not just one added), a recorded
# recipe that does not parse refused as corrupt, and train.bin / val.bin / the --mix shards the
# files the run trained on (data/identity.h: size and a hash of their ends). Every refusal is one
# line and leaves --out as it was.
# Usage: tests/test_resume_recipe.sh [CORPUS_DIR]   Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
corpus=${1:-build/test_corpus}
work=build/test_resume_recipe
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
need_programs build/train
need_corpus "$corpus"

# The run's own corpus and mix shard (a copy of another split), so that the test may replace them.
cp -r "$corpus" "$work/data"
cp "$corpus/val.bin" "$work/mix.bin"
# A copy of FILE with its last token changed: same size, other content in its last MiB.
other_content() {
    python3 - "$1" "$2" <<'EOF'
import sys
blob = bytearray(open(sys.argv[1], "rb").read())
blob[-2] = 4 if blob[-2] == 3 else 3  # a 2-byte token < vocab: the shard stays valid
open(sys.argv[2], "wb").write(bytes(blob))
EOF
}
snapshot() { (cd "$1" && find . -type f | sort | xargs sha256sum) 2>/dev/null; }

run=(--data "$work/data" --layers 2 --width 64 --heads 1 --seq-len 32 --batch 4 --steps 8 --warmup 2 --lr 3e-3
     --val-every 4 --val-batches 2 --ckpt-every 4 --log-every 1 --sample-tokens 0)
recipe=(--schedule 64x2@6 --mix "$work/mix.bin:0.25")

# 1. The uninterrupted run, and the same run stopped after step 4.
build/train "${run[@]}" "${recipe[@]}" --out "$work/full" > "$work/full.log" 2>&1 || bail "the run failed: $(tail -2 "$work/full.log")"
build/train "${run[@]}" "${recipe[@]}" --out "$work/run" --stop-at 4 > "$work/stop.log" 2>&1 || bail "the --stop-at run failed: $(tail -2 "$work/stop.log")"
[ -f "$work/run/ckpt_00000004.safetensors" ] || bail "no checkpoint at step 4"
grep -aq '"recipe"' "$work/run/ckpt_00000004.safetensors" && pass "the checkpoint records the recipe" || fail "no recipe in the checkpoint"
keep=$(snapshot "$work/run")

# 2. The run's flags, both ways.
expect_error "resume without the run's --schedule" "trained with --schedule '64x2@6'; pass the same --schedule" \
    build/train "${run[@]}" --mix "$work/mix.bin:0.25" --out "$work/run" --resume
expect_error "resume without the run's --mix" "trained with --mix '.*mix.bin:0.25'; pass the same --mix" \
    build/train "${run[@]}" --schedule 64x2@6 --out "$work/run" --resume
expect_error "resume without either" "trained with --" build/train "${run[@]}" --out "$work/run" --resume
expect_error "resume with another --schedule" "--schedule is 64x2@5" \
    build/train "${run[@]}" --schedule 64x2@5 --mix "$work/mix.bin:0.25" --out "$work/run" --resume

# 3. A recorded recipe that does not parse: the checkpoint is corrupt.
corrupt() {  # name, edit args...
    local name=$1; shift
    rm -rf "$work/bad" && mkdir -p "$work/bad"
    python3 tests/edit_checkpoint.py "$work/run/ckpt_00000004.safetensors" "$work/bad/ckpt_00000004.safetensors" "$@"
    expect_error "resume from a checkpoint whose $name" "ckpt_00000004.safetensors is corrupt" \
        build/train "${run[@]}" "${recipe[@]}" --out "$work/bad" --resume
}
corrupt "recorded --schedule is \"garbage\"" train_arg schedule '"garbage"'
corrupt "recorded --schedule is a number" train_arg schedule '7'
corrupt "recorded --mix has no fraction" train_arg mix '"mix.bin"'
corrupt "recipe is not JSON" meta recipe '"{files"'
corrupt "recipe has a short hash" meta recipe '"{\"files\":[{\"role\":\"train.bin\",\"path\":\"x\",\"size\":1,\"hash\":\"12\"}]}"'

# 4. The files: a --mix shard or the corpus replaced under the same name.
cp "$work/mix.bin" "$work/mix.orig"
cp "$corpus/train.bin" "$work/mix.bin"
expect_error "resume with the --mix shard replaced (other size)" "mix.bin is [0-9]* bytes, but the run trained on one of" \
    build/train "${run[@]}" "${recipe[@]}" --out "$work/run" --resume
other_content "$work/mix.orig" "$work/mix.bin"
expect_error "resume with the --mix shard replaced (same size)" "mix.bin has the same size but other content" \
    build/train "${run[@]}" "${recipe[@]}" --out "$work/run" --resume
rm "$work/mix.bin"
expect_error "resume with the --mix shard missing" "mix.bin is missing" build/train "${run[@]}" "${recipe[@]}" --out "$work/run" --resume
cp "$work/mix.orig" "$work/mix.bin"
cp "$work/data/train.bin" "$work/train.orig"
other_content "$work/train.orig" "$work/data/train.bin"
expect_error "resume with train.bin replaced (same size)" "^error: --resume: train.bin (.*) has the same size but other content" \
    build/train "${run[@]}" "${recipe[@]}" --out "$work/run" --resume
cp "$work/train.orig" "$work/data/train.bin"
other_content "$work/data/val.bin" "$work/val.bin" && cp "$work/val.bin" "$work/data/val.bin"
expect_error "resume with val.bin replaced" "val.bin (.*) has the same size but other content" \
    build/train "${run[@]}" "${recipe[@]}" --out "$work/run" --resume
cp "$corpus/val.bin" "$work/data/val.bin"
[ "$keep" == "$(snapshot "$work/run")" ] && pass "the refused resumes left --out untouched" || fail "a refused resume changed --out"

# 5. Control: the same flags and files resume, and the run is the uninterrupted one.
if build/train "${run[@]}" "${recipe[@]}" --out "$work/run" --resume > "$work/resume.log" 2>&1; then
    diff <(cut -d, -f1-3 "$work/full/metrics.csv") <(cut -d, -f1-3 "$work/run/metrics.csv") > /dev/null \
        && cmp -s "$work/full/ckpt_00000008.safetensors" "$work/run/ckpt_00000008.safetensors" \
        && pass "resume with the run's --schedule and --mix: every loss and the last checkpoint bit for bit" \
        || fail "the resumed run differs from the uninterrupted one"
    grep -aq '"schedule' "$work/run/ckpt_00000008.safetensors" && pass "the resumed run's checkpoint keeps the schedule" \
        || fail "the resumed run's checkpoint forgot the schedule"
else
    fail "resume with the run's flags: $(tail -2 "$work/resume.log")"
fi

# 6. A checkpoint from before the recipe was recorded resumes, with one warning line.
rm -rf "$work/old" && mkdir -p "$work/old"
python3 - "$work/run/ckpt_00000004.safetensors" "$work/old/ckpt_00000004.safetensors" <<'EOF'
import json, struct, sys
blob = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + n])
del header["__metadata__"]["recipe"]
text = json.dumps(header, separators=(",", ":"))
text += " " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text.encode() + blob[8 + n:])
EOF
if build/train "${run[@]}" "${recipe[@]}" --out "$work/old" --resume > "$work/old.log" 2> "$work/old.err"; then
    [ "$(grep -c . "$work/old.err")" -eq 1 ] && grep -q "^warning: --resume: .* records no identities" "$work/old.err" \
        && pass "an old checkpoint without a recipe resumes with one warning: $(cat "$work/old.err")" \
        || fail "old checkpoint: stderr was: $(head -3 "$work/old.err")"
else
    fail "an old checkpoint without a recipe did not resume: $(tail -1 "$work/old.err")"
fi
summary
