#!/usr/bin/env bash
# A pattern is one module: each of the fixed, block-sparse and dilated patterns is
# its files in layers/patterns/ (named from its stem: <stem>_params.h, <stem>.h, <stem>.cuh, and
# any more of its own, listed below), its line of layers/patterns/list.h and its include line in
# each of all_params.h, all.h, all.cuh (and all_launch.cuh for a pattern with launches of its
# own); nothing else in the production code names it. Checked by taking each out in turn: a copy
# of the sources without its files and lines still builds (every header of core/, data/, comm/,
# layers/ and model/ with g++; the flash kernels' instantiation unit with nvcc to PTX, every
# kernel template instantiated from the list, without ptxas's minutes per copy). The canary, per
# pattern: the same copy with the files gone but the lines kept must fail, or the check could not
# fail.
#   tests/check_pattern_module.sh [--quick]   (--quick: the host headers only, no nvcc)
set -uo pipefail
cd "$(dirname "$0")/.."
CXX=${CXX:-g++}
NVCC=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/lib.sh
source tests/lib.sh
include_lists=(layers/patterns/all_params.h layers/patterns/all.h layers/patterns/all.cuh layers/patterns/all_launch.cuh)

# Per pattern: stem, its list line, its files, and the names that only its module may use.
stems=(fixed block_sparse dilated)
declare -A list_line files names
list_line[fixed]='X(Fixed, fixed)'
files[fixed]='fixed_params.h fixed.h fixed.cuh'
names[fixed]='FixedPattern|FixedParams|FixedArgs|FixedFlags|FixedSchedule|FixedLaunchArgs|AttnKind::Fixed|\.fixed\.|patterns/fixed'
list_line[block_sparse]='X(BlockSparse, block_sparse)'
files[block_sparse]='block_sparse_params.h block_sparse.h block_sparse.cuh block_layout.h block_sparse_tiles.h block_sparse_lists.cuh'
names[block_sparse]='BlockSparse[A-Z][A-Za-z]*|BlockLayout|AttnKind::BlockSparse|\.block_sparse\.|patterns/block_(sparse|layout)|block_sparse_[a-z_]+\('
list_line[dilated]='X(Dilated, dilated)'
files[dilated]='dilated_params.h dilated.h dilated.cuh dilated_launch.cuh dilated_reference.h'
names[dilated]='Dilated[A-Z][A-Za-z]*|AttnKind::Dilated|\.dilated\.|patterns/dilated|dilated_[a-z_]+\(|kMaxDilatedBranches'

host_build() {  # dir -> every header in one translation unit, syntax only
    local dir=$1
    (cd "$dir" && find core data comm layers model optim -name '*.h' | sort | sed 's/.*/#include "&"/' > all_headers.cpp &&
        "$CXX" -std=c++17 -fopenmp -fsyntax-only -I. -I"${CUDA_HOME:-/usr/local/cuda}/include" all_headers.cpp) > "$dir.log" 2>&1
}
# A copy of the sources without the module of $2: $3 = keep its lines (1) or not (0).
copy_without_module() {
    local dir=$1 stem=$2 keep_line=$3
    mkdir -p "$dir"
    cp -r core data comm layers model optim tools train.cu infer.cu "$dir"/
    for f in ${files[$stem]}; do rm "$dir/layers/patterns/$f"; done
    [ "$keep_line" = 1 ] && return
    grep -vF "${list_line[$stem]}" layers/patterns/list.h > "$dir/layers/patterns/list.h"
    for f in "${include_lists[@]}"; do grep -v "^#include \"layers/patterns/$stem[_.]" "$f" > "$dir/$f"; done
}

for stem in "${stems[@]}"; do
    grep -qF "${list_line[$stem]}" layers/patterns/list.h || { fail "layers/patterns/list.h has no line '${list_line[$stem]}'"; continue; }
    for f in ${files[$stem]}; do [ -f "layers/patterns/$f" ] || fail "$stem: no file layers/patterns/$f"; done
    for f in layers/patterns/all_params.h layers/patterns/all.h layers/patterns/all.cuh; do
        grep -q "^#include \"layers/patterns/$stem[_.]" "$f" || fail "$f has no include line of the $stem pattern"
    done

    # 1. Nothing outside the module and its lines names the pattern (comments aside).
    found=$(grep -rnE "${names[$stem]}" core data comm layers model tools train.cu infer.cu \
                --include='*.h' --include='*.cuh' --include='*.cu' --include='*.cpp' |
            grep -vE "^layers/patterns/($(echo "${files[$stem]}" | sed 's/ /|/g' | sed 's/\./\\./g')):" |
            grep -vE "^layers/patterns/all(_params|_launch)?\.(h|cuh):[0-9]+:#include \"layers/patterns/$stem[_.]" |
            grep -vE '^[^:]+:[0-9]+:\s*//' | grep -vE '^[^:]+:[0-9]+:.*[;{}]\s*//.*' || true)
    # A hit after code on a line may be in its comment: keep the line only if the code part names it.
    found=$(echo "$found" | while IFS= read -r line; do
                [ -z "$line" ] && continue
                code=${line#*:*:}; code=${code%%//*}
                echo "$code" | grep -qE "${names[$stem]}" && echo "$line"
            done)
    if [ -z "$found" ]; then pass "$stem: no production file outside the module names the pattern"
    else fail "$stem: production files outside the module name the pattern:"; echo "$found" | head -5; fi

    # 2. The canary: the files gone, the lines kept.
    copy_without_module "$work/canary_$stem" "$stem" 1
    if host_build "$work/canary_$stem"; then fail "$stem: the canary (module files removed, its lines kept) built: this check cannot fail"
    else pass "$stem: the canary fails: $(grep -m1 -oE 'fatal error: [^ ]+' "$work/canary_$stem.log")"; fi

    # 3. The files and the lines gone: everything still builds.
    copy_without_module "$work/without_$stem" "$stem" 0
    if host_build "$work/without_$stem"; then pass "without the $stem pattern: every header of core/ data/ comm/ layers/ model/ compiles"
    else fail "without the $stem pattern the headers do not compile:"; grep -m3 error "$work/without_$stem.log"; fi
    if [ "${1:-}" != --quick ]; then
        if (cd "$work/without_$stem" && nice "$NVCC" -std=c++17 -gencode=arch=compute_90a,code=compute_90a -I. --expt-relaxed-constexpr \
                -Xcompiler -fopenmp -ptx -o flash.ptx layers/cuda/attention/attention_flash.cu) > "$work/nvcc_$stem.log" 2>&1; then
            pass "without the $stem pattern: the flash kernels' instantiation unit compiles (its instances from the list)"
        else fail "without the $stem pattern attention_flash.cu does not compile:"; grep -m3 error "$work/nvcc_$stem.log"; fi
    fi
done
summary
