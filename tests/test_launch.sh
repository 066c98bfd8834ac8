#!/usr/bin/env bash
# scripts/launch.sh on the CPU with stand-in ranks: each rank gets its environment, output lines
# carry the rank, the first rank to fail stops the others at once (a dead rank never leaves the
# job hanging) with its exit code, and bad P values give the usage line. Then the rendezvous of
# comm/rendezvous.h under real launchers (build/test_rendezvous --probe: the launcher's variables
# mapped, rank 0's 128 bytes on every rank): scripts/launch.sh (the file), and where they are
# installed Open MPI's and MPICH's mpirun and torchrun (TCP at MASTER_ADDR:MASTER_PORT); a
# launcher that is not installed is named as skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/lib.sh
source tests/lib.sh
work=build/test_launch
rm -rf "$work" && mkdir -p "$work"

out=$(scripts/launch.sh 3 bash -c 'echo "rank $RANK of $WORLD_SIZE on GPU $LOCAL_RANK, nvls $NCCL_NVLS_ENABLE, rendezvous ${LONGNET_RENDEZVOUS:+set}"' 2>&1)
code=$?
if [ $code -eq 0 ] && [ "$(grep -c 'of 3 on GPU' <<< "$out")" -eq 3 ] && grep -q '^\[rank 2\] rank 2 of 3 on GPU 2, nvls 0, rendezvous set$' <<< "$out"; then
    pass "3 ranks get RANK, WORLD_SIZE, LOCAL_RANK, NCCL_NVLS_ENABLE=0 and a rendezvous file; lines prefixed"
else
    fail "rank environment (exit $code): $out"
fi

# The job's secret (comm/rendezvous.h): 64 hex digits, the same on every rank, another for every
# job; a secret the caller gives is kept.
show_secret='echo "secret ${LONGNET_RDZV_SECRET:-none} file ${LONGNET_RDZV_SECRET_FILE:-none}"'
one=$(env -u LONGNET_RDZV_SECRET -u LONGNET_RDZV_SECRET_FILE scripts/launch.sh 3 bash -c "$show_secret" 2>&1)
two=$(env -u LONGNET_RDZV_SECRET -u LONGNET_RDZV_SECRET_FILE scripts/launch.sh 2 bash -c "$show_secret" 2>&1)
s1=$(sed 's/.*secret \([^ ]*\) .*/\1/' <<< "$one" | sort -u) s2=$(sed 's/.*secret \([^ ]*\) .*/\1/' <<< "$two" | sort -u)
if [[ $s1 =~ ^[0-9a-f]{64}$ ]] && [[ $s2 =~ ^[0-9a-f]{64}$ ]] && [ "$s1" != "$s2" ] && [ "$(grep -c "secret $s1 file none" <<< "$one")" -eq 3 ]; then
    pass "every rank of a job gets the job's LONGNET_RDZV_SECRET (64 hex digits), another job another"
else
    fail "the job's secret: $one / $two"
fi
out=$(LONGNET_RDZV_SECRET=the-callers-own-secret scripts/launch.sh 2 bash -c "$show_secret" 2>&1)
out2=$(env -u LONGNET_RDZV_SECRET LONGNET_RDZV_SECRET_FILE=/some/file scripts/launch.sh 2 bash -c "$show_secret" 2>&1)
if [ "$(grep -c 'secret the-callers-own-secret file none' <<< "$out")" -eq 2 ] && [ "$(grep -c 'secret none file /some/file' <<< "$out2")" -eq 2 ]; then
    pass "a secret the caller gives (LONGNET_RDZV_SECRET or LONGNET_RDZV_SECRET_FILE) is kept"
else
    fail "the caller's secret: $out / $out2"
fi

start=$SECONDS
# The survivors sleep for a length no other process on the machine uses (this script's pid in
# it), so the check below finds only them.
nap="60.$$"
out=$(scripts/launch.sh 3 bash -c 'if [ "$RANK" = 1 ]; then sleep 0.3; echo "error: rank 1 gave up" >&2; exit 3; fi; sleep '"$nap" 2>&1)
code=$?
took=$((SECONDS - start))
if [ $code -eq 3 ] && [ $took -lt 15 ] && grep -q "launch: rank 1 exited with code 3; stopped the others" <<< "$out" \
   && grep -q '^\[rank 1\] error: rank 1 gave up' <<< "$out"; then
    pass "a failing rank stops the others in ${took} s (they would have run 60 s) and its code is the job's: $(tail -1 <<< "$out")"
else
    fail "failing rank: exit $code after ${took} s: $out"
fi
left=$(for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' 2>/dev/null < "$f" | grep -xF "sleep $nap "; done)
if [ -z "$left" ]; then pass "no rank left running"; else fail "ranks left running: $left"; fi

# A rank that stops answering (SIGSTOP: here it stops itself) while another fails: the launcher
# names it and continues it, so its TERM lands at once (not at the KILL 10 s later).
start=$SECONDS
out=$(scripts/launch.sh 3 bash -c 'if [ "$RANK" = 2 ]; then kill -STOP $$; sleep 60; fi
                                   if [ "$RANK" = 0 ]; then sleep 1; echo "error: rank 0 gave up" >&2; exit 4; fi; sleep 60' 2>&1)
code=$?
took=$((SECONDS - start))
if [ $code -eq 4 ] && [ $took -lt 6 ] && grep -q "launch: rank 0 exited with code 4; stopped the others (rank 2 had been stopped" <<< "$out"; then
    pass "a stopped rank is named and the job ends in ${took} s: $(tail -1 <<< "$out")"
else
    fail "stopped rank: exit $code after ${took} s: $out"
fi

for bad in 0 -1 two 99999; do
    err=$(scripts/launch.sh "$bad" true 2>&1)
    code=$?
    if [ $code -eq 2 ] && grep -q "usage: scripts/launch.sh P command" <<< "$err"; then
        pass "P=$bad refused: $(head -1 <<< "$err")"
    else
        fail "P=$bad: exit $code: $err"
    fi
done

# The probe's lines of one launcher's run: P ranks of launcher NAME via METHOD, all holding rank
# 0's bytes. Prints why not and fails otherwise.
probes_agree() {  # P, launcher name, method, output[, ranks per host (default P)]
    local P=$1 name=$2 method=$3 out=$4 per_host=${5:-$1} r lines blobs
    lines=$(grep -o "probe rank .*" <<< "$out")
    for ((r = 0; r < P; r++)); do
        grep -q "^probe rank $r of $P local $((r % per_host)) launcher $name via $method blob [0-9a-f]\{256\}$" <<< "$lines" || {
            echo "no line of rank $r: $out" | head -c 2000; return 1; }
    done
    blobs=$(sed 's/.* blob //' <<< "$lines" | sort -u | wc -l)
    [ "$blobs" -eq 1 ] || { echo "the ranks hold $blobs different blobs"; return 1; }
}
probe=build/test_rendezvous
need_programs "$probe"
free_port() { "$probe" --free-port; }
for P in 2 4; do
    out=$(LONGNET_COMM_TIMEOUT_S=20 timeout -s KILL 60 scripts/launch.sh "$P" "$probe" --probe 2>&1)
    if why=$(probes_agree "$P" torchrun file "$out"); then
        pass "scripts/launch.sh $P: every rank holds rank 0's bytes through the rendezvous file"
    else
        fail "scripts/launch.sh $P: $why"
    fi
done

# Several hosts: scripts/launch.sh once a host (LAUNCH_NODES, LAUNCH_NODE_RANK), the ranks meeting
# over TCP with the job's secret; here both "hosts" are this one, at 127.0.0.1.
port=$(free_port)
secret=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
out=$( (for h in 0 1; do
            LAUNCH_NODES=2 LAUNCH_NODE_RANK=$h MASTER_ADDR=127.0.0.1 MASTER_PORT=$port LONGNET_RDZV_SECRET=$secret \
            LONGNET_COMM_TIMEOUT_S=20 timeout -s KILL 60 scripts/launch.sh 2 "$probe" --probe &
        done; wait) 2>&1)
if why=$(probes_agree 4 torchrun tcp "$out" 2); then
    pass "scripts/launch.sh 2 on each of 2 hosts (LAUNCH_NODES=2): ranks 0-3 meet over TCP, LOCAL_RANK 0-1 on each"
else
    fail "launch.sh over 2 hosts: $why"
fi
err1=$(env -u LONGNET_RDZV_SECRET -u LONGNET_RDZV_SECRET_FILE LAUNCH_NODES=2 LAUNCH_NODE_RANK=1 MASTER_ADDR=10.0.0.1 \
       MASTER_PORT=29500 scripts/launch.sh 1 true 2>&1); c1=$?
err2=$(LAUNCH_NODES=2 LAUNCH_NODE_RANK=2 scripts/launch.sh 1 true 2>&1); c2=$?
err3=$(env -u MASTER_ADDR LAUNCH_NODES=2 LAUNCH_NODE_RANK=0 LONGNET_RDZV_SECRET=x scripts/launch.sh 1 true 2>&1); c3=$?
if [ $c1 -eq 2 ] && grep -q "^launch: LAUNCH_NODES=2 needs the job's secret, the same on every host" <<< "$err1" \
   && [ $c2 -eq 2 ] && grep -q '^launch: LAUNCH_NODE_RANK="2" is not a host number from 0 to 1' <<< "$err2" \
   && [ $c3 -eq 2 ] && grep -q "^launch: LAUNCH_NODES=2 needs MASTER_ADDR and MASTER_PORT" <<< "$err3"; then
    pass "several hosts without a shared secret, with a host number out of range or without MASTER_ADDR are refused in one line"
else
    fail "launch.sh's host checks: $c1 $err1 / $c2 $err2 / $c3 $err3"
fi

# Simulated hosts (scripts/sim_hosts.sh): each rank in a network namespace of its own, meeting
# over TCP at 10.231.0.1, each host's HOST_ROOT private to it. Needs root and network namespaces.
if [ "$(id -u)" -eq 0 ] && ip netns add "lngprobe$$" 2> /dev/null; then
    ip netns del "lngprobe$$"
    out=$(LONGNET_COMM_TIMEOUT_S=20 timeout -s KILL 60 scripts/sim_hosts.sh 3 "$probe" --probe 2>&1)
    if why=$(probes_agree 3 torchrun tcp "$out" 1) && [ "$(grep -c '^\[host [0-2]\] \[rank [0-2]\] probe rank' <<< "$out")" -eq 3 ]; then
        pass "scripts/sim_hosts.sh 3: three hosts of one rank each meet over TCP across network namespaces"
    else
        fail "sim_hosts.sh 3: $why"
    fi
    mkdir -p "$work/host-data" && echo "the corpus" > "$work/host-data/words"
    out=$(HOST_COPY=$work/host-data HOST_ROOT=/tmp/lnghost-test timeout -s KILL 60 scripts/sim_hosts.sh 2 bash -c \
          'echo "$RANK" > /tmp/lnghost-test/mine; sleep 0.5; echo "rank $RANK reads $(cat /tmp/lnghost-test/mine), $(cat /tmp/lnghost-test/host-data/words), $(ip -4 -o addr show lng0 | grep -o "10[.0-9]*/24")"' 2>&1)
    code=$?
    if [ $code -eq 0 ] && grep -q '^\[host 0\] \[rank 0\] rank 0 reads 0, the corpus, 10.231.0.1/24$' <<< "$out" \
       && grep -q '^\[host 1\] \[rank 1\] rank 1 reads 1, the corpus, 10.231.0.2/24$' <<< "$out" && [ ! -e /tmp/lnghost-test/mine ]; then
        pass "each simulated host has its own address, its own HOST_ROOT (a file written there is its own) and its HOST_COPY"
    else
        fail "sim_hosts.sh private folders: exit $code: $out"
    fi
    start=$SECONDS
    out=$(timeout -s KILL 60 scripts/sim_hosts.sh 2 bash -c 'if [ "$RANK" = 1 ]; then exit 5; fi; sleep 60' 2>&1)
    code=$? took=$((SECONDS - start))
    if [ $code -eq 5 ] && [ $took -lt 15 ] && grep -q "^sim_hosts: host 1 exited with code 5; stopped the others" <<< "$out" \
       && [ -z "$(ip netns list | grep "^lng[0-9]*\(sw\|h[0-9]\)")" ]; then
        pass "a failing host stops the others in ${took} s with its code, and no namespace is left: $(tail -1 <<< "$out")"
    else
        fail "sim_hosts.sh failing host: exit $code after ${took} s: $out; namespaces: $(ip netns list | tr '\n' ' ')"
    fi
else
    echo "skipped: scripts/sim_hosts.sh (needs root and network namespaces)"
fi

# A rendezvous file left by an earlier job in the same place is not taken: each job has its secret.
old=$work/stale-rendezvous
mkdir -p "$old" && chmod 700 "$old"
out=$(LONGNET_RDZV_SECRET=an-earlier-jobs-secret LONGNET_RENDEZVOUS=$old/nccl-id RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 \
      timeout -s KILL 20 "$probe" --probe 2>&1)  # rank 0 of the earlier job writes it, and it stays
out=$(LONGNET_RDZV_SECRET=this-jobs-own-secret-123 LONGNET_RENDEZVOUS=$old/nccl-id RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 \
      LONGNET_COMM_TIMEOUT_S=1 timeout -s KILL 20 "$probe" --probe 2>&1)
if [ $? -eq 1 ] && grep -q "^error: rank 1: the rendezvous file $old/nccl-id (LONGNET_RENDEZVOUS) is not this job's.*not signed with this rank's secret" <<< "$out"; then
    pass "an earlier job's rendezvous file (another secret) is refused, naming it: $out"
else
    fail "stale rendezvous file: $out"
fi

# A plain run inside an sbatch -n 4 script (Slurm's variables, no srun) is told where its world
# size came from; torchrun's variables name WORLD_SIZE (a build without NCCL says so in the same
# line).
need_programs build/train
out=$(SLURM_NTASKS=4 SLURM_PROCID=0 SLURM_LOCALID=0 timeout -s KILL 60 build/train --device cpu --out "$work/sbatch" 2>&1)
code=$?
out2=$(RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 timeout -s KILL 60 build/train --device cpu --out "$work/sbatch" 2>&1)
if [ $code -eq 1 ] && [ "$(wc -l <<< "$out")" -eq 1 ] && grep -q "^error: 4 ranks.*(SLURM_NTASKS=4, set by srun or by an sbatch -n script.*unset SLURM_NTASKS))" <<< "$out" \
   && grep -q "^error: 2 ranks.*(WORLD_SIZE=2, set by torchrun)" <<< "$out2" && [ ! -e "$work/sbatch" ]; then
    pass "a CPU run of 4 ranks names SLURM_NTASKS=4 and the sbatch case: $out"
else
    fail "world size source: exit $code: $out / $out2"
fi

# Open MPI and MPICH installed side by side (Debian: mpirun.openmpi, mpirun.mpich), or one mpirun.
launchers=()
for m in mpirun.openmpi mpirun.mpich mpirun; do command -v "$m" > /dev/null && launchers+=("$m"); done
[ ${#launchers[@]} -gt 0 ] || echo "skipped: mpirun (not installed: apt-get install openmpi-bin or mpich)"
for m in "${launchers[@]}"; do
    [ "$m" = mpirun ] && [ ${#launchers[@]} -gt 1 ] && continue  # the alternative of one of the two
    if [[ $("$m" --version 2>&1) == *@(Open MPI|OpenRTE)* ]]; then  # 4.x says OpenRTE
        name="mpirun (Open MPI)" args=(--allow-run-as-root --oversubscribe -x MASTER_ADDR -x MASTER_PORT)
    else
        name="mpirun (MPICH, Intel MPI)" args=()
    fi
    for P in 2 3; do
        out=$(MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) LONGNET_COMM_TIMEOUT_S=20 \
              timeout -s KILL 60 "$m" "${args[@]}" -np "$P" "$probe" --probe 2>&1)
        if why=$(probes_agree "$P" "$name" tcp "$out"); then
            pass "$m -np $P: $name's ranks meet over TCP at 127.0.0.1"
        else
            fail "$m -np $P: $why"
        fi
    done
done

# torchrun: --standalone (its own free MASTER_PORT), and --master-port as on a cluster (its agent
# serves MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE=True: rank 0 listens on the next port).
# "-r 1 -t 1": stdout to a log and to the console (Debian's torch 1.13 on Python 3.11 fails on the
# default, 0).
if command -v torchrun > /dev/null; then
    logs=$work/torchrun-logs
    for how in standalone master-port; do
        if [ $how = standalone ]; then where=(--standalone); else where=(--nnodes 1 --master_addr 127.0.0.1 --master_port "$(free_port)"); fi
        out=$(LONGNET_COMM_TIMEOUT_S=20 timeout -s KILL 120 torchrun "${where[@]}" --nproc_per_node 3 -r 1 -t 1 \
              --log_dir "$logs/$how" --no_python "$probe" --probe 2>&1)
        if why=$(probes_agree 3 torchrun tcp "$out"); then
            pass "torchrun ${where[*]} --nproc_per_node 3: the ranks meet over TCP"
        else
            fail "torchrun $how: $why"
        fi
    done
else
    echo "skipped: torchrun (not installed)"
fi
summary
