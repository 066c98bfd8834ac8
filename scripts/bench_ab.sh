#!/usr/bin/env bash
# Two builds' attention benchmarks in one device call, interleaved (old, new, old, new) so that
# clocks and temperature drift hit both alike; then scripts/compare_bench_tables.py prints the
# new/old time ratios per row (best of the runs of each build).
#   OLD=dir NEW=dir [ROUNDS=2] [AA=1] [OUTDIR=build/bench_ab] scripts/bench_ab.sh
# AA=1 adds the control: every round runs the old build a second time (old, new, old again), and
# a second table gives old-again/old per row, the noise floor the new/old ratios stand against.
# OLD and NEW hold the benchmarks (built from bench/: bench_attention, bench_attention_dilated,
# bench_attention_block_sparse, bench_train; one missing from either is skipped);
# BENCH_ATTENTION_ARGS, BENCH_DILATED_ARGS, BENCH_BLOCK_SPARSE_ARGS and BENCH_TRAIN_ARGS pass
# flags (e.g. --max-n); BENCHES names which to run (default all four: attention attention_dilated
# attention_block_sparse train).
set -uo pipefail
cd "$(dirname "$0")/.."
OLD=${OLD:?set OLD to the old build's binaries} NEW=${NEW:?set NEW to the new build's binaries}
ROUNDS=${ROUNDS:-2}
OUTDIR=${OUTDIR:-build/bench_ab}
mkdir -p "$OUTDIR"
# shellcheck source=scripts/gpu_lib_paths.sh
source scripts/gpu_lib_paths.sh "$(cd "$NEW" && pwd)"
# Each benchmark both builds hold: its flags, and the columns of its two times (compare_bench_tables.py).
for bench in ${BENCHES:-attention attention_dilated attention_block_sparse train}; do
    [ -x "$OLD/bench_$bench" ] && [ -x "$NEW/bench_$bench" ] || { echo "== $bench: not in both builds, skipped"; continue; }
    case $bench in
        attention) args=${BENCH_ATTENTION_ARGS:---no-cudnn} cols=0,2 ;;
        attention_dilated) args=${BENCH_DILATED_ARGS:-} cols=0,2 ;;
        attention_block_sparse) args=${BENCH_BLOCK_SPARSE_ARGS:-} cols=0,3 ;;
        train) args=${BENCH_TRAIN_ARGS:---attention flash} cols=0,0 ;;
    esac
    old=() new=() again=()
    for r in $(seq 1 "$ROUNDS"); do
        # shellcheck disable=SC2086
        "$OLD/bench_$bench" --out "$OUTDIR/${bench}_old_$r.md" $args > /dev/null || echo "old bench_$bench failed"
        # shellcheck disable=SC2086
        "$NEW/bench_$bench" --out "$OUTDIR/${bench}_new_$r.md" $args > /dev/null || echo "new bench_$bench failed"
        old+=("$OUTDIR/${bench}_old_$r.md") new+=("$OUTDIR/${bench}_new_$r.md")
        if [ -n "${AA:-}" ]; then
            # shellcheck disable=SC2086
            "$OLD/bench_$bench" --out "$OUTDIR/${bench}_again_$r.md" $args > /dev/null || echo "old bench_$bench failed (again)"
            again+=("$OUTDIR/${bench}_again_$r.md")
        fi
    done
    echo "== $bench: new/old, best of $ROUNDS runs each"
    python3 scripts/compare_bench_tables.py "$(IFS=,; echo "${old[*]}")" "$(IFS=,; echo "${new[*]}")" $cols | tee "$OUTDIR/${bench}_ab.md"
    if [ -n "${AA:-}" ]; then
        echo "== $bench: the control, old again/old (the same binaries), best of $ROUNDS runs each"
        python3 scripts/compare_bench_tables.py "$(IFS=,; echo "${old[*]}")" "$(IFS=,; echo "${again[*]}")" $cols | tee "$OUTDIR/${bench}_aa.md"
    fi
done
