#!/usr/bin/env bash
# The flash kernels' room (layers/cuda/attention/): the main loops are a teaching ladder whose
# rungs are leaves. No main-loop file includes another, directly or through the shared rooms, and
# no shared room includes a main loop; only the launch templates gather them. Fails (exit 1)
# naming the include chain that breaks this; a deliberately broken room shows the check can fail.
set -uo pipefail
dir=layers/cuda/attention
loops="forward_mma_sync forward_wgmma forward_ws backward_mma_sync backward_wgmma backward_ws"
# shellcheck source=tests/lib.sh
source tests/lib.sh
# closure ROOT DIR: every file of $dir that ROOT includes, directly or not, one per line as "file<-chain"
closure() {
    local root=$1 d=$2 seen=" " queue=("$1:$1")
    while [ ${#queue[@]} -gt 0 ]; do
        local item=${queue[0]}; queue=("${queue[@]:1}")
        local f=${item%%:*} chain=${item#*:}
        for inc in $(sed -n 's|^#include "layers/cuda/attention/\([a-z_0-9]*\.cuh\)".*|\1|p' "$d/$f"); do
            [[ $seen == *" $inc "* ]] && continue
            seen+="$inc "
            echo "$inc<-$chain"
            queue+=("$inc:$chain > $inc")
        done
    done
}
check_dir() {  # the rule over directory $1; prints nothing, returns the number of breaks
    local d=$1 breaks=0
    for f in "$d"/*.cuh; do
        local name; name=$(basename "$f" .cuh)
        case $name in launch_*) continue ;; esac
        while IFS= read -r line; do
            [ -n "$line" ] || continue
            local inc=${line%%<-*}
            if [[ " $loops " == *" ${inc%.cuh} "* ]]; then
                echo "  $name.cuh includes the main loop $inc: ${line#*<-} > $inc"
                breaks=$((breaks + 1))
            fi
        done < <(closure "$name.cuh" "$d")
    done
    return $breaks
}
out=$(check_dir "$dir"); n=$?
[ "$n" -eq 0 ] && pass "no kernel file or shared room includes a main loop (the rungs are leaves)" ||
    fail "includes that make one rung depend on another:"$'\n'"$out"
# The check can fail: a copy of the room where the warp-specialized forward includes the wgmma one.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp "$dir"/*.cuh "$tmp"/
sed -i '0,/^#include "layers\/cuda\/attention\/wgmma.cuh"/s//#include "layers\/cuda\/attention\/forward_wgmma.cuh"/' "$tmp/forward_ws.cuh"
canary=$(check_dir "$tmp"); m=$?
[ "$m" -gt 0 ] && grep -q "forward_ws.cuh includes the main loop forward_wgmma.cuh" <<< "$canary" &&
    pass "the canary fails: $(head -1 <<< "$canary" | sed 's/^ *//')" || fail "a room where forward_ws.cuh includes forward_wgmma.cuh passed the check"
summary
