#!/usr/bin/env bash
# A pattern is one module (issue 23): the Sparse Transformer's fixed pattern is its three files,
# layers/patterns/fixed_params.h, fixed.h and fixed.cuh, its line of layers/patterns/list.h and its
# include line in each of all_params.h, all.h and all.cuh; nothing else in the production code
# names it. Checked by taking it out: a copy of the sources without those files and lines still builds (every header of core/, data/, comm/, layers/
# and model/ with g++, the flash kernels' instantiation unit with nvcc, whose instance tables
# come from the list). The canary: the same copy with the files gone but the line kept must
# fail, or the check could not fail.
#   tests/check_pattern_module.sh [--quick]   (--quick: the host headers only, no nvcc)
set -uo pipefail
cd "$(dirname "$0")/.."
CXX=${CXX:-g++}
NVCC=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/lib.sh
source tests/lib.sh

module_files=(layers/patterns/fixed_params.h layers/patterns/fixed.h layers/patterns/fixed.cuh)
# Its lines: the list's entry and the three include lines.
list_line='X(Fixed, fixed)'
include_lists=(layers/patterns/all_params.h layers/patterns/all.h layers/patterns/all.cuh)
grep -qF "$list_line" layers/patterns/list.h || bail "layers/patterns/list.h has no line '$list_line'"
for f in "${include_lists[@]}"; do
    grep -q '^#include "layers/patterns/fixed' "$f" || bail "$f has no include line of the fixed pattern"
done

# 1. Nothing outside the module and its lines names the pattern.
names=$(grep -rnE 'FixedPattern|FixedParams|FixedArgs|FixedFlags|FixedSchedule|AttnKind::Fixed|\.fixed\.|patterns/fixed' \
            core data comm layers model tools train.cu infer.cu --include='*.h' --include='*.cuh' --include='*.cu' --include='*.cpp' |
        grep -vE '^layers/patterns/fixed(_params)?\.(h|cuh):' | grep -vE '^layers/patterns/all(_params)?\.(h|cuh):[0-9]+:#include "layers/patterns/fixed')
if [ -z "$names" ]; then pass "no production file outside the module names the fixed pattern"
else fail "production files outside the module name the fixed pattern:"; echo "$names" | head -5; fi

# A copy of the sources: $1 = keep the list line (1) or not (0).
copy_without_module() {
    local dir=$1 keep_line=$2
    mkdir -p "$dir"
    cp -r core data comm layers model tools train.cu infer.cu "$dir"/
    for f in "${module_files[@]}"; do rm "$dir/$f"; done
    [ "$keep_line" = 1 ] && return
    grep -vF "$list_line" layers/patterns/list.h > "$dir/layers/patterns/list.h"
    for f in "${include_lists[@]}"; do grep -v '^#include "layers/patterns/fixed' "$f" > "$dir/$f"; done
}
host_build() {  # dir -> every header in one translation unit, syntax only
    local dir=$1
    (cd "$dir" && find core data comm layers model -name '*.h' | sort | sed 's/.*/#include "&"/' > all_headers.cpp &&
        "$CXX" -std=c++17 -fopenmp -fsyntax-only -I. -I"${CUDA_HOME:-/usr/local/cuda}/include" all_headers.cpp) > "$dir.log" 2>&1
}

# 2. The canary: the files gone, the lines kept.
copy_without_module "$work/canary" 1
if host_build "$work/canary"; then fail "the canary (module files removed, its lines kept) built: this check cannot fail"
else pass "the canary fails: $(grep -m1 -oE 'fatal error: [^ ]+' "$work/canary.log")"; fi

# 3. The files and the lines gone: everything still builds.
copy_without_module "$work/without" 0
if host_build "$work/without"; then pass "without the fixed pattern: every header of core/ data/ comm/ layers/ model/ compiles"
else fail "without the fixed pattern the headers do not compile:"; grep -m3 error "$work/without.log"; fi
if [ "${1:-}" != --quick ]; then
    if (cd "$work/without" && "$NVCC" -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I. --expt-relaxed-constexpr \
            -Xcompiler -fopenmp -c -o flash.o layers/cuda/attention/attention_flash.cu) > "$work/nvcc.log" 2>&1; then
        pass "without the fixed pattern: the flash kernels' instantiation unit compiles (its instances from the list)"
    else fail "without the fixed pattern attention_flash.cu does not compile:"; grep -m3 error "$work/nvcc.log"; fi
fi
summary
