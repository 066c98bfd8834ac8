#!/usr/bin/env bash
# scripts/launch.sh P command args...: P ranks of a command on this host, one GPU each, for the
# NCCL communicator (comm/nccl.h). Rank r gets RANK=r, WORLD_SIZE=P, LOCAL_RANK=r (its GPU),
# LOCAL_WORLD_SIZE=P, a fresh LONGNET_RENDEZVOUS file in a folder of its own (rank 0 writes NCCL's
# id there), the job's secret LONGNET_RDZV_SECRET (32 bytes of /dev/urandom, unless the caller
# gives LONGNET_RDZV_SECRET or LONGNET_RDZV_SECRET_FILE; docs/ring.md, "Threat model") and
# NCCL_NVLS_ENABLE=0 (NVLink multicast can put a shared host's GPUs out of service:
# ../shared/gpu-machine.md). Every output
# line is prefixed "[rank r] ". The first rank to exit non-zero ends the job: the others get TERM
# at once (a rank blocked in NCCL would otherwise wait for it until its timeout), KILL 10 s later,
# and the launcher exits with that rank's code. A rank found stopped (SIGSTOP, a debugger, a
# suspended shell) is named, and continued so that its TERM lands now rather than at the KILL.
# Several hosts: run it once on each host with LAUNCH_NODES=N and LAUNCH_NODE_RANK=h (0 on the host
# of MASTER_ADDR), MASTER_ADDR, MASTER_PORT and one secret for the whole job (LONGNET_RDZV_SECRET or
# LONGNET_RDZV_SECRET_FILE, the same on every host: no file is shared, the ranks meet over TCP).
# Rank h * P + r then runs on GPU r of host h; lines carry the global rank.
set -uo pipefail
usage() { echo "usage: scripts/launch.sh P command [args...]   (P = number of ranks, a positive integer)" >&2; exit 2; }
[ $# -ge 2 ] || usage
[[ $1 =~ ^[1-9][0-9]{0,3}$ ]] || { echo "launch: P=\"$1\" is not a positive integer" >&2; usage; }
P=$1; shift
((BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1))) ||
    { echo "launch: needs bash 5.1 or newer (wait -n -p), this is $BASH_VERSION" >&2; exit 2; }

nodes=${LAUNCH_NODES:-1} node=${LAUNCH_NODE_RANK:-0}
[[ $nodes =~ ^[1-9][0-9]{0,3}$ ]] || { echo "launch: LAUNCH_NODES=\"$nodes\" is not a positive integer (the number of hosts)" >&2; exit 2; }
[[ $node =~ ^[0-9]{1,4}$ ]] && [ "$node" -lt "$nodes" ] ||
    { echo "launch: LAUNCH_NODE_RANK=\"$node\" is not a host number from 0 to $((nodes - 1)) (LAUNCH_NODES=$nodes)" >&2; exit 2; }
if [ "$nodes" -gt 1 ]; then
    [ -n "${MASTER_ADDR:-}" ] && [ -n "${MASTER_PORT:-}" ] ||
        { echo "launch: LAUNCH_NODES=$nodes needs MASTER_ADDR and MASTER_PORT: the address and a free port of host 0, the same on every host" >&2; exit 2; }
    [ -n "${LONGNET_RDZV_SECRET:-}" ] || [ -n "${LONGNET_RDZV_SECRET_FILE:-}" ] ||
        { echo "launch: LAUNCH_NODES=$nodes needs the job's secret, the same on every host: export LONGNET_RDZV_SECRET=\$(od -An -tx1 -N32 /dev/urandom | tr -d ' \\n') and pass it to each host's launch" >&2; exit 2; }
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/longnet-launch.XXXXXX") || exit 2
# The job's secret: the ranks prove it to rank 0 (and it to them) before NCCL's id is shared. In
# the environment only (no file, no command line), which no other user can read.
if [ -z "${LONGNET_RDZV_SECRET:-}" ] && [ -z "${LONGNET_RDZV_SECRET_FILE:-}" ]; then
    LONGNET_RDZV_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
    [ ${#LONGNET_RDZV_SECRET} -eq 64 ] || { echo "launch: cannot read 32 random bytes from /dev/urandom for the job's secret" >&2; rm -rf "$dir"; exit 2; }
    export LONGNET_RDZV_SECRET
fi
ranks=() rank_of=()
# Each rank runs as one subshell in its own process group (set -m): the command and the two
# prefixers of its output. Stopping the group stops whatever the rank started, and waiting for
# the subshell waits until its last line is printed.
set -m
stopped_ranks() {  # the ranks of which some process is stopped (state T, or t under a debugger), for the last line
    local p q
    for p in "${ranks[@]}"; do
        for q in $(pgrep -g "$p" 2>/dev/null); do
            [[ $(ps -o stat= -p "$q" 2>/dev/null) == [Tt]* ]] && { printf ' %s' "${rank_of[$p]}"; break; }
        done
    done
}
stop_ranks() {  # TERM now, KILL after 10 s, to every rank still running
    [ ${#ranks[@]} -gt 0 ] || return 0
    local p
    for p in "${ranks[@]}"; do kill -TERM -- "-$p" 2>/dev/null; kill -CONT -- "-$p" 2>/dev/null; done
    (sleep 10; for p in "${ranks[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done) &
    local killer=$!
    wait "${ranks[@]}" 2>/dev/null
    kill -- "-$killer" 2>/dev/null
    wait "$killer" 2>/dev/null
    ranks=()
}
finish() {
    stop_ranks
    rm -rf "$dir"
    exit "$1"
}
trap 'finish 130' INT
trap 'finish 143' TERM

for ((l = 0; l < P; l++)); do
    r=$((node * P + l))
    (
        set +m  # the pipeline stays in this rank's group
        # On TERM the subshell lives on until the command has ended, so that waiting for it waits
        # for the command (the handler is not inherited: the command still dies of TERM); the
        # prefixers ignore TERM and print the rank's last lines.
        trap : TERM
        export RANK=$r WORLD_SIZE=$((nodes * P)) LOCAL_RANK=$l LOCAL_WORLD_SIZE=$P NCCL_NVLS_ENABLE=0
        # One host: the ranks meet through a file of this job. Several: over TCP at MASTER_ADDR.
        if [ "$nodes" -eq 1 ]; then export LONGNET_RENDEZVOUS=$dir/nccl-id; else unset LONGNET_RENDEZVOUS; fi
        prefix() { trap '' TERM; exec sed -u "s/^/[rank $r] /"; }
        # stdout and stderr prefixed separately, each to where it was going; the exit code is the
        # command's (pipefail: the prefixers exit 0).
        { "$@" < /dev/null 2>&1 1>&3 3>&- | prefix >&4 3>&-; } 3>&1 | prefix
    ) 4>&2 2>/dev/null &  # (bash's own "Killed" notices dropped: the launcher reports the code)
    ranks+=($!)
    rank_of[$!]=$r
done

while [ ${#ranks[@]} -gt 0 ]; do
    wait -n -p done_pid "${ranks[@]}"
    code=$?
    [ -n "${done_pid:-}" ] || continue  # a trapped signal interrupted the wait
    left=()
    for p in "${ranks[@]}"; do [ "$p" = "$done_pid" ] || left+=("$p"); done
    ranks=("${left[@]+"${left[@]}"}")
    if [ "$code" -ne 0 ]; then
        stopped=$(stopped_ranks)
        stop_ranks
        echo "launch: rank ${rank_of[$done_pid]} exited with code $code; stopped the others${stopped:+ (rank${stopped} had been stopped: SIGSTOP or a debugger, so it could not answer)}" >&2
        finish "$code"
    fi
done
finish 0
