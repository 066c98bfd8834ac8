#!/bin/bash
# issue 23: interleaved A/B of the benchmarks, old (17e444f, before the issue) against new, with the A/A control
set -u
source .carry/s6/setup.sh
export OLD=old NEW=b AA=1 OUTDIR=build/bench_ab
t0=$SECONDS
BENCHES=attention ROUNDS=5 BENCH_ATTENTION_ARGS="--no-cudnn --max-n 16384" timeout 250 scripts/bench_ab.sh > build/ab_attention.log 2>&1; echo "attention: exit $? $((SECONDS - t0)) s"
tar -czf $OUT/ab3a.tgz build/bench_ab build/ab_*.log
t0=$SECONDS
BENCHES="attention_dilated attention_block_sparse" ROUNDS=3 BENCH_DILATED_ARGS="--max-n 262144" BENCH_BLOCK_SPARSE_ARGS="--max-n 262144" timeout 200 scripts/bench_ab.sh > build/ab_sparse.log 2>&1; echo "sparse: exit $? $((SECONDS - t0)) s"
t0=$SECONDS
BENCHES=train ROUNDS=3 BENCH_TRAIN_ARGS="--attention flash --batches 8 --steps 5" timeout 100 scripts/bench_ab.sh > build/ab_train.log 2>&1; echo "train: exit $? $((SECONDS - t0)) s"
tar -czf $OUT/ab3.tgz build/bench_ab build/ab_*.log
grep -h "worst\|^==" build/ab_*.log
