# Sourced by every shell test (tests/*.sh, tests/gpu/*.sh): the PASS/FAIL bookkeeping and the
# checks they share. The shell twin of tests/check.h.
#   pass TEXT / fail TEXT          print "PASS TEXT" / "FAIL TEXT" and count it
#   check NAME CMD...              pass NAME when CMD succeeds, else fail NAME
#   summary                        print "N passed, M failed" (the line tests/run_all.sh sums);
#                                  its status is 0 when nothing failed: a test's last line
#   finish                         summary, then exit with its status (to stop early)
#   bail TEXT                      fail TEXT and finish: a test that cannot go on
#   need_programs PROGRAM...       bail unless every PROGRAM is an executable file
#   need_corpus DIR [FILE]         bail unless DIR/FILE (train.bin) exists
#   need_gpu                       bail unless nvidia-smi sees a GPU
#   expect_error [-F] NAME PATTERN CMD...
#                                  CMD must fail (exit 1..123: not a timeout, not killed) with
#                                  exactly one stderr line, "error: ...", that matches PATTERN (a
#                                  grep regular expression; with -F a fixed string; "" for any);
#                                  the stderr first goes through the function stderr_filter when
#                                  the test defines one (e.g. to drop progress lines); the
#                                  message is left in $last_error
#   refused NAME WANT CMD...       expect_error -F "refused: NAME" WANT on CMD under a 60 s kill
#                                  (a test may define a narrower refused of its own after sourcing)
#   accepted NAME CMD...           CMD exits 0 within 60 s: the control beside a refusal
# shellcheck shell=bash
passed=0 failed=0
pass() { echo "PASS $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
summary() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; }
finish() { summary; exit $?; }
bail() { fail "$*"; finish; }
need_programs() {
    local prog
    for prog in "$@"; do [ -x "$prog" ] || bail "$prog not built"; done
}
need_corpus() {
    [ -f "$1/${2:-train.bin}" ] || bail "no corpus at $1 (run tests/test_data_cli.sh first)"
}
# A python that has PyTorch (the peers' tests), or nothing: python3, else Debian's.
torch_python() {
    local p
    for p in python3 /usr/bin/python3; do "$p" -c "import torch" 2> /dev/null && { echo "$p"; return; }; done
}
need_gpu() {
    nvidia-smi --query-gpu=name --format=csv,noheader > /dev/null 2>&1 || bail "no GPU"
}
expect_error() {
    local grep_flags=(-q)
    if [ "$1" = -F ]; then grep_flags=(-qF); shift; fi
    local name=$1 pattern=$2; shift 2
    local err code lines
    err=$("$@" 2>&1 >/dev/null); code=$?
    if declare -F stderr_filter > /dev/null; then err=$(printf '%s\n' "$err" | stderr_filter); fi
    # shellcheck disable=SC2034  # last_error: the tests read it after expect_error
    last_error=$err
    lines=$(printf '%s\n' "$err" | grep -c .)
    if [ $code -ne 0 ] && [ $code -lt 124 ] && [ "$lines" -eq 1 ] && [[ "$err" == error:* ]] \
       && grep "${grep_flags[@]}" -- "$pattern" <<< "$err"; then
        pass "$name -> $err"
    else
        fail "$name (exit $code$([ $code -eq 124 ] && echo ': timed out'), $lines lines): $err"
    fi
}
refused() {  # name, what the message must contain, command...
    local name=$1 want=$2; shift 2
    expect_error -F "refused: $name" "$want" timeout -s KILL 60 "$@"
}
accepted() {
    local name=$1; shift
    local err code
    err=$(timeout -s KILL 60 "$@" 2>&1 >/dev/null); code=$?
    if [ $code -eq 0 ]; then pass "accepted: $name"; else fail "accepted: $name (exit $code): $(tail -n 1 <<< "$err")"; fi
}
