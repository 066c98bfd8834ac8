#!/usr/bin/env bash
# scripts/run_lanes.sh "GPUS|COMMAND" ...: several commands side by side on the GPUs of one machine,
# each lane seeing only its GPUs (CUDA_VISIBLE_DEVICES=GPUS, e.g. "0" or "2,3"); a lane's COMMAND is
# a bash command line, its output goes to $LANE_LOGS/laneN.log (default build/lanes). Waits for every
# lane, then prints each lane's exit code and last TAIL (12) lines; exits 1 if any lane failed.
#   scripts/run_lanes.sh "0|scripts/retrieval_study.sh train:hybrid128k@1" "1,2|STEPS_1M=8 scripts/retrieval_study.sh train:hybrid1m@1"
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: scripts/run_lanes.sh \"GPUS|COMMAND\" ..." >&2; exit 2; }
logs=${LANE_LOGS:-build/lanes}
mkdir -p "$logs"
pids=() names=()
used=""
for lane in "$@"; do
    gpus=${lane%%|*} cmd=${lane#*|}
    [[ $lane == *"|"* && $gpus =~ ^[0-9]+(,[0-9]+)*$ ]] ||
        { echo "run_lanes: '$lane' is not GPUS|COMMAND with GPUS a comma list of GPU numbers" >&2; exit 2; }
    for g in ${gpus//,/ }; do
        [[ ,$used, == *,$g,* ]] && { echo "run_lanes: GPU $g is in two lanes" >&2; exit 2; }
        used+=",$g"
    done
    n=${#pids[@]}
    CUDA_VISIBLE_DEVICES=$gpus bash -c "$cmd" > "$logs/lane$n.log" 2>&1 < /dev/null &
    pids+=($!) names+=("lane $n (GPUs $gpus): $cmd")
done
bad=0
for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; code=$?
    [ "$code" -eq 0 ] || bad=1
    echo "== ${names[$i]}: exit $code"
    tail -n "${TAIL:-12}" "$logs/lane$i.log"
done
exit $bad
