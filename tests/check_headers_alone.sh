#!/usr/bin/env bash
# Every header of core/, data/, comm/, layers/, model/, optim/, eval/, tests/ and bench/ compiles on its
# own: a translation unit holding only `#include "<header>"` builds (.h with the host compiler, .cuh with
# nvcc). So a header that leans on what its includer happened to include before it (a missing
# include) fails here, not in the next file that includes it first. Both stop after the front end
# (g++ -fsyntax-only; nvcc -ptx, whose device front end parses host functions too, or nvcc -cuda,
# host and device front ends, for a header with __CUDA_ARCH__ branches, which -ptx would skip on
# the host side): a missing include is a parse error, and the build compiles every header through
# to machine code anyway.
#   tests/check_headers_alone.sh [header...]   (default: all of them)
set -uo pipefail
cd "$(dirname "$0")/.."
CXX=${CXX:-g++}
NVCC=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

compile_alone() {  # header -> exit status; the compiler's first error on stderr
    local h=$1 tu
    tu="$work/$(echo "$h" | tr '/.' '__')"
    case $h in
        *.cuh) printf '#include "%s"\n' "$h" > "$tu.cu"
               local front=(-ptx -o "$tu.ptx")
               grep -q '__CUDA_ARCH__' "$h" && front=(-cuda -o "$tu.ii")
               "$NVCC" -std=c++17 -arch=compute_90a -I. -I"$work" --expt-relaxed-constexpr \
                   -Xcompiler -fopenmp "${front[@]}" "$tu.cu" > "$tu.log" 2>&1 ;;
        *)     printf '#include "%s"\n' "$h" > "$tu.cpp"
               "$CXX" -std=c++17 -fopenmp -fsyntax-only -I. -I"$work" -I"${CUDA_HOME:-/usr/local/cuda}/include" \
                   "$tu.cpp" > "$tu.log" 2>&1 ;;
    esac
    local code=$?
    [ $code -eq 0 ] || grep -m1 -E 'error' "$tu.log" >&2
    return $code
}
export -f compile_alone
export work CXX NVCC

# The check can fail: headers that use a type of the project without including its header
# (layers/attention_pattern.h, layers/cuda/attention/params.cuh) must be refused.
printf '#pragma once\ninline int broken_causal(const AttnPattern& p) { return p.causal; }\n' > "$work/missing_include.h"
printf '#pragma once\n__device__ inline int broken_token(flash::RowMap m) { return m.token(1); }\n' > "$work/missing_include.cuh"
# shellcheck source=tests/lib.sh
source tests/lib.sh
for canary in missing_include.h missing_include.cuh; do
    if (cd "$work" && compile_alone "$canary") 2> /dev/null; then
        fail "the canary $canary (a missing include) compiled: this check cannot fail"
    else
        passed=$((passed + 1))
    fi
done

if [ $# -gt 0 ]; then headers=("$@"); else
    mapfile -t headers < <(find core data comm layers model optim eval tests bench -name '*.h' -o -name '*.cuh' | sort)
fi
# Two at a time (CI has 2 cores); each prints its name when it fails.
results=$(printf '%s\n' "${headers[@]}" | xargs -P 2 -I{} bash -c 'if compile_alone "{}"; then echo "ok {}"; else echo "FAIL {}"; fi' 2>&1)
echo "$results" | grep -v '^ok ' || true
ok=$(echo "$results" | grep -c '^ok ')
bad=$(echo "$results" | grep -c '^FAIL ')
passed=$((passed + ok)) failed=$((failed + bad))
echo "headers compiled alone: $ok of ${#headers[@]}"
summary
