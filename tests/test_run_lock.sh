#!/usr/bin/env bash
# One writer per train --out, and metrics.csv in step with checkpoints: two runs on one folder
# (one runs, the other is refused naming the holder), a lock left by a killed run (no block: taken
# over, saying so), kill -9 then --resume (every step's rows exactly once), a file-size limit (one
# line, not a signal); one writer per output file (infer, data_tool, attention_tool); lock files
# that are the program's own (core/run_lock.h): a user's X.lock or D/.lock never touched, a file of
# theirs at the lock's name refused and kept, locks removed on SIGTERM and SIGINT. Each refusal has
# an accepted twin, so the test can fail.
# Usage: tests/test_run_lock.sh [CORPUS_DIR]   Prints PASS/FAIL lines and "N passed, M failed".
set -uo pipefail
corpus=${1:-build/test_corpus}
work=build/test_run_lock
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=tests/lib.sh
source tests/lib.sh
need_programs build/train
need_corpus "$corpus"
command -v flock > /dev/null || bail "flock (util-linux) not installed"

# The tiny model of tests/test_train_cli.sh: 20 steps, checkpoints at 10 and 20.
tiny=(tests/last_wins.sh ./build/train --device cpu --data "$corpus" --layers 2 --width 64 --heads 1 --seq-len 32 --batch 4 --steps 20 --warmup 4
      --lr 3e-3 --val-every 10 --val-batches 2 --ckpt-every 10 --log-every 5 --sample-tokens 0)
# The run's losses by step, the columns a resumed run reproduces bit for bit.
losses() { cut -d, -f1-3 "$1/metrics.csv"; }
sum_of() { (cd "$1" && find . -type f -exec md5sum {} + | sort); }
# Rows of metrics.csv whose (step, split) appears more than once, or train steps 1..$2 missing.
bad_rows() {
    awk -F, -v n="$2" 'NR > 1 { seen[$1 "," $2]++; if ($2 == "train") t[$1] = 1 }
        END { for (k in seen) if (seen[k] > 1) print "twice: " k; for (s = 1; s <= n; s++) if (!(s in t)) print "missing: train " s }' "$1/metrics.csv"
}

# 1. Two runs started together on one --out, and a third on its own folder (the reference, and
#    the accepted twin: a run beside another on another folder is not refused).
dup="$work/dup"
"${tiny[@]}" --out "$dup" > "$work/a.log" 2> "$work/a.err" & pa=$!
"${tiny[@]}" --out "$dup" > "$work/b.log" 2> "$work/b.err" & pb=$!
"${tiny[@]}" --out "$work/solo" > "$work/solo.log" 2>&1 & ps=$!
wait $pa; ca=$?; wait $pb; cb=$?; wait $ps; cs=$?
[ $cs -eq 0 ] && pass "a run beside them on another --out is not refused" || fail "the run on its own --out: exit $cs, $(tail -n 1 "$work/solo.log")"
if [ $ca -eq 0 ] && [ $cb -ne 0 ]; then winner=$pa loser=b code=$cb
elif [ $cb -eq 0 ] && [ $ca -ne 0 ]; then winner=$pb loser=a code=$ca
else winner="" loser="" code=""; fail "two runs on one --out: exits $ca and $cb (exactly one must run): $(cat "$work/a.err" "$work/b.err")"; fi
if [ -n "$winner" ]; then
    err=$(cat "$work/$loser.err")
    if [ "$code" -lt 124 ] && [ "$(grep -c . <<< "$err")" -eq 1 ] \
       && grep -qF -- "error: --out $dup is in use by another run (pid $winner, which holds $dup/.longnet-lock): wait for it to finish, or choose another --out" <<< "$err"; then
        pass "the second run on one --out is refused, naming the winner (exit $code) -> $err"
    else
        fail "the refused run (exit $code, winner pid $winner): $err"
    fi
    files=$(cd "$dup" && ls -A | tr '\n' ' ')
    [ "$files" = "ckpt_00000010.safetensors ckpt_00000020.safetensors metrics.csv " ] \
        && pass "the folder holds the winner's files only, its lock removed when it ended ($files)" || fail "the folder holds: $files"
    diff <(losses "$dup") <(losses "$work/solo") > /dev/null && [ -z "$(bad_rows "$dup" 20)" ] \
        && pass "its metrics.csv is the winner's run, every step once (as the run on its own folder)" \
        || fail "its metrics.csv differs from a lone run's: $(bad_rows "$dup" 20 | head -3 | tr '\n' ' ')"
    cmp -s "$dup/ckpt_00000020.safetensors" "$work/solo/ckpt_00000020.safetensors" \
        && pass "its final checkpoint is byte-identical to the lone run's" || fail "its final checkpoint differs from the lone run's"
fi

# 2. kill -9 (the test hook raises SIGKILL after a step) leaves .longnet-lock with a dead pid:
#    --resume is not blocked (it takes the lock over, saying so), and the resumed metrics.csv has
#    every step exactly once. Killed right after
#    the checkpoint of step 10 (the row of the step a checkpoint covers must be on disk), and
#    mid-interval at step 13 (a lock held by another process refuses its --resume first).
for at in 10 13; do
    d="$work/killed$at"
    { (LNGPT_KILL_AT_STEP=$at exec "${tiny[@]}" --out "$d") > "$work/killed$at.log" 2>&1; } 2>/dev/null
    code=$?
    if [ $code -eq 137 ] && [ -s "$d/.longnet-lock" ]; then pass "killed at step $at (exit $code), $d/.longnet-lock left ($(cat "$d/.longnet-lock"))"
    else fail "the kill hook at step $at: exit $code, .longnet-lock: $(cat "$d/.longnet-lock" 2>&1)"; fi
    if [ $at -eq 13 ]; then
        # Its lock held by another process: --resume is refused at once, naming that process, and
        # the folder's files stay as they were; the resume below, once the holder is gone, is
        # its accepted twin.
        flock -o "$d/.longnet-lock" sleep 30 & holder=$!
        for _ in $(seq 50); do grep -q " $holder " /proc/locks 2>/dev/null && break; sleep 0.1; done
        before=$(sum_of "$d")
        expect_error -F "train --resume on a folder another process has locked" \
            "--out $d is in use by another run (pid $holder, which holds $d/.longnet-lock)" "${tiny[@]}" --resume --out "$d"
        [ "$(sum_of "$d")" = "$before" ] && pass "the refused run changed nothing in the folder" || fail "the refused run changed $d"
        pkill -P "$holder" sleep; kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
    fi
    if "${tiny[@]}" --resume --out "$d" > "$work/resumed$at.log" 2>&1; then
        grep -q "^note: $d/.longnet-lock was left by pid [0-9]*, which ended without removing it (killed?): this run takes it over" \
            "$work/resumed$at.log" && [ ! -e "$d/.longnet-lock" ] \
            && pass "the resumed run said it took over the lock the kill left, and removed it when it ended" \
            || fail "the resumed run's note on the stale lock: $(grep -m1 note "$work/resumed$at.log"); $(ls -A "$d" | tr '\n' ' ')"
        rows=$(bad_rows "$d" 20)
        [ -z "$rows" ] && diff <(losses "$d") <(losses "$work/solo") > /dev/null \
            && pass "resumed after the kill at step $at: every step's rows once, the losses of an unbroken run" \
            || fail "after the kill at step $at: ${rows:-losses differ from an unbroken run}"
    else
        fail "--resume after kill -9 at step $at: $(tail -n 1 "$work/resumed$at.log")"
    fi
done
# A kill -9 from outside at a moment no hook picks, with a checkpoint every step (most of the run
# is spent in a save), then --resume.
d="$work/shot"
# The moment: a random step from 4 to 10 logged, then up to 90 ms. A run that finished all 20 steps
# before the kill came (a fast or idle machine) leaves nothing to resume: it is started again and
# killed earlier, up to 5 times.
for attempt in 1 2 3 4 5; do
    rm -rf "$d"
    "${tiny[@]}" --ckpt-every 1 --out "$d" > "$work/shot.log" 2>&1 & victim=$!
    if [ "$attempt" -eq 1 ]; then k=$((4 + RANDOM % 7)); else k=$((1 + RANDOM % 3)); fi
    for _ in $(seq 600); do grep -q "^$k,train," "$d/metrics.csv" 2> /dev/null && break; sleep 0.02; done
    [ "$attempt" -eq 1 ] && sleep "0.0$((RANDOM % 10))"
    kill -9 "$victim" 2>/dev/null; wait "$victim" 2>/dev/null
    code=$?
    [ $code -eq 137 ] && break
    echo "INFO kill -9 from outside, attempt $attempt: the run ended by itself (exit $code) before the kill; again, earlier"
done
last=$(ls "$d" | grep -o 'ckpt_[0-9]*' | tail -n 1)
if [ -n "$last" ] && "${tiny[@]}" --ckpt-every 1 --resume --out "$d" > "$work/shot_resumed.log" 2>&1; then
    rows=$(bad_rows "$d" 20)
    [ -z "$rows" ] && diff <(losses "$d") <(losses "$work/solo") > /dev/null \
        && pass "kill -9 from outside after $last, resumed: every step's rows once, the losses of an unbroken run" \
        || fail "kill -9 from outside after $last: ${rows:-losses differ from an unbroken run}"
else
    fail "kill -9 from outside (last checkpoint '$last'), --resume: $(tail -n 1 "$work/shot_resumed.log")"
fi

# 3. A file-size limit (ulimit -f, 1 KiB blocks): the write fails (train ignores SIGXFSZ) and the
#    run stops in one line with exit 1, not killed by the signal (exit 153) with no message.
limited() { local blocks=$1; shift; bash -c 'ulimit -f "$0"; exec "$@"' "$blocks" "$@"; }
expect_error "metrics.csv past ulimit -f 1" "cannot write $work/limit_m/metrics.csv (File too large)" \
    limited 1 "${tiny[@]}" --steps 30 --ckpt-every 0 --out "$work/limit_m"
tail -c 1 "$work/limit_m/metrics.csv" | od -An -c | grep -q '\\n' && [ -z "$(awk -F, 'NF != 7' "$work/limit_m/metrics.csv")" ] \
    && pass "the metrics.csv it stopped on ends on a whole row" || fail "metrics.csv ends on a torn row: $(tail -n 1 "$work/limit_m/metrics.csv")"
expect_error "a checkpoint past ulimit -f 64" "writing checkpoint $work/limit_c/ckpt_00000002.safetensors failed" \
    limited 64 "${tiny[@]}" --steps 2 --ckpt-every 0 --out "$work/limit_c"
if limited 100000 "${tiny[@]}" --steps 2 --ckpt-every 0 --out "$work/limit_ok" > "$work/limit_ok.log" 2>&1; then
    pass "the same run under a limit it fits in"
else
    fail "the run under ulimit -f 100000: $(tail -n 1 "$work/limit_ok.log")"
fi


# 4. One writer per output file: infer --tasks-out P and data_tool's --out X (tasks, task-shard,
#    prepare) hold a flock on P.longnet-lock / X.longnet-lock while they run and remove it when
#    they end. While another process holds it (flock here, on a lock file of ours, as a first run
#    would), the command is refused in one line naming that pid and writes nothing; once the
#    holder is gone the same command runs (its accepted twin: the stale lock left behind does not
#    block) and leaves no lock file.
need_programs build/infer build/data_tool
locks="$work/locks"
mkdir -p "$locks"
held() {  # name, output (as the flag gives it), flag, command...
    local name=$1 out=$2 flag=$3; shift 3
    local lock="${out%/}.longnet-lock"
    printf 'longnet-gpt lock, pid 1\n' > "$lock"
    flock -o "$lock" sleep 30 & local holder=$!
    for _ in $(seq 50); do grep -q " $holder " /proc/locks 2>/dev/null && break; sleep 0.1; done
    local before; before=$(ls -A "$locks" | tr '\n' ' ')
    expect_error -F "$name while another process holds its lock" \
        "$flag $out is in use by another run (pid $holder, which holds $lock): wait for it to finish, or choose another $flag" \
        timeout -s KILL 60 "$@"
    [ "$(ls -A "$locks" | tr '\n' ' ')" = "$before" ] && pass "$name: the refused run wrote nothing ($before)" \
        || fail "$name: the refused run changed $locks: $(ls -A "$locks" | tr '\n' ' ')"
    pkill -P "$holder" sleep; kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
    accepted "$name once the holder is gone (its stale lock file left)" "$@"
    [ ! -e "$lock" ] && pass "$name: the run removed $lock when it ended" || fail "$name left $lock behind"
}
held "data_tool tasks --out" "$locks/t.jsonl" --out \
    build/data_tool tasks --data "$corpus" --task passkey --lengths 256 --depths 0.5 --out "$locks/t.jsonl"
held "data_tool task-shard --out" "$locks/s.bin" --out \
    build/data_tool task-shard --data "$corpus" --doc-tokens 2K --tokens 4K --needle-every 512 --passkey-every 1024 --out "$locks/s.bin"
head -c 30000 "$corpus/bible.txt" > "$work/text.txt" 2>/dev/null || head -c 30000 /dev/urandom | base64 > "$work/text.txt"
held "data_tool prepare --out" "$locks/corpus/" --out build/data_tool prepare --text "$work/text.txt" --vocab 1000 --out "$locks/corpus/"
held "infer --tasks-out" "$locks/report" --tasks-out \
    build/infer --device cpu --checkpoint "$work/solo" --tasks "$locks/t.jsonl" --ctx 300 --tasks-out "$locks/report"
[ -s "$locks/report.csv" ] && [ -s "$locks/report_items.csv" ] && pass "infer --tasks-out wrote its CSVs" || fail "infer --tasks-out wrote no CSVs"
held "infer --save-cache" "$locks/kv.safetensors" --save-cache \
    build/infer --device cpu --checkpoint "$work/solo" --prompt "And" --max-new 1 --save-cache "$locks/kv.safetensors"
held "infer --per-position" "$locks/pos.csv" --per-position \
    build/infer --device cpu --checkpoint "$work/solo" --perplexity "$work/text.txt" --ctx 64 --per-position "$locks/pos.csv"
held "attention_tool --out" "$locks/attn.safetensors" --out \
    build/attention_tool --N 67 --H 3 --D 64 --dtype fp64 --seed 3 --out "$locks/attn.safetensors"
[ -s "$locks/kv.safetensors" ] && [ -s "$locks/pos.csv" ] && [ -s "$locks/attn.safetensors" ] \
    && pass "infer --save-cache, --per-position and attention_tool --out wrote their files" || fail "a locked output was not written: $(ls "$locks")"
# Two writers of one task file started together: exactly one writes it, the other is refused.
T=(build/data_tool tasks --data "$corpus" --task passkey --lengths 4K --depths 0,0.5,1 --samples 8 --out "$locks/two.jsonl")
"${T[@]}" > "$work/two_a.log" 2>&1 & pa=$!
"${T[@]}" > "$work/two_b.log" 2>&1 & pb=$!
wait $pa; ca=$?; wait $pb; cb=$?
if [ $((ca == 0)) -ne $((cb == 0)) ] && grep -qF "is in use by another run (pid" "$work/two_a.log" "$work/two_b.log"; then
    pass "two data_tool tasks on one --out together: one writes (exits $ca, $cb), the other is refused naming it"
elif [ $ca -eq 0 ] && [ $cb -eq 0 ]; then
    pass "two data_tool tasks on one --out together ran one after the other (exits 0, 0: the first ended before the second began)"
else
    fail "two data_tool tasks on one --out: exits $ca and $cb: $(cat "$work/two_a.log" "$work/two_b.log" | grep error)"
fi
[ ! -e "$locks/two.jsonl.longnet-lock" ] && pass "no lock file left after both" || fail "$locks/two.jsonl.longnet-lock left behind"

# 5. Lock files are the program's own. A user's X.lock (a package.lock, Cargo.lock) beside an
#    output, or D/.lock in a run folder, keeps its bytes through a run; a user's file at the lock's
#    own name (or a link there) is refused in one line naming it, and kept, the output not
#    written; SIGTERM and SIGINT end a run with 128 + the signal and remove its lock.
mine="$work/mine"
mkdir -p "$mine/run"
for f in tasks.jsonl.lock Cargo.lock run/.lock; do printf '{"lockfileVersion": 3}\n' > "$mine/$f"; done
kept() {  # name, file: its bytes are the user's still
    [ "$(cat "$2" 2>&1)" = '{"lockfileVersion": 3}' ] && pass "$1: the user's $2 kept its bytes" || fail "$1: $2 is now: $(cat "$2" 2>&1)"
}
accepted "data_tool tasks --out X beside a user's X.lock" \
    build/data_tool tasks --data "$corpus" --task passkey --lengths 256 --depths 0.5 --out "$mine/tasks.jsonl"
kept "data_tool tasks" "$mine/tasks.jsonl.lock"
accepted "infer --tasks-out P beside a user's P.lock" \
    build/infer --device cpu --checkpoint "$work/solo" --tasks "$mine/tasks.jsonl" --ctx 300 --tasks-out "$mine/Cargo"
kept "infer --tasks-out" "$mine/Cargo.lock"
"${tiny[@]}" --steps 2 --ckpt-every 0 --out "$mine/run" > "$work/mine_run.log" 2>&1 \
    && pass "train --out D holding a user's D/.lock" || fail "train --out D with D/.lock: $(tail -n 1 "$work/mine_run.log")"
kept "train --out" "$mine/run/.lock"
[ ! -e "$mine/tasks.jsonl.longnet-lock" ] && [ ! -e "$mine/Cargo.longnet-lock" ] && [ ! -e "$mine/run/.longnet-lock" ] \
    && pass "the runs removed their own lock files" || fail "a lock file of ours left: $(ls -A "$mine" "$mine/run" | tr '\n' ' ')"
mkdir -p "$mine/d2" && echo "my notes" | tee "$mine/notes.txt.longnet-lock" > "$mine/d2/.longnet-lock"
ln -s notes.txt.longnet-lock "$mine/linked.jsonl.longnet-lock"
expect_error -F "data_tool tasks --out X where X.longnet-lock is a user's file" \
    "--out $mine/notes.txt: $mine/notes.txt.longnet-lock exists and is not a lock file of this program" \
    build/data_tool tasks --data "$corpus" --task passkey --lengths 256 --depths 0.5 --out "$mine/notes.txt"
expect_error -F "data_tool tasks --out X where X.longnet-lock is a link" \
    "--out $mine/linked.jsonl: its lock file $mine/linked.jsonl.longnet-lock is a symbolic link, which is never followed" \
    build/data_tool tasks --data "$corpus" --task passkey --lengths 256 --depths 0.5 --out "$mine/linked.jsonl"
expect_error -F "train --out D where D/.longnet-lock is a user's file" \
    "--out $mine/d2: $mine/d2/.longnet-lock exists and is not a lock file of this program" "${tiny[@]}" --out "$mine/d2"
[ "$(cat "$mine/notes.txt.longnet-lock")" = "my notes" ] && [ "$(cat "$mine/d2/.longnet-lock")" = "my notes" ] && [ -L "$mine/linked.jsonl.longnet-lock" ] \
    && [ ! -e "$mine/notes.txt" ] && [ ! -e "$mine/linked.jsonl" ] && [ "$(ls -A "$mine/d2")" = ".longnet-lock" ] \
    && pass "the user's files at the lock names kept their bytes, and nothing was written" || fail "a refused run changed $mine: $(ls -A "$mine" "$mine/d2" | tr '\n' ' ')"
# A run ended by a signal, while it holds its lock: 143 for SIGTERM, 130 for SIGINT (a background
# job of a script ignores SIGINT: env gives it back its default, as a terminal's job has it).
for sig in TERM INT; do
    d="$work/signal_$sig"
    env --default-signal=INT ./build/train --device cpu --data "$corpus" --layers 2 --width 64 --heads 1 --seq-len 32 --batch 4 \
        --steps 100000 --warmup 4 --val-every 0 --val-batches 1 --ckpt-every 0 --log-every 1 --sample-tokens 0 --out "$d" \
        > "$work/signal_$sig.log" 2>&1 & victim=$!
    for _ in $(seq 300); do [ -e "$d/.longnet-lock" ] && grep -q "^2,train," "$d/metrics.csv" 2> /dev/null && break; sleep 0.1; done
    held_lock=$(cat "$d/.longnet-lock" 2>&1)
    kill -s "$sig" "$victim"; wait "$victim"; code=$?
    want=$((128 + $(kill -l "$sig")))
    if [ "$held_lock" = "longnet-gpt lock, pid $victim" ] && [ $code -eq $want ] && [ ! -e "$d/.longnet-lock" ]; then
        pass "train ended by SIG$sig while holding $d/.longnet-lock: exit $code, the lock removed"
    else
        fail "train and SIG$sig: the lock held '$held_lock', exit $code (want $want), $(ls -A "$d" | tr '\n' ' ')"
    fi
done

summary
