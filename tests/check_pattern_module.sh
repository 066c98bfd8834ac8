#!/usr/bin/env bash
# A pattern is one module: each of the fixed, block-sparse and dilated patterns is
# its files in layers/patterns/ (named from its stem: <stem>_params.h, <stem>.h, <stem>.cuh, and
# any more of its own, listed below), its line of layers/patterns/list.h and its include line in
# each of all_params.h, all.h, all.cuh (and all_launch.cuh for a pattern with launches of its
# own); nothing else in the production code names it. Checked by taking each out in turn: a copy
# of the sources without its files and lines still builds (every header of core/, data/, comm/,
# layers/ and model/ with g++; the flash kernels' instantiation unit through nvcc's front ends,
# host and device, every kernel template instantiated from the list, without the device code
# generation's minute per copy: -fdevice-syntax-only). The canary, per
# pattern: the same copy with the files gone but the lines kept must fail, or the check could not
# fail.
# What a user and a reader meet must not outlive a module either: no flag declared outside
# layers/patterns/ is named after a pattern (--dilated-layers would be left, failing at run
# time: one generic --layer-pattern takes the registry's names); no line of train --help or
# infer --help names a pattern or one of its flags except the pattern's own flag lines and the
# registry's list of names; no row of docs/*.md or README.md names a flag named after a pattern
# that no module declares. Each of the three also runs on a scratch copy with a leak planted,
# which it must find.
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
files[dilated]='dilated_params.h dilated.h dilated.cuh dilated_launch.cuh dilated_reference.h dilated_tuning.h'
names[dilated]='Dilated[A-Z][A-Za-z]*|AttnKind::Dilated|\.dilated\.|patterns/dilated|dilated_[a-z_]+\(|kMaxDilatedBranches|dilated_(min_chunk_tokens|forward_group|backward_group)'

# The flash kernels' instantiation unit in dir $1 through nvcc's front ends (log in $2).
nvcc_front() {
    (cd "$1" && nice "$NVCC" -std=c++17 -gencode=arch=compute_90a,code=compute_90a -I. --expt-relaxed-constexpr \
        -Xcompiler -fopenmp -fdevice-syntax-only -c -o flash.o layers/cuda/attention/attention_flash.cu) > "$2" 2>&1
}
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
        if nvcc_front "$work/without_$stem" "$work/nvcc_$stem.log"; then
            pass "without the $stem pattern: the flash kernels' instantiation unit compiles (its instances from the list)"
        else fail "without the $stem pattern attention_flash.cu does not compile:"; grep -m3 error "$work/nvcc_$stem.log"; fi
    fi
done

# The nvcc canary: front ends that stop before device code must still instantiate the kernels the
# list names, or step 3 could pass a copy whose kernels no longer compile. A static_assert that only
# an instance reached through the list trips (the fixed pattern's kept_bits) must fail the unit.
if [ "${1:-}" != --quick ]; then
    mkdir -p "$work/nvcc_canary" && cp -r core data comm layers model optim "$work/nvcc_canary"/
    f=$work/nvcc_canary/layers/patterns/fixed.cuh
    sed -i -E 's/(static uint32_t kept_bits\(const Params&, int, int, int\) \{)/\1 static_assert(NC < 0, "nvcc canary");/' "$f"
    if ! grep -q 'nvcc canary' "$f"; then
        fail "the nvcc canary could not be planted: layers/patterns/fixed.cuh has no kept_bits template to plant it in (update this check)"
    elif nvcc_front "$work/nvcc_canary" "$work/nvcc_canary.log"; then
        fail "the nvcc canary (a static_assert in an instance the list reaches) compiled: step 3's nvcc check cannot fail"
    elif grep -q 'static assertion failed with "nvcc canary"' "$work/nvcc_canary.log"; then
        pass "the nvcc canary fails on its static_assert: the list's instances are compiled"
    else
        fail "the nvcc canary failed for another reason: $(grep -m1 error "$work/nvcc_canary.log")"
    fi
fi

# ---- Flags, help lines and doc rows. A pattern's name (kName) and flags, read from its module.
registry=()  # every pattern's name, in the list's order
for stem in $(sed -nE 's/^ *X\([A-Za-z]+, ([a-z_]+)\).*/\1/p' layers/patterns/list.h); do
    registry+=("$(sed -nE 's/.*kName = "([^"]+)".*/\1/p' "layers/patterns/$stem.h")")
done
module_flags=$(grep -ohE 'add_(int|float|string|bool)\("[a-z0-9-]+"' layers/patterns/*.h layers/patterns/*.cuh |
               sed -E 's/.*"(.*)"/\1/' | sort -u)
# The registry's names as attn_kind_names() lists them ("dense, dilated, block-sparse or fixed").
names_list=""
for i in "${!registry[@]}"; do
    if [ "$i" -eq 0 ]; then names_list=${registry[0]}
    elif [ "$i" -eq $((${#registry[@]} - 1)) ]; then names_list+=" or ${registry[i]}"
    else names_list+=", ${registry[i]}"; fi
done
# The names the checks look for: the modules taken out above (dense, the kind every pattern starts
# as, stays in every build).
removable=()
for stem in "${stems[@]}"; do removable+=("$(sed -nE 's/.*kName = "([^"]+)".*/\1/p' "layers/patterns/$stem.h")"); done
names_re=$(printf '%s|' "${removable[@]}"); names_re=${names_re%|}
# A flag named after a pattern: the name as one of its dash-separated words (--dilated-layers).
named_flag_re="--([a-z0-9]+-)*($names_re)(-[a-z0-9]+)*"
is_module_flag() { grep -qxF -- "$1" <<< "$module_flags"; }

# Flags declared outside the modules (dir -> the declarations that name a pattern).
flag_decl_leaks() {
    (cd "$1" && grep -rsnE "add_(int|float|string|bool)\(\"([a-z0-9]+-)*($names_re)(-[a-z0-9]+)*\"" \
        core data comm eval layers model tools train.cu infer.cu --include='*.h' --include='*.cuh' --include='*.cu' --include='*.cpp' |
        grep -v '^layers/patterns/' || true)
}
# Help lines (a --help text on stdin) that name a pattern or its flags outside its own flag lines.
help_leaks() {
    local line flag rest
    while IFS= read -r line; do
        flag=$(sed -nE 's/^  --([a-z0-9-]+).*/\1/p' <<< "$line")
        [ -n "$flag" ] && is_module_flag "$flag" && continue  # the module's own line
        rest=${line//"$names_list"/}
        rest=${rest#"  --$flag"}
        if grep -qwE -- "$names_re" <<< "$rest" || grep -qE -- "$named_flag_re" <<< "$line"; then echo "$line"; continue; fi
        for f in $module_flags; do
            if grep -qE -- "--$f([^a-z0-9-]|$)" <<< "$rest"; then echo "$line"; break; fi
        done
    done
}
# Doc rows (dir with docs/ and README.md) that name a flag named after a pattern that no module declares.
doc_leaks() {
    (cd "$1" && grep -noE -- "$named_flag_re" docs/*.md README.md) | while IFS=: read -r file n flag; do
        is_module_flag "${flag#--}" || echo "$file:$n: $flag"
    done
}

found=$(flag_decl_leaks .)
if [ -z "$found" ]; then pass "no flag declared outside layers/patterns/ is named after a pattern"
else fail "flags named after a pattern outside its module:"; echo "$found" | head -5; fi
copy_without_module "$work/plant_flag" fixed 1
sed -i 's|^\( *\)add_pattern_flags(flags, a.pattern);|\1flags.add_string("fixed-layers", \&a.layer_pattern, "layers of the fixed pattern");\n&|' \
    "$work/plant_flag/train.cu"
if [ -n "$(flag_decl_leaks "$work/plant_flag")" ]; then pass "the control: a planted --fixed-layers in train.cu is found"
else fail "a planted --fixed-layers in train.cu was not found: the flag check cannot fail"; fi

for prog in train infer; do
    if [ ! -x "build/$prog" ]; then fail "build/$prog is not built (make build/$prog): its help is not checked"; continue; fi
    found=$("build/$prog" --help | help_leaks)
    if [ -z "$found" ]; then pass "$prog --help names a pattern only in its own flag lines and the registry's list"
    else fail "$prog --help names a pattern outside its module's lines:"; echo "$found" | head -5; fi
done
for planted in "  --dilated-layers S         layers that are dilated, e.g. 3,7" \
               "  --ctx N                    the cache of a block-sparse layer" \
               "  --prompt S                 with --summary 4"; do
    found=$({ build/train --help 2>/dev/null; echo "$planted"; } | help_leaks)
    if grep -qF -- "$planted" <<< "$found"; then pass "the control: a planted help line is found: ${planted#  }"
    else fail "a planted help line was not found: ${planted#  }"; fi
done

found=$(doc_leaks .)
if [ -z "$found" ]; then pass "no row of docs/*.md or README.md names a flag named after a pattern that no module declares"
else fail "doc rows name flags after a pattern that no module declares:"; echo "$found" | head -5; fi
mkdir -p "$work/plant_doc" && cp -r docs README.md "$work/plant_doc/"
echo '| mixed layers | `--attn block-sparse --dilated-layers 3,7` |' >> "$work/plant_doc/docs/patterns.md"
if grep -q -- '--dilated-layers' <<< "$(doc_leaks "$work/plant_doc")"; then pass "the control: a planted doc row naming --dilated-layers is found"
else fail "a planted doc row naming --dilated-layers was not found: the doc check cannot fail"; fi
summary
