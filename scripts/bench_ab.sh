#!/usr/bin/env bash
# Two builds' attention benchmarks in one device call, interleaved (old, new, old, new) so that
# clocks and temperature drift hit both alike; then scripts/compare_bench_tables.py prints the
# new/old time ratios per row (best of the runs of each build).
#   OLD=dir NEW=dir [ROUNDS=2] [OUTDIR=build/bench_ab] scripts/bench_ab.sh
# OLD and NEW hold bench_attention and bench_attention_dilated; BENCH_ATTENTION_ARGS and
# BENCH_DILATED_ARGS pass flags (e.g. --max-n).
set -uo pipefail
cd "$(dirname "$0")/.."
OLD=${OLD:?set OLD to the old build's binaries} NEW=${NEW:?set NEW to the new build's binaries}
ROUNDS=${ROUNDS:-2}
OUTDIR=${OUTDIR:-build/bench_ab}
mkdir -p "$OUTDIR"
if python3 -c "import nvidia" 2>/dev/null; then
    SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
    export LD_LIBRARY_PATH=$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
fi
for bench in attention attention_dilated; do
    args=${BENCH_ATTENTION_ARGS:---no-cudnn}; [ $bench = attention_dilated ] && args=${BENCH_DILATED_ARGS:-}
    old=() new=()
    for r in $(seq 1 "$ROUNDS"); do
        "$OLD/bench_$bench" --out "$OUTDIR/${bench}_old_$r.md" $args > /dev/null || echo "old bench_$bench failed"
        "$NEW/bench_$bench" --out "$OUTDIR/${bench}_new_$r.md" $args > /dev/null || echo "new bench_$bench failed"
        old+=("$OUTDIR/${bench}_old_$r.md") new+=("$OUTDIR/${bench}_new_$r.md")
    done
    echo "== $bench: new/old, best of $ROUNDS runs each"
    python3 scripts/compare_bench_tables.py "$(IFS=,; echo "${old[*]}")" "$(IFS=,; echo "${new[*]}")" | tee "$OUTDIR/${bench}_ab.md"
done
