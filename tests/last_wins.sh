#!/usr/bin/env bash
# tests/last_wins.sh PROGRAM ARGS...: runs PROGRAM with ARGS, less every flag given again later
# (with its value). The programs refuse a flag given twice; the tests build runs from
# a base array ("${tiny[@]}") and override some of its flags, which this keeps explicit.
# A flag's value is the next argument unless that starts with "--" (no program takes positional
# arguments, and no value starts with "--").
set -euo pipefail
prog=$1; shift
args=("$@")
names=() groups=()
for ((i = 0; i < ${#args[@]}; i++)); do
    a=${args[i]}
    if [[ $a == --* && $a != *=* && $((i + 1)) -lt ${#args[@]} && ${args[i + 1]} != --* ]]; then
        names+=("$a") groups+=("$i:2"); i=$((i + 1))
    else
        names+=("${a%%=*}") groups+=("$i:1")
    fi
done
declare -A seen=()
keep=()
for ((g = ${#names[@]} - 1; g >= 0; g--)); do
    name=${names[g]}
    if [[ $name == --* && -n ${seen[$name]:-} ]]; then continue; fi
    seen[$name]=1
    keep=("$g" "${keep[@]}")
done
out=()
for g in "${keep[@]}"; do
    at=${groups[g]%%:*} n=${groups[g]##*:}
    out+=("${args[@]:at:n}")
done
exec "$prog" "${out[@]}"
