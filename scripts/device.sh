#!/usr/bin/env bash
# Everything that runs on a lent GPU machine (H100/H200), in stages, and the packing of what it
# runs on the CPU machine:
#   scripts/device.sh STAGE...          (or STAGES="tests bench" scripts/device.sh)
# On the CPU machine:
#   pack [PROGRAM...]  build the programs with the Makefile (default: test_attention bench_attention)
#                      and copy them, libsentencepiece and libgomp into $CARRY/bin for a device call
#                      (the call carries $CARRY); PACK_CORPUS=dir copies a prepared corpus to $CARRY/corpus
# On the GPU machine (programs from $BIN):
#   tests          every GPU test program (build/test_* from tests/gpu/), exact resume under
#                  --deterministic (tests/gpu/test_resume_gpu.sh), infer through the GPU cache
#                  (tests/gpu/test_infer_gpu.sh), the memory planner against the measured peak;
#                  CORPUS=dir the corpus of the resume and infer tests (build/test_corpus, made by
#                  tests/test_data_cli.sh on the CPU machine)
#   sanitizers     compute-sanitizer memcheck and racecheck on the attention, op and pointer kernels at small sizes
#                  (`make test-gpu` runs tests and sanitizers; each fits a 10-minute device call)
#   ops            the op kernels alone: test_ops with two seeds, memcheck, racecheck (layernorm,
#                  classifier: hazards outside cuBLASLt's nvjet kernels counted), the --perf table
#   attention      the attention harness (timeout 400 s), memcheck and racecheck on its small
#                  cases, bench_attention --variants and PyTorch's flash/cuDNN on the same sizes;
#                  ATTN_STEPS picks some of: test memcheck racecheck bench torch
#   bench          `make bench`'s tables and PyTorch peers (bench/run_bench.sh) into $OUT
#   ab             two builds' attention benchmarks interleaved, old new old new, so that clocks
#                  and temperature drift hit both alike: OLD=dir (default $CARRY/old) against
#                  NEW=dir (default $BIN), ROUNDS (2), AA=1 adds the old-again control, BENCHES
#                  (attention attention_dilated attention_block_sparse train) and
#                  BENCH_ATTENTION_ARGS, BENCH_DILATED_ARGS, BENCH_BLOCK_SPARSE_ARGS,
#                  BENCH_TRAIN_ARGS pass flags; scripts/compare_bench_tables.py gives new/old per row
#   train          a GPU training run on $DATA (TRAIN_ARGS); infer and long_prompt use its checkpoint
#   dp             data parallel over this host's GPUs, --grad-overlap on and off, against one GPU
#   split          one training step (GPT-2 124M, T = 1024) by kind of op beside its floor
#   hosts          a job of several hosts simulated (scripts/sim_hosts.sh: a network namespace and
#                  a private folder a rank, NCCL over sockets, the TCP rendezvous with the job's
#                  secret): test_comm_nccl, test_ring --nccl, --cp P training against one GPU (loss
#                  within 1%, host 0's checkpoint loads) and NCCL's rate over the sockets beside NVLink
#   launchers      test_comm_nccl's P ranks (one per GPU; LAUNCH_P) started as people start them:
#                  scripts/launch.sh (the rendezvous file), torchrun --standalone and
#                  torchrun --master_port (TCP; its agent holds MASTER_PORT), mpirun -np P (Open MPI
#                  or MPICH; MASTER_ADDR/MASTER_PORT exported), each where installed; one row each
#   infer, long_prompt, errors, recompute, kv_cache, block_sparse, nccl (several GPUs: NCCL ring
#   attention, --cp training and perplexity against one GPU; DATA's val.bin must hold 4096 x P
#   tokens), faults (several GPUs: a hung rank, a rank's GPU failing), attn_perf (the
#   harness's perf mode), dilated_bench, compare (dense and dilated at 32K, COMPARE_STEPS),
#   long_context (the long-context study on $CARRY/corpus-long: the 91M model trained at equal tokens as
#   dense at 2K and dilated at 32K and 256K, from scratch or after 2K (LC_MODELS picks some:
#   dense2k dilated32k dilated256k dilated32k_from2k dilated256k_from2k), each scored by position
#   over the held-out documents of at least 256K tokens; LC_PROMPTS=1 also generates from a book
#   and a held-out kernel subsystem in $CARRY/prompts (book.txt, tree.txt; the README's runs gave
#   LC_BOOK_PROMPT=$'\n4.6.2. Secure Shell\n', LC_TREE_PROMPT=$'# ==== net/sctp/auth.c ====\n');
#   LC_MODEL the model's --layers --width --heads; LC_STEPS, LC_BASE_STEPS, LC_EXT_LR the
#   schedule; LC_SLIDING=N also scores each model with windows of N tokens)
# Settings: CARRY (.carry/device), BIN ($CARRY/bin when it exists, else build), DATA (a prepared
# corpus, $CARRY/corpus), OUT (logs and tables, build/device). Every stage runs with
# scripts/gpu_lib_paths.sh's library paths. Exit status: non-zero when a test stage failed.
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY=${CARRY:-.carry/device}
if [ -z "${BIN:-}" ]; then if [ -d "$CARRY/bin" ]; then BIN=$CARRY/bin; else BIN=build; fi; fi
DATA=${DATA:-$CARRY/corpus}
OUT=${OUT:-build/device}
read -r -a stages <<< "${*:-${STAGES:-}}"
[ ${#stages[@]} -gt 0 ] || { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
summary=() failed_stages=()

# ---- pack (the CPU machine)

stage_pack() {
    local progs=("${pack_programs[@]}")
    [ ${#progs[@]} -gt 0 ] || progs=(test_attention bench_attention)
    make -j2 "${progs[@]/#/build/}" || { failed_stages+=(pack); return; }
    mkdir -p "$CARRY/bin"
    for p in "${progs[@]}"; do cp "build/$p" "$CARRY/bin/"; done
    cp -L /lib/x86_64-linux-gnu/libgomp.so.1 "$CARRY/bin/"  # in case the GPU machine lacks it
    cp -L /usr/lib/x86_64-linux-gnu/libsentencepiece*.so.0 "$CARRY/bin/" 2>/dev/null || true
    [ -z "${PACK_CORPUS:-}" ] || { mkdir -p "$CARRY/corpus" && cp "$PACK_CORPUS"/{tokenizer.model,train.bin,val.bin,manifest.txt} "$CARRY/corpus/"; }
    du -sh "$CARRY"; ls -la "$CARRY/bin"
    summary+=("pack: ${progs[*]} into $CARRY/bin")
}

# ---- tests and sanitizers: "N passed, M failed" summed over the programs

total_pass=0 total_fail=0 rows=()
run_counted() {  # name, command...: its "N passed, M failed" line counted, its log in $OUT/logs
    local name=$1; shift
    local t0=$SECONDS log="$LOGS/$name.log"
    "$@" > "$log" 2>&1
    local code=$? summary_line p f
    summary_line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    p=$(awk '{print $1}' <<< "$summary_line"); f=$(awk '{print $3}' <<< "$summary_line")
    [ -n "$summary_line" ] || { p=0; f=1; }
    [ $code -eq 0 ] || [ "$f" -gt 0 ] || f=1
    grep -E '^FAIL' "$log" | head -10
    total_pass=$((total_pass + p)) total_fail=$((total_fail + f))
    rows+=("$(printf '%-28s %5s passed %3s failed  exit %-3s %4ss' "$name" "$p" "$f" "$code" $((SECONDS - t0)))")
}
sanitize() {  # name, tool, command...: passes when the sanitizer reports 0 errors/hazards
    local name=$1 tool=$2; shift 2
    local t0=$SECONDS
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$@" > "$LOGS/$name.log" 2>&1
    local code=$?
    local verdict; verdict=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOGS/$name.log" | tail -1)
    if [ $code -eq 0 ]; then total_pass=$((total_pass + 1)); else total_fail=$((total_fail + 1)); fi
    rows+=("$(printf '%-28s %s exit %s %4ss' "$name" "${verdict:-no summary}" "$code" $((SECONDS - t0)))")
}

stage_tests() {
    local t name
    for t in "$BIN"/test_*; do
        name=$(basename "$t")
        [ -f "tests/gpu/$name.cu" ] || continue  # CPU tests run under make test
        run_counted "$name" "$t"
    done
    local corpus=${CORPUS:-build/test_corpus}
    run_counted test_resume_gpu env BIN="$BIN" tests/gpu/test_resume_gpu.sh "$corpus"
    run_counted test_infer_gpu env BIN="$BIN" tests/gpu/test_infer_gpu.sh "$corpus"
    # The memory planner's peak against the measured one at three windows, every recompute
    # policy (model/memory_plan.h; a 4-layer dilated model, so that it runs in seconds).
    run_counted plan_vs_measured "$BIN/bench_recompute" --check-plan --layers 4 --seq-lens 16384,65536,262144 --steps 1
}

stage_sanitizers() {
    # Our kernels only (--backend flash: every tile variant and the two-sided path; naive has its
    # own run): racecheck cannot model cuDNN's kernels, as it cannot cuBLASLt's.
    sanitize memcheck_attention memcheck --leak-check no "$BIN/test_attention" --small --backend flash
    sanitize racecheck_attention racecheck "$BIN/test_attention" --small --backend flash
    sanitize memcheck_naive memcheck --leak-check no "$BIN/test_attention_naive" --small
    sanitize memcheck_two_sided memcheck --leak-check no "$BIN/test_attention_two_sided" --small
    sanitize racecheck_two_sided racecheck "$BIN/test_attention_two_sided" --small
    sanitize memcheck_ring memcheck --leak-check no "$BIN/test_ring" --small
    sanitize memcheck_ops memcheck --leak-check no "$BIN/test_ops" --small
    sanitize memcheck_decode memcheck --leak-check no "$BIN/test_kv_cache" --kernels
    sanitize racecheck_decode racecheck "$BIN/test_kv_cache" --kernels
    # racecheck cannot model cuBLASLt's own Hopper kernels (it flags hazards inside nvjet_sm90_*),
    # so it runs on our reduction kernels only.
    sanitize racecheck_layernorm racecheck "$BIN/test_ops" --small --filter layernorm
    # The pointer's kernels: memcheck in the model they serve; racecheck on the op alone (under
    # racecheck the model's cuBLASLt products end in a hardware exception).
    sanitize memcheck_pointer memcheck --leak-check no "$BIN/test_model" --pointer-only
    sanitize racecheck_pointer racecheck "$BIN/test_ops" --small --filter pointer
}

# ---- launchers: the communicator's ranks started by each launcher at hand

launcher_run() {  # name, P, command...: passes when it exits 0 and all P ranks print "N passed, 0 failed"
    local name=$1 P=$2; shift 2
    local t=$SECONDS log="$LOGS/launcher_$name.log" code ok
    timeout -s KILL 300 "$@" > "$log" 2>&1
    code=$?
    ok=$(grep -cE '(^|[] :])[0-9]+ passed, 0 failed$' "$log")
    if [ $code -eq 0 ] && [ "$ok" -eq "$P" ]; then
        total_pass=$((total_pass + 1))
    else
        total_fail=$((total_fail + 1))
        grep -E 'FAIL|error' "$log" | head -5
    fi
    rows+=("$(printf '%-28s %s of %s ranks passed  exit %-3s %4ss' "$name" "$ok" "$P" "$code" $((SECONDS - t)))")
}

stage_launchers() {
    local P=${LAUNCH_P:-$(nvidia-smi -L | wc -l)} prog=$BIN/test_comm_nccl m
    free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])' 2>/dev/null \
                  || echo $((20000 + RANDOM % 30000)); }
    launcher_run launch_sh "$P" scripts/launch.sh "$P" "$prog"
    if command -v torchrun > /dev/null; then
        # torchrun sets MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK (and LOCAL_WORLD_SIZE)
        launcher_run torchrun_standalone "$P" env NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc_per_node "$P" \
            --no_python "$prog"
        launcher_run torchrun_master_port "$P" env NCCL_NVLS_ENABLE=0 torchrun --nnodes 1 --nproc_per_node "$P" \
            --master_addr 127.0.0.1 --master_port "$(free_port)" --no_python "$prog"
    else
        summary+=("launchers: torchrun not installed (pip install torch), skipped")
    fi
    for m in mpirun.openmpi mpirun.mpich mpirun; do
        command -v "$m" > /dev/null || continue
        if [[ $("$m" --version 2>&1) == *@(Open MPI|OpenRTE)* ]]; then
            launcher_run "$m" "$P" env MASTER_ADDR=127.0.0.1 MASTER_PORT="$(free_port)" "$m" -np "$P" --allow-run-as-root \
                --oversubscribe -x MASTER_ADDR -x MASTER_PORT -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH "$prog"
        else
            launcher_run "$m" "$P" env MASTER_ADDR=127.0.0.1 MASTER_PORT="$(free_port)" NCCL_NVLS_ENABLE=0 "$m" -np "$P" "$prog"
        fi
        break  # one mpirun is enough (Debian's mpirun is an alternative of the other two)
    done
    command -v mpirun > /dev/null || summary+=("launchers: no mpirun (apt-get install openmpi-bin), skipped")
}

# ---- hosts: a job of several hosts, simulated (each rank in a network namespace of its own)

stage_hosts() {
    # scripts/sim_hosts.sh: one rank a host, NCCL over sockets only, each host its own copy of the
    # corpus and its own output folder (/tmp/lnghost inside it); nothing shared but the network.
    local P S=scripts/sim_hosts.sh T data c1 c2 l1 l2 ckpt
    P=$(nvidia-smi -L | wc -l)
    [ "$P" -ge 2 ] || { failed_stages+=("hosts: needs 2 or more GPUs, this machine has $P"); return; }
    launcher_run hosts_comm_nccl "$P" env NCCL_DEBUG=INFO "$S" "$P" "$BIN/test_comm_nccl"
    summary+=("hosts: NCCL's channels: $(grep -c 'via NET/Socket' "$LOGS/launcher_hosts_comm_nccl.log") via NET/Socket, $(grep -cE 'via (P2P|SHM)' "$LOGS/launcher_hosts_comm_nccl.log") via P2P or SHM")
    [ -x "$BIN/test_rendezvous" ] && summary+=("hosts: the rendezvous: $("$S" "$P" "$BIN/test_rendezvous" --probe 2>&1 | grep -oE 'probe rank [0-9]+ of [0-9]+ .* via [a-z]+' | tr '\n' ';')")
    launcher_run hosts_ring_nccl "$P" "$S" "$P" "$BIN/test_ring" --nccl
    # --cp P over the hosts against one GPU: the same flags, the same step-20 loss within 1%; host 0's
    # checkpoint (its own folder) loads; no other host wrote one.
    T=$((4096 * P)) data=/tmp/lnghost/$(basename "$DATA")
    local common=(--device cuda --seq-len $T --batch 2 --val-every 10 --seed 7 --steps 20 --ckpt-every 10 --attn dense --sample-tokens 0)
    "$BIN/train" "${common[@]}" --data "$DATA" --out "$OUT/hosts_cp1" > "$OUT/hosts_cp1.log" 2>&1
    c1=$?
    rm -rf "$OUT/hosts_keep"
    HOST_COPY=$DATA SIM_HOSTS_KEEP=$OUT/hosts_keep "$S" "$P" "$BIN/train" "${common[@]}" --data "$data" --cp "$P" \
        --out /tmp/lnghost/run > "$OUT/hosts_cpP.log" 2>&1
    c2=$?
    l1=$(grep -oE 'step +20/20 \| loss [0-9.]+' "$OUT/hosts_cp1.log" | grep -oE '[0-9.]+$')
    l2=$(grep -oE 'step +20/20 \| loss [0-9.]+' "$OUT/hosts_cpP.log" | head -1 | grep -oE '[0-9.]+$')
    ckpt=$OUT/hosts_keep/host0/run
    "$BIN/infer" --device cuda --checkpoint "$ckpt" --perplexity "$DATA/val.bin" --ctx 1024 > "$OUT/hosts_ppl.log" 2>&1
    local others; others=$(find "$OUT"/hosts_keep/host[1-9]* -name '*.safetensors' 2>/dev/null | wc -l)
    summary+=("hosts: train --cp $P T=$T over $P hosts exit $c2, step-20 loss $l2; one GPU exit $c1, $l1; host 0's checkpoint: $(grep -E '^file' "$OUT/hosts_ppl.log"); checkpoints on other hosts: $others")
    if [ $c1 -eq 0 ] && [ $c2 -eq 0 ] && [ "$others" -eq 0 ] && grep -qE '^file' "$OUT/hosts_ppl.log" &&
       awk -v a="$l1" -v b="$l2" 'BEGIN { exit !(a > 0 && b > 0 && (a - b) ^ 2 <= (0.01 * a) ^ 2) }'; then
        total_pass=$((total_pass + 1))
    else
        total_fail=$((total_fail + 1))
    fi
    rows+=("$(printf '%-28s one GPU %s, %s hosts %s' hosts_train_cp "$l1" "$P" "$l2")")
    # NCCL's send/receive rate over the sockets beside NVLink (the rate bench_ring's --bw models)
    if python3 -c 'import torch' 2> /dev/null; then
        MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + RANDOM % 20000)) scripts/launch.sh "$P" python3 scripts/nccl_bw.py > "$OUT/bw_nvlink.log" 2>&1
        "$S" "$P" python3 scripts/nccl_bw.py > "$OUT/bw_sockets.log" 2>&1
        summary+=("NCCL send/receive, NVLink: $(grep -oE 'nccl_bw .*' "$OUT/bw_nvlink.log" | tr '\n' ';')")
        summary+=("NCCL send/receive, sockets between hosts: $(grep -oE 'nccl_bw .*' "$OUT/bw_sockets.log" | tr '\n' ';')")
    fi
}

# ---- ops: the non-attention kernels in one call

stage_ops() {
    local before=$total_fail
    run_counted ops_seed1 "$BIN/test_ops" --seed 1
    run_counted ops_seed2 "$BIN/test_ops" --seed 20260501
    sanitize ops_memcheck memcheck --leak-check no "$BIN/test_ops" --small --seed 3
    # racecheck models no mbarrier/TMA synchronization: it flags cuBLASLt's Hopper kernels
    # (nvjet_*) as racy. Count only hazards reported in our own kernels.
    local f
    for f in layernorm classifier; do
        compute-sanitizer --tool racecheck "$BIN/test_ops" --small --seed 4 --filter $f > "$LOGS/ops_racecheck_$f.log" 2>&1
        echo "racecheck $f: $(grep -c 'Race reported' "$LOGS/ops_racecheck_$f.log") hazard reports, $(grep 'Race reported' "$LOGS/ops_racecheck_$f.log" | grep -vc nvjet) outside cuBLASLt's nvjet kernels"
    done
    "$BIN/test_ops" --perf --out "$OUT/ops_perf.txt" > "$LOGS/ops_perf.log" 2>&1
    cat "$OUT/ops_perf.txt" 2>/dev/null || tail -30 "$LOGS/ops_perf.log"
    summary+=("ops: $((total_fail - before)) failed")
}

# ---- attention: the flash attention work in one call, each step under a timeout

stage_attention() {
    local step rc line
    for step in ${ATTN_STEPS:-test bench torch memcheck racecheck}; do
        local t0=$SECONDS
        case $step in
            test) timeout 400 "$BIN/test_attention" > "$OUT/attn_test.log" 2>&1; rc=$?
                  grep -E "^(FAIL|    )" "$OUT/attn_test.log" | head -40
                  line="test: rc=$rc, $(tail -n 1 "$OUT/attn_test.log")" ;;
            memcheck) timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_attention" --small --backend flash > "$OUT/attn_memcheck.log" 2>&1; rc=$?
                  line="memcheck: rc=$rc, $(grep -E "ERROR SUMMARY" "$OUT/attn_memcheck.log" | tail -n 1), $(grep -E "passed, " "$OUT/attn_memcheck.log" | tail -n 1)" ;;
            racecheck) timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_attention" --small --backend flash > "$OUT/attn_racecheck.log" 2>&1; rc=$?
                  line="racecheck: rc=$rc, $(grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$OUT/attn_racecheck.log" | tail -n 1), $(grep -E "passed, " "$OUT/attn_racecheck.log" | tail -n 1)" ;;
            bench) timeout 100 "$BIN/bench_attention" --variants --out "$OUT/attn_bench.txt" > "$OUT/attn_bench.log" 2>&1; rc=$?
                  line="bench: rc=$rc" ;;
            torch) PYTHONUNBUFFERED=1 timeout 110 python3 scripts/check_attention_torch.py --out "$OUT/attn_torch.txt" > "$OUT/attn_torch.log" 2>&1; rc=$?
                  line="torch: rc=$rc" ;;
            *) rc=2 line="unknown attention step $step" ;;
        esac
        [ "$rc" -eq 0 ] || [ "$step" = bench ] || [ "$step" = torch ] || failed_stages+=("attention $step")
        summary+=("attention $line ($((SECONDS - t0)) s)")
    done
    [ -f "$OUT/attn_bench.txt" ] && cat "$OUT/attn_bench.txt"
    if [ -f "$OUT/attn_torch.txt" ]; then cat "$OUT/attn_torch.txt"; else tail -n 5 "$OUT/attn_torch.log" 2>/dev/null; fi
}

# ---- ab: two builds' attention benchmarks, interleaved

stage_ab() {
    local old=${OLD:-$CARRY/old} new=${NEW:-$BIN} rounds=${ROUNDS:-2} dir=$OUT/bench_ab bench args cols r
    mkdir -p "$dir"
    for bench in ${BENCHES:-attention attention_dilated attention_block_sparse train}; do
        [ -x "$old/bench_$bench" ] && [ -x "$new/bench_$bench" ] || { echo "== $bench: not in both builds, skipped"; continue; }
        case $bench in  # its flags, and the columns of its two times (compare_bench_tables.py)
            attention) args=${BENCH_ATTENTION_ARGS:---no-cudnn} cols=0,2 ;;
            attention_dilated) args=${BENCH_DILATED_ARGS:-} cols=0,2 ;;
            attention_block_sparse) args=${BENCH_BLOCK_SPARSE_ARGS:-} cols=0,3 ;;
            train) args=${BENCH_TRAIN_ARGS:---attention flash} cols=0,0 ;;
        esac
        local olds=() news=() again=()
        for r in $(seq 1 "$rounds"); do
            # shellcheck disable=SC2086
            "$old/bench_$bench" --out "$dir/${bench}_old_$r.md" $args > /dev/null || echo "old bench_$bench failed"
            # shellcheck disable=SC2086
            "$new/bench_$bench" --out "$dir/${bench}_new_$r.md" $args > /dev/null || echo "new bench_$bench failed"
            olds+=("$dir/${bench}_old_$r.md") news+=("$dir/${bench}_new_$r.md")
            if [ -n "${AA:-}" ]; then
                # shellcheck disable=SC2086
                "$old/bench_$bench" --out "$dir/${bench}_again_$r.md" $args > /dev/null || echo "old bench_$bench failed (again)"
                again+=("$dir/${bench}_again_$r.md")
            fi
        done
        echo "== $bench: new/old, best of $rounds runs each"
        python3 scripts/compare_bench_tables.py "$(IFS=,; echo "${olds[*]}")" "$(IFS=,; echo "${news[*]}")" $cols | tee "$dir/${bench}_ab.md"
        if [ -n "${AA:-}" ]; then
            echo "== $bench: the control, old again/old (the same binaries), best of $rounds runs each"
            python3 scripts/compare_bench_tables.py "$(IFS=,; echo "${olds[*]}")" "$(IFS=,; echo "${again[*]}")" $cols | tee "$dir/${bench}_aa.md"
        fi
    done
    summary+=("ab: $(grep -h worst "$dir"/*_ab.md 2>/dev/null | tr '\n' ' ')")
}

# ---- the stages

pack_programs=()
if [ "${stages[0]}" = pack ]; then pack_programs=("${stages[@]:1}"); stages=(pack); fi
LOGS=${LOGS:-$OUT/logs}
mkdir -p "$OUT" "$LOGS"
if [ "${stages[0]}" != pack ]; then
    # shellcheck source=scripts/gpu_lib_paths.sh
    source scripts/gpu_lib_paths.sh "$(cd "$BIN" 2>/dev/null && pwd)"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader \
        || { echo "no GPU: nothing to run"; exit 1; }
fi
for stage in "${stages[@]}"; do
    t0=$SECONDS
    case $stage in
        pack) stage_pack ;;
        tests) stage_tests ;;
        sanitizers) stage_sanitizers ;;
        launchers) stage_launchers ;;
        hosts) stage_hosts ;;
        ops) stage_ops ;;
        attention) stage_attention ;;
        bench) BIN=$BIN OUTDIR=$OUT bench/run_bench.sh > "$OUT/bench.log" 2>&1
               summary+=("bench: exit $? ($((SECONDS - t0)) s)")
               tail -40 "$OUT/bench.log" ;;
        ab) stage_ab ;;
        train) "$BIN/train" --device cuda --data "$DATA" --out "$OUT/train" ${TRAIN_ARGS:-} > "$OUT/train.log" 2>&1
               summary+=("train: exit $? ($((SECONDS - t0)) s): $(grep -E '^done' "$OUT/train.log")")
               grep -E '^(model|data|step .*(val|/.* \| loss)|done)' "$OUT/train.log" | tail -14
               sed -n '/--- sample ---/,/^------/p' "$OUT/train.log" | head -14 ;;
        infer) # needs the train stage's checkpoint: generation and perplexity on the GPU
               "$BIN/infer" --device cuda --checkpoint "$OUT/train" --prompt "And God said" --max-new 60 --seed 3 > "$OUT/infer.log" 2>&1
               "$BIN/infer" --device cuda --checkpoint "$OUT/train" --perplexity "$DATA/val_text.txt" --ctx 1024 >> "$OUT/infer.log" 2>&1
               summary+=("infer: exit $? ($((SECONDS - t0)) s): $(grep -E '^file' "$OUT/infer.log")")
               cat "$OUT/infer.log" ;;
        long_prompt) # a book-sized prompt (400 KB of the corpus text) must start generating in
               # seconds; needs the train stage's checkpoint
               head -c 400000 "$DATA/bible.txt" > "$OUT/prompt_400k.txt"
               t1=$(date +%s.%N)
               "$BIN/infer" --device cuda --checkpoint "$OUT/train" --prompt-file "$OUT/prompt_400k.txt" --max-new 16 --seed 3 > "$OUT/long_prompt.log" 2>&1
               code=$?; t2=$(date +%s.%N)
               summary+=("long_prompt: exit $code, 400 KB prompt + 16 new tokens in $(awk -v a=$t1 -v b=$t2 'BEGIN{printf "%.2f", b-a}') s")
               tail -c 300 "$OUT/long_prompt.log"; echo ;;
        errors) # bad input on the GPU: one line, the cause and the fix, no bare CUDA error
               for args in "--batch 64 --seq-len 32768" "--attention cudnn" "--attention cudnn --doc-mask off --attn dilated"; do
                   "$BIN/train" --device cuda --data "$DATA" --out "$OUT/bad" --steps 2 $args > "$OUT/err.log" 2>&1
                   echo "train $args -> exit $?: $(tail -1 "$OUT/err.log")"
               done ;;
        recompute) # gradient checkpointing: the 91M dilated model, B = 1, random tokens
               LONGNET="--segments 2048,4096,8192,16384,32768 --dilations 1,2,4,6,12"
               "$BIN/bench_recompute" --seq-lens 262144 --steps 3 --out "$OUT/recompute_262k.md" > "$OUT/recompute.log" 2>&1
               "$BIN/bench_recompute" --recompute selective,full --seq-lens 1048576 --steps 2 --out "$OUT/recompute_1m.md" >> "$OUT/recompute.log" 2>&1
               "$BIN/bench_recompute" --recompute full --seq-lens 2097152 --steps 2 --out "$OUT/recompute_2m.md" >> "$OUT/recompute.log" 2>&1
               # the planner in train: 32 windows of 64K (2M tokens per step) on the corpus, auto
               "$BIN/train" --device cuda --data "$DATA" --attn dilated $LONGNET --seq-len 65536 --batch 32 \
                   --steps 6 --warmup 2 --val-every 0 --val-batches 1 --ckpt-every 0 --log-every 1 --sample-tokens 0 \
                   --out "$OUT/train_2m_per_step" > "$OUT/recompute_train.log" 2>&1
               summary+=("recompute: train exit $? ($((SECONDS - t0)) s)")
               cat "$OUT"/recompute_262k.md "$OUT"/recompute_1m.md "$OUT"/recompute_2m.md 2>/dev/null | grep -v "^| ---"
               grep -E "^(memory plan|  (none|selective|full) |step +[0-9]+ |done|error)" "$OUT/recompute_train.log" | head -16 ;;
        kv_cache) # long-context inference: the KV cache test, prefill/decode for dilated and dense,
               # and a short dilated training run whose checkpoint reads a book as its prompt and scores it
               LONGNET="--attn dilated --segments 2048,4096,8192,16384,32768 --dilations 1,2,4,6,12"
               "$BIN/test_kv_cache" > "$OUT/test_kv_cache.log" 2>&1
               # 32768 tokens: every segment of the dilated model walked once (the average over positions)
               "$BIN/bench_kv_cache" --contexts 65536,1048576 --batches 1,4,8 --decode 32768 --graph-only --out "$OUT/kv_dilated.md" > "$OUT/bench_kv.log" 2>&1
               "$BIN/bench_kv_cache" --dense --contexts 65536,262144,1048576 --decode 32 --out "$OUT/kv_dense.md" >> "$OUT/bench_kv.log" 2>&1
               "$BIN/bench_kv_cache" --breakdown > "$OUT/breakdown.md" 2>&1
               "$BIN/train" --device cuda --data "$DATA" $LONGNET --seq-len 8192 --batch 8 --steps 250 --warmup 30 \
                   --val-every 0 --val-batches 2 --ckpt-every 0 --log-every 50 --sample-tokens 0 --out "$OUT/kv_ckpt" > "$OUT/kv_train.log" 2>&1
               "$BIN/infer" --device cuda --checkpoint "$OUT/kv_ckpt" --prompt-file "$DATA/val_text.txt" \
                   --prompt " And the LORD said" --max-new 60 --seed 3 > "$OUT/gen_book.log" 2> "$OUT/gen_book.err"
               scripts/pack_tree.sh layers > "$OUT/tree.txt"  # this project's layers/ as a codebase prompt
               "$BIN/infer" --device cuda --checkpoint "$OUT/kv_ckpt" --prompt-file "$OUT/tree.txt" \
                   --prompt "# ==== layers/softmax.h ====" --max-new 60 --seed 3 > "$OUT/gen_tree.log" 2> "$OUT/gen_tree.err"
               "$BIN/infer" --device cuda --checkpoint "$OUT/kv_ckpt" --perplexity "$DATA/val_text.txt" \
                   --per-position "$OUT/positions_dilated.csv" > "$OUT/ppl.log" 2>&1
               "$BIN/infer" --device cuda --checkpoint "$OUT/kv_ckpt" --perplexity "$DATA/val_text.txt" \
                   --windows fresh --ctx 8192 >> "$OUT/ppl.log" 2>&1
               summary+=("kv_cache: $(tail -1 "$OUT/test_kv_cache.log") ($((SECONDS - t0)) s)")
               cat "$OUT/bench_kv.log"; tail -3 "$OUT/gen_book.err"; tail -c 400 "$OUT/gen_book.log"; echo
               tail -3 "$OUT/gen_tree.err"; tail -c 500 "$OUT/gen_tree.log"; echo
               grep -v "^scored" "$OUT/ppl.log" | grep "^file" ;;
        block_sparse) # block-sparse attention: ours, every tile variant at 1M, and
               # PyTorch's FlexAttention on the same pattern, in this one call
               "$BIN/bench_attention_block_sparse" --variants --out "$OUT/block_sparse.md" > "$OUT/block_sparse.log" 2>&1
               summary+=("block_sparse: exit $? ($((SECONDS - t0)) s)")
               python3 scripts/bench_flex_attention.py --out "$OUT/flex.md" > "$OUT/flex.log" 2>&1
               summary+=("flex: exit $? ($((SECONDS - t0)) s)")
               cat "$OUT/block_sparse.md" "$OUT/flex.md" ;;
        nccl)  # one NCCL rank per GPU of this host: the communicator, ring attention
               # against one GPU, training and perplexity at --cp P against one GPU, a hung rank
               P=$(nvidia-smi -L | wc -l)
               L=scripts/launch.sh
               $L "$P" "$BIN/test_comm_nccl" > "$OUT/nccl_comm.log" 2>&1
               summary+=("nccl comm P=$P: exit $?: $(grep -E 'rank 0\] [0-9]+ passed' "$OUT/nccl_comm.log")")
               $L "$P" "$BIN/test_ring" --nccl > "$OUT/nccl_ring.log" 2>&1
               summary+=("nccl ring P=$P: exit $?: $(grep -E '\] [0-9]+ passed' "$OUT/nccl_ring.log" | tr '\n' ' ')")
               grep -E 'FAIL' "$OUT/nccl_ring.log" | head -5
               T=$((4096 * P))
               common="--device cuda --data $DATA --seq-len $T --batch 2 --val-every 10 --seed 7"  # no --steps/--ckpt-every: each run gives its own (a flag twice is refused)
               for attn in "dense" "dilated --segments 1024,2048,4096 --dilations 1,2,4" "block-sparse --block 64 --window 512 --global 64"; do
                   tag=${attn%% *}
                   "$BIN/train" $common --steps 20 --ckpt-every 10 --attn $attn --out "$OUT/cp1_$tag" > "$OUT/cp1_$tag.log" 2>&1
                   c1=$?
                   $L "$P" "$BIN/train" $common --steps 20 --ckpt-every 10 --attn $attn --cp "$P" --out "$OUT/cpP_$tag" > "$OUT/cpP_$tag.log" 2>&1
                   c2=$?
                   l1=$(grep -oE 'step +20/20 \| loss [0-9.]+' "$OUT/cp1_$tag.log" | grep -oE '[0-9.]+$')
                   l2=$(grep -oE 'step +20/20 \| loss [0-9.]+' "$OUT/cpP_$tag.log" | head -1 | grep -oE '[0-9.]+$')
                   v1=$(grep -E '^done' "$OUT/cp1_$tag.log"); v2=$(grep -E '^\[rank 0\] done' "$OUT/cpP_$tag.log")
                   summary+=("train $tag T=$T: 1 GPU exit $c1 step-20 loss $l1 | --cp $P exit $c2 loss $l2 | $v1 | $v2")
               done
               "$BIN/infer" --device cuda --checkpoint "$OUT/cp1_dense" --perplexity "$DATA/val_text.txt" --ctx $T > "$OUT/ppl1.log" 2>&1
               $L "$P" "$BIN/infer" --device cuda --checkpoint "$OUT/cp1_dense" --perplexity "$DATA/val_text.txt" --ctx $T --cp "$P" > "$OUT/pplP.log" 2>&1
               summary+=("perplexity 1 GPU: $(grep -E '^file' "$OUT/ppl1.log") | --cp $P: $(grep -E '\] file' "$OUT/pplP.log" | head -1)")
               ;;
        faults) # several GPUs: a rank that hangs and a rank whose GPU fails, each while
               # the job trains at --cp P; the others must end within a minute, naming it
               P=$(nvidia-smi -L | wc -l)
               L=scripts/launch.sh
               T=$((4096 * P))
               common="--device cuda --data $DATA --seq-len $T --batch 2 --val-every 10 --seed 7"
               # A rank that hangs (SIGSTOP) mid-training: the others must stop with a message
               # naming it within a minute (the NCCL timeout is 45 s), and the checkpoints stay readable.
               $L "$P" "$BIN/train" $common --steps 100000 --ckpt-every 5 --attn dense --cp "$P" --out "$OUT/hang" > "$OUT/hang.log" 2>&1 &
               lpid=$!
               for i in $(seq 90); do grep -qs '^7,train' "$OUT/hang/metrics.csv" && break; sleep 1; done
               victim=""
               for p in $(pgrep -f "$BIN/train"); do tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "RANK=$((P - 1))" && victim=$p; done
               t_stop=$SECONDS; kill -STOP "$victim"
               wait $lpid; code=$?
               took=$((SECONDS - t_stop))
               { [ "$code" -ne 0 ] && [ $took -le 60 ] && grep -E 'error|launch:' "$OUT/hang.log" | grep -q "rank $((P - 1))"; } ||
                   failed_stages+=("faults: the hung rank: exit $code after $took s, or no line names rank $((P - 1))")
               kill -KILL "$victim" 2>/dev/null
               "$BIN/infer" --device cuda --checkpoint "$OUT/hang" --perplexity "$DATA/val_text.txt" --ctx 1024 > "$OUT/hang_ppl.log" 2>&1
               summary+=("hung rank $((P - 1)) (pid $victim): job exit $code after $took s: $(grep -iE 'rank|timed out|error' "$OUT/hang.log" | grep -v ' step ' | tail -2 | tr '\n' ' ') | checkpoint after: $(grep -E '^file' "$OUT/hang_ppl.log")")
               tail -3 "$OUT/hang.log"
               # A rank whose GPU fails (a device-side trap after step 7, LNGPT_GPU_FAULT_AT_STEP):
               # one line from it, the job ended at once, the step-5 checkpoint loadable.
               t_fault=$SECONDS
               LNGPT_GPU_FAULT_AT_STEP=7 $L "$P" "$BIN/train" $common --steps 100000 --ckpt-every 5 --attn dense --cp "$P" \
                   --out "$OUT/fault" > "$OUT/fault.log" 2>&1
               code=$?
               "$BIN/infer" --device cuda --checkpoint "$OUT/fault" --perplexity "$DATA/val_text.txt" --ctx 1024 > "$OUT/fault_ppl.log" 2>&1
               summary+=("GPU fault on rank $((P - 1)) after step 7: job exit $code after $((SECONDS - t_fault)) s: $(grep -E 'error|launch:' "$OUT/fault.log" | head -2 | tr '\n' ' ') | checkpoint after: $(grep -E '^file' "$OUT/fault_ppl.log")")
               # A healthy step longer than the time-out is not a hang: the time-out counts time
               # without progress (a block done), not the step. A dense ring step at 1M tokens,
               # 4 blocks, with a 10 s time-out (FAULTS_LONG_T, FAULTS_LONG_LAYERS change it).
               LONGNET_COMM_TIMEOUT_S=10 $L "$P" "$BIN/train" --device cuda --data "$DATA" --attn dense --cp "$P" \
                   --layers "${FAULTS_LONG_LAYERS:-4}" --seq-len "${FAULTS_LONG_T:-1048576}" --batch 1 --steps 2 --warmup 1 \
                   --val-every 0 --val-batches 1 --ckpt-every 0 --log-every 1 --sample-tokens 0 --time-comm --out "$OUT/long_step" > "$OUT/long_step.log" 2>&1
               code=$?
               step_ms=$(grep -oE '\| step [0-9.]+ ms' "$OUT/long_step.log" | head -1 | grep -oE '[0-9.]+')
               summary+=("a healthy step of ${step_ms:-?} ms under LONGNET_COMM_TIMEOUT_S=10: exit $code $(grep -E 'error|launch:' "$OUT/long_step.log" | head -1)")
               { [ "$code" -eq 0 ] && awk -v m="${step_ms:-0}" 'BEGIN { exit !(m > 10000) }'; } ||
                   failed_stages+=("faults: the healthy long step: exit $code, step ${step_ms:-?} ms (must pass and last over 10 s)") ;;
        dp)    # data parallel over this host's GPUs: the gradients summed block by block
               # during the backward (--grad-overlap on) or after it (off), against one GPU with the
               # same global batch; the step-20 validation losses must agree within 0.5%
               P=$(nvidia-smi -L | wc -l)
               dp=(--device cuda --data "$DATA" --steps 20 --seq-len 1024 --batch $((4 * P)) --val-every 10 --ckpt-every 0
                   --seed 7 --sample-tokens 0)
               "$BIN/train" "${dp[@]}" --out "$OUT/dp_1gpu" > "$OUT/dp_1gpu.log" 2>&1
               line="dp: 1 GPU exit $?"
               for ov in on off; do
                   scripts/launch.sh "$P" "$BIN/train" "${dp[@]}" --grad-overlap $ov --out "$OUT/dp_$ov" > "$OUT/dp_$ov.log" 2>&1
                   line+=", P=$P --grad-overlap $ov exit $?"
               done
               vals=$(for r in 1gpu on off; do awk -F, '$1 == 20 && $2 == "val" { print $3 }' "$OUT/dp_$r/metrics.csv" 2>/dev/null | tail -1; done | tr '\n' ' ')
               summary+=("$line; step-20 val loss (1 GPU, on, off): $vals")
               awk -v v="$vals" 'BEGIN { n = split(v, x, " "); if (n < 3) exit 1
                   for (i = 2; i <= 3; i++) if (x[i] - x[1] > 0.005 * x[1] || x[1] - x[i] > 0.005 * x[1]) exit 1 }' ||
                   failed_stages+=("dp: val losses $vals disagree or are missing") ;;
        split) # one training step by kind of op beside its floor (bench_train --split on)
               "$BIN/bench_train" --split on --batches "${SPLIT_BATCHES:-32}" --attention flash --out "$OUT/split.md" > "$OUT/split.log" 2>&1
               summary+=("split: exit $? ($((SECONDS - t0)) s)")
               cat "$OUT/split.md" ;;
        attn_perf) "$BIN/test_attention" --perf > "$OUT/attn_perf.log" 2>&1
               summary+=("attn_perf: exit $? ($((SECONDS - t0)) s)")
               cat "$OUT/attn_perf.log" ;;
        dilated_bench) "$BIN/bench_attention_dilated" --out "$OUT/dilated_bench.md" > "$OUT/dilated_bench.log" 2>&1
               summary+=("dilated_bench: exit $? ($((SECONDS - t0)) s)")
               cat "$OUT/dilated_bench.md" ;;
        compare) # the same model at T = 32768, dense and dilated (LongNet), the same tokens seen
               common=(--device cuda --data "$DATA" --seq-len 32768 --batch 1 --steps ${COMPARE_STEPS:-200}
                       --warmup 20 --val-every 50 --val-batches 3 --ckpt-every 0 --keep-ckpts 1 --log-every 25 --sample-tokens 0)
               for run in dense dilated; do
                   extra=(); [ $run = dilated ] && extra=(--attn dilated --segments 2048,4096,8192 --dilations 1,2,4)
                   "$BIN/train" "${common[@]}" "${extra[@]}" --out "$OUT/$run" > "$OUT/$run.log" 2>&1
                   summary+=("compare $run: exit $?: $(grep -E '^done' "$OUT/$run.log")")
                   cp "$OUT/$run.log" "$OUT/$run/train.log"; rm -f "$OUT/$run"/*.safetensors
                   grep -E 'val loss|^done' "$OUT/$run.log"
               done ;;
        long_context) # does a model use its context? The same model (91M unless LC_MODEL) and the same tokens
               # (LC_STEPS x 262,144), trained as dense at 2K or dilated (LongNet) at 32K or 256K on the
               # long-document corpus, then scored by position inside held-out documents >= 256K tokens.
               # A *_from2k model trains its first LC_BASE_STEPS at 2K (128 windows a step), then the
               # rest at its full window from those weights (--init-from), at a tenth of the peak rate.
               LONG=$CARRY/corpus-long
               steps=${LC_STEPS:-300} base=${LC_BASE_STEPS:-200}
               common=(--device cuda --data "$LONG" ${LC_MODEL:---layers 12 --width 768 --heads 12} --val-every 0
                       --val-batches 4 --ckpt-every 0 --keep-ckpts 1 --log-every 25 --sample-tokens 0)
               first_lr=(--warmup 30 --lr 1e-3)  # not in common: the extension run gives its own (train refuses a flag twice)
               D32=(--attn dilated --segments 2048,4096,8192,16384,32768 --dilations 1,2,4,6,12)
               D256=(--attn dilated --segments 2048,4096,8192,16384,32768,65536,131072,262144 --dilations 1,2,4,6,12,24,48,96)
               for m in ${LC_MODELS:-dense2k dilated32k dilated256k}; do
                   case $m in
                       dense2k) pattern=(--attn dense) full=(--seq-len 2048 --batch 128) ;;
                       dilated32k*) pattern=("${D32[@]}") full=(--seq-len 32768 --batch 8) ;;
                       dilated256k*) pattern=("${D256[@]}") full=(--seq-len 262144 --batch 1) ;;
                       *) echo "unknown LC_MODELS entry $m"; continue ;;
                   esac
                   if [[ $m == *_from2k ]]; then
                       "$BIN/train" "${common[@]}" "${pattern[@]}" "${first_lr[@]}" --seq-len 2048 --batch 128 --steps "$base" \
                           --out "$OUT/lc_${m}_base" > "$OUT/lc_${m}_base.log" 2>&1
                       summary+=("long_context $m base: exit $? ($((SECONDS - t0)) s): $(grep -E '^done' "$OUT/lc_${m}_base.log")")
                       "$BIN/train" "${common[@]}" "${pattern[@]}" "${full[@]}" --steps $((steps - base)) --warmup 10 --lr "${LC_EXT_LR:-1e-4}" \
                           --init-from "$OUT/lc_${m}_base" --out "$OUT/lc_$m" > "$OUT/lc_$m.log" 2>&1
                       rm -f "$OUT/lc_${m}_base"/*.safetensors
                   else
                       "$BIN/train" "${common[@]}" "${pattern[@]}" "${full[@]}" "${first_lr[@]}" --steps "$steps" --out "$OUT/lc_$m" > "$OUT/lc_$m.log" 2>&1
                   fi
                   summary+=("long_context $m: train exit $? ($((SECONDS - t0)) s): $(grep -E '^done' "$OUT/lc_$m.log")")
                   "$BIN/infer" --device cuda --checkpoint "$OUT/lc_$m" --perplexity "$LONG/val.bin" --min-doc-tokens 262144 \
                       --per-position "$OUT/positions_$m.csv" > "$OUT/lc_${m}_ppl.log" 2>&1
                   summary+=("long_context $m: $(grep -E '^file' "$OUT/lc_${m}_ppl.log") ($((SECONDS - t0)) s)")
                   if [ -n "${LC_SLIDING:-}" ]; then  # the same model with a short context: what its long context is worth
                       "$BIN/infer" --device cuda --checkpoint "$OUT/lc_$m" --perplexity "$LONG/val.bin" --min-doc-tokens 262144 \
                           --windows sliding --ctx "$LC_SLIDING" --per-position "$OUT/positions_${m}_ctx$LC_SLIDING.csv" > "$OUT/lc_${m}_ppl_short.log" 2>&1
                       summary+=("long_context $m, --windows sliding --ctx $LC_SLIDING: $(grep -E '^file' "$OUT/lc_${m}_ppl_short.log") ($((SECONDS - t0)) s)")
                   fi
                   grep -E '^(model|weights from|  .*<- chosen|step +[0-9]+/.*(val|\| loss)|done)' "$OUT/lc_$m.log" | tail -8
                   if [ "${LC_PROMPTS:-0}" = 1 ]; then  # a book and a held-out codebase as prompts
                       "$BIN/infer" --device cuda --checkpoint "$OUT/lc_$m" --prompt-file "$CARRY/prompts/book.txt" \
                           --prompt "${LC_BOOK_PROMPT:-}" --max-new 80 --seed 3 > "$OUT/lc_${m}_gen_book.log" 2> "$OUT/lc_${m}_gen_book.err"
                       "$BIN/infer" --device cuda --checkpoint "$OUT/lc_$m" --prompt-file "$CARRY/prompts/tree.txt" \
                           --prompt "${LC_TREE_PROMPT:-}" --max-new 120 --seed 3 > "$OUT/lc_${m}_gen_tree.log" 2> "$OUT/lc_${m}_gen_tree.err"
                       summary+=("long_context $m prompts: $(grep -h prefilled "$OUT"/lc_${m}_gen_*.err | tr '\n' ' ')")
                       tail -c 600 "$OUT/lc_${m}_gen_book.log"; echo; tail -c 800 "$OUT/lc_${m}_gen_tree.log"; echo
                   fi
                   rm -f "$OUT/lc_$m"/*.safetensors
               done ;;
        *) echo "unknown stage '$stage': see scripts/device.sh (no arguments) for the stages"; exit 2 ;;
    esac
done
echo; printf '%s\n' "${summary[@]}"
if [ ${#rows[@]} -gt 0 ]; then  # the tests' table, then the line tests/run_all.sh-style tools sum
    echo
    printf '%s\n' "${rows[@]}"
    echo "$total_pass passed, $total_fail failed"
fi
[ "$total_fail" -eq 0 ] && [ ${#failed_stages[@]} -eq 0 ]
