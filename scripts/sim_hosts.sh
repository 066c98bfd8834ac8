#!/usr/bin/env bash
# scripts/sim_hosts.sh N command args...: a job of N hosts simulated on this machine, to run what a
# cluster runs without one. Each host is a network namespace with its own address (10.231.0.h+1 on
# interface lng0, joined to the others through a bridge in a namespace of its own) and its own
# files: the folder HOST_ROOT (default /tmp/lnghost) is, inside host h, a private folder that no
# other host sees (a mount namespace), so nothing is shared but the network. HOST_COPY="dir..."
# copies folders into every host's HOST_ROOT first (as each host would hold its own copy of the data).
# Host h runs scripts/launch.sh GPUS_PER_HOST (1) with LAUNCH_NODES=N, LAUNCH_NODE_RANK=h, on its
# own GPUs (CUDA_VISIBLE_DEVICES), MASTER_ADDR=10.231.0.1, one MASTER_PORT, one fresh secret and job
# id for the job, and NCCL over sockets only (no peer-to-peer, shared memory or InfiniBand between
# the hosts; NCCL_HOSTID tells them apart). Output lines carry "[host h]" and the rank. The first
# host to fail stops the others; the exit code is that host's. SIM_HOSTS_KEEP=dir keeps each
# host's HOST_ROOT as dir/hostH (else it is removed at the end). Needs root (ip netns, mount).
set -uo pipefail
usage() { echo "usage: scripts/sim_hosts.sh N command [args...]   (N = number of simulated hosts, 1 to 200; needs root)" >&2; exit 2; }
[ $# -ge 2 ] || usage
[[ $1 =~ ^[1-9][0-9]{0,2}$ ]] && [ "$1" -le 200 ] || { echo "sim_hosts: N=\"$1\" is not a number of hosts from 1 to 200" >&2; usage; }
N=$1; shift
((BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1))) ||
    { echo "sim_hosts: needs bash 5.1 or newer (wait -n -p), this is $BASH_VERSION" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
G=${GPUS_PER_HOST:-1}
[[ $G =~ ^[1-9][0-9]{0,2}$ ]] || { echo "sim_hosts: GPUS_PER_HOST=\"$G\" is not a positive integer" >&2; exit 2; }
root=${HOST_ROOT:-/tmp/lnghost}
[[ $root == /* ]] || { echo "sim_hosts: HOST_ROOT=\"$root\" must be an absolute path" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "sim_hosts: needs root (network namespaces and mounts); run it as root or under sudo" >&2; exit 2; }
for tool in ip unshare mount; do
    command -v $tool > /dev/null || { echo "sim_hosts: '$tool' not found: apt-get install iproute2 util-linux" >&2; exit 2; }
done
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$gpus" -gt 0 ] && [ $((N * G)) -gt "$gpus" ]; then
    echo "sim_hosts: $N hosts x $G GPUs need $((N * G)) GPUs, this machine has $gpus: lower N or GPUS_PER_HOST" >&2; exit 2
fi

tag=lng$$
work=$(mktemp -d "${TMPDIR:-/tmp}/sim-hosts.XXXXXX") || exit 2
hosts=()
teardown() {
    local h
    for ((h = 0; h < N; h++)); do ip netns del "${tag}h$h" 2> /dev/null; done
    ip netns del "${tag}sw" 2> /dev/null
    if [ -n "${SIM_HOSTS_KEEP:-}" ]; then
        mkdir -p "$SIM_HOSTS_KEEP" && for ((h = 0; h < N; h++)); do rm -rf "$SIM_HOSTS_KEEP/host$h"; mv "$work/host$h" "$SIM_HOSTS_KEEP/"; done
    fi
    rm -rf "$work"
}
stop_hosts() {  # TERM to every host's launcher (it stops its ranks: TERM, then KILL 10 s later)
    local p
    for p in "${hosts[@]}"; do kill -TERM -- "-$p" 2> /dev/null; done
    wait "${hosts[@]}" 2> /dev/null
    hosts=()
}
finish() { stop_hosts; teardown; exit "$1"; }
trap 'finish 130' INT
trap 'finish 143' TERM

# The network: a bridge in a namespace of its own (the machine's own network untouched), one
# veth pair a host, lng0 on the host's side.
net() { "$@" || { echo "sim_hosts: '$*' failed: this kernel or container cannot make network namespaces" >&2; finish 2; }; }
net ip netns add "${tag}sw"
net ip -n "${tag}sw" link add br0 type bridge
net ip -n "${tag}sw" link set br0 up
for ((h = 0; h < N; h++)); do
    ns=${tag}h$h
    net ip netns add "$ns"
    net ip link add lng0 netns "$ns" type veth peer name "p$h" netns "${tag}sw"
    net ip -n "${tag}sw" link set "p$h" master br0 up
    net ip -n "$ns" addr add "10.231.0.$((h + 1))/24" dev lng0
    net ip -n "$ns" link set lng0 up
    net ip -n "$ns" link set lo up
    mkdir -p "$work/host$h/tmp"
    for d in ${HOST_COPY:-}; do cp -a "$d" "$work/host$h/" || { echo "sim_hosts: cannot copy $d into host $h's folder" >&2; finish 2; }; done
done
mkdir -p "$root"

if [ -z "${LONGNET_RDZV_SECRET:-}" ] && [ -z "${LONGNET_RDZV_SECRET_FILE:-}" ]; then
    LONGNET_RDZV_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
fi
port=${MASTER_PORT:-$((20000 + RANDOM % 20000))}
library_path=${LD_LIBRARY_PATH:-}
set -m
for ((h = 0; h < N; h++)); do
    devices=$(seq -s, $((h * G)) $((h * G + G - 1)))
    (
        set +m
        trap : TERM
        # Inside the host: its network, then a mount namespace where HOST_ROOT is its own folder.
        # LD_LIBRARY_PATH passed on by name: a wrapper of ip may have set its own for itself.
        ip netns exec "${tag}h$h" unshare --mount --propagation private \
            env LD_LIBRARY_PATH="$library_path" LAUNCH_NODES="$N" LAUNCH_NODE_RANK="$h" MASTER_ADDR=10.231.0.1 MASTER_PORT="$port" \
                LONGNET_RDZV_SECRET="${LONGNET_RDZV_SECRET:-}" LONGNET_JOB_ID="sim-hosts-$tag" \
                CUDA_VISIBLE_DEVICES="$devices" TMPDIR="$root/tmp" NCCL_HOSTID="sim-host-$h" \
                NCCL_SOCKET_IFNAME=lng0 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 \
            bash -c 'mount --bind "$1" "$2" || exit 2; shift 2; [ -n "$LONGNET_RDZV_SECRET" ] || unset LONGNET_RDZV_SECRET; exec "$@"' \
                _ "$work/host$h" "$root" "$here/launch.sh" "$G" "$@" < /dev/null 2>&1 | (trap "" TERM; exec sed -u "s/^/[host $h] /")
        exit "${PIPESTATUS[0]}"
    ) &
    hosts+=($!)
done
declare -A host_of
for ((h = 0; h < N; h++)); do host_of[${hosts[$h]}]=$h; done
while [ ${#hosts[@]} -gt 0 ]; do
    wait -n -p done_pid "${hosts[@]}"
    code=$?
    [ -n "${done_pid:-}" ] || continue
    left=()
    for p in "${hosts[@]}"; do [ "$p" = "$done_pid" ] || left+=("$p"); done
    hosts=("${left[@]+"${left[@]}"}")
    if [ "$code" -ne 0 ]; then
        echo "sim_hosts: host ${host_of[$done_pid]} exited with code $code; stopped the others" >&2
        finish "$code"
    fi
done
finish 0
