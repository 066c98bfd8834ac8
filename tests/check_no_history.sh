#!/usr/bin/env bash
# Code says why it is as it is; its history (which session, call or issue found something, which
# version of a note measured it) lives in notes/ and docs/, where a reader can follow it. This
# check fails naming file:line for every code line outside notes/ and docs/ (sources, headers,
# scripts, tests, makefiles) that tells such history: a numbered session, call or issue, or a
# note's version ("notes/fa3-speed.md, v16", "notes v15", "v9 of the notes"). A comment may still
# point to a note by topic. Plain versions stay legal ("v1 shard", "x86-64-v3", a variable v0),
# as do "call" as a verb and "run 2" of a test. Planted lines show the check can fail.
set -uo pipefail
# shellcheck source=tests/lib.sh
source tests/lib.sh

pattern='\bsessions? #?[0-9]|\bissues? #?[0-9]|\bcalls? #?[0-9]|notes[^ ]*[ ,(]+v[0-9]+\b|\bv[0-9]+ of the notes|notes/[^ ]+\.md[^)]*\bv[0-9]+\b'

# history FILE...: "file:line: text" for every line that tells history
history() { grep -nHiE "$pattern" "$@" 2> /dev/null; }

# The code this holds to it: tracked and new files (not ignored) outside notes/, docs/ and build/,
# this file aside (it plants history on purpose).
code_files() {
    if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
        git ls-files --cached --others --exclude-standard
    else
        find . -type f -not -path './.git/*' | sed 's|^\./||'
    fi | grep -vE '^(notes|docs|build)/' |
        grep -E '\.(h|cuh|cu|cpp|c|sh|py|mk)$|(^|/)Makefile$|^\.ci/run$' | grep -vx 'tests/check_no_history.sh' | sort -u
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/planted.cuh" << 'EOF'
// the largest stalls (session 10's call 9)
// 0 before session 11 (notes/fa3-speed.md, v20).
#define X 1  // refused before (issue 41: a config edited to head dim 32)
// each one's start hides under the one before (notes/kv-cache.md, v10).
// the depth-0 variants (notes v15); a shortcut (v9 of the notes)
// Issue #7: a long prompt
EOF
cat > "$work/control.cuh" << 'EOF'
// a v1 shard carries no fingerprint; -march=x86-64-v3; cgroup v2 or v1
const int v0 = part ? V1 : 0;  // call the kernel once per row; run 2 in two pieces
// see notes/kv-cache.md, the decode step; forward variant 1, the rung below on the ladder
constexpr char kTag[16] = "longnet-rdzv-v3";  // q64, k64, v64: the float64 copies
EOF
found=$(history "$work/planted.cuh" | wc -l)
[ "$found" -eq 6 ] && pass "every planted history line is flagged (6 of 6)" ||
    fail "planted history lines flagged: $found of 6: $(history "$work/planted.cuh")"
flagged=$(history "$work/control.cuh")
[ -z "$flagged" ] && pass "versions, variables, links to a note by topic and 'call' as a verb are not flagged" ||
    fail "legitimate lines flagged: $flagged"

mapfile -t files < <(code_files)
[ ${#files[@]} -gt 100 ] || bail "found only ${#files[@]} code files: run from the repository root"
out=$(history "${files[@]}")
if [ -z "$out" ]; then
    pass "no history in code outside notes/ and docs/ (${#files[@]} files)"
else
    fail "history in code (say why instead, and point to notes/ by topic):"
    echo "$out" | sed 's/^/  /'
fi
finish
