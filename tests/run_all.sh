#!/usr/bin/env bash
# Runs every CPU test (what `make test` and CI run) and sums their "N passed, M failed" lines.
# Expects the binaries built (make test builds them first).
set -uo pipefail
cd "$(dirname "$0")/.."
# Two lanes, one per core of the CI machine: the suites that read build/test_corpus run after
# data_cli, which makes it, in one lane, then the fuzzer smoke test (two harnesses at a time, so
# both cores once the other lane is done); the others (the header and pattern-module builds, the
# unit tests, the launcher and rendezvous tests, which even the lanes' times) in the other, which
# ends with a few corpus suites (lane_corpus_tail) once data_cli has made the corpus. Each suite's
# output goes to build/logs/<name>.log and is printed whole when the lanes are done; its result
# line as soon as it ends. TEST_LANES=1 runs every suite in one lane, in order.
mkdir -p build/logs
results=build/logs/results.txt
: > "$results"
run() {  # name, command...
    local name=$1; shift
    local start=$SECONDS log="build/logs/$name.log"
    "$@" > "$log" 2>&1 < /dev/null
    local code=$?
    local summary; summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    local p f
    p=$(echo "$summary" | awk '{print $1}'); f=$(echo "$summary" | awk '{print $3}')
    if [ -z "$summary" ]; then p=0; f=1; fi
    if [ "$code" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then f=1; fi
    echo "$name $p $f" >> "$results"
    echo "=== $name: ${p} passed, ${f} failed, exit $code, $((SECONDS - start)) s"
}
corpus_ready=build/logs/corpus_ready
rm -f "$corpus_ready"
lane_corpus() {
    run data_cli tests/test_data_cli.sh
    touch "$corpus_ready"  # made or not: a suite without its corpus says so itself
    run prepare_text tests/test_prepare_text.sh
    run train_cli tests/test_train_cli.sh
    run resume_recipe tests/test_resume_recipe.sh
    run run_lock tests/test_run_lock.sh
    run output_paths tests/test_output_paths.sh
    run bounded_reads tests/test_bounded_reads.sh
    run tasks_cli tests/test_tasks_cli.sh
    run shard_identity tests/test_shard_identity.sh
    run retrieval_study tests/test_retrieval_study.sh
    run layout_files tests/test_layout_files.sh
    run fuzz tests/fuzz/run_fuzz.sh smoke
}
# Suites that read the corpus (each in its own work folder) run at the end of the other lane.
lane_corpus_tail() {
    run recorded_values tests/test_recorded_values.sh
    run hostile_inputs tests/test_hostile_inputs.sh
    run copy_loss_cli tests/test_copy_loss_cli.sh
    run reference_model tests/test_reference_model.sh
    run weights_only tests/test_weights_only.sh
}
lane_rest() {
    run ops ./build/test_ops_cpu
    run gradcheck_can_fail tests/expect_gradcheck_failure.sh
    run model ./build/test_model_cpu
    run inputs ./build/test_inputs_cpu
    run attention ./build/test_attention_cpu
    run ring ./build/test_ring_cpu
    run cp_train ./build/test_cp_train_cpu
    run cublaslt_loader ./build/test_cublaslt_loader
    run bench_scaling tests/test_bench_scaling.sh
    run peer_table tests/test_peer_table.sh
    run reading_pairs tests/test_reading_pairs.sh
    run quote_misses tests/test_quote_misses.sh
    run quote_distractors tests/test_quote_distractors.sh
    run copy_positions tests/test_copy_positions.sh
    run copy_screen tests/test_copy_screen.sh
    run quote_examples tests/test_quote_examples.sh
    run data ./build/test_data
    run tasks ./build/test_tasks
    run copy_loss ./build/test_copy_loss_cpu
    run attention_probe ./build/test_attention_probe_cpu
    run plot_heatmap tests/test_plot_heatmap.sh
    run headers tests/check_headers_alone.sh
    run layers tests/check_layers.sh
    run kernel_rooms tests/check_kernel_rooms.sh
    run function_length tests/check_function_length.py
    run pattern_module tests/check_pattern_module.sh
    run scripts tests/check_scripts.sh
    run no_history tests/check_no_history.sh
    run launch tests/test_launch.sh
    run rendezvous ./build/test_rendezvous
    run rendezvous_fuzz ./build/test_rendezvous --fuzz
    run attention_tool tests/test_attention_tool.sh
}
if [ "${TEST_LANES:-2}" = 1 ]; then
    lane_rest
    lane_corpus
    lane_corpus_tail
else
    lane_corpus &
    corpus_pid=$!
    lane_rest
    while [ ! -f "$corpus_ready" ] && kill -0 "$corpus_pid" 2> /dev/null; do sleep 1; done
    lane_corpus_tail
    wait "$corpus_pid"
fi

total_pass=0 total_fail=0 broken=()
while read -r name p f; do
    total_pass=$((total_pass + p)) total_fail=$((total_fail + f))
    [ "$f" -eq 0 ] || broken+=("$name")
done < "$results"
for name in "${broken[@]+"${broken[@]}"}"; do  # a failing suite's whole output, last
    echo; echo "=== $name's output (build/logs/$name.log):"; cat "build/logs/$name.log"
done
echo
[ ${#broken[@]} -eq 0 ] || echo "failing suites: ${broken[*]}"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
