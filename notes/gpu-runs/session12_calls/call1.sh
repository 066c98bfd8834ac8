#!/bin/bash
# session 12 call 1: build h5 (two-sided launches and the fixed pattern on the ws kernels): the two-sided, ring, KV-cache and
# model tests first; then old (c5089b4, o/) against new (b/) on the ring's steps, the KV cache's prefill and block-sparse 1M,
# interleaved, two rounds; then the sanitizers
set -u
tar -xJf .carry/s12/h5.tar.xz; tar -xJf .carry/s12/old.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c1.tgz build/logs build/ab build/san.log 2>/dev/null; }
for t in test_attention_two_sided test_ring test_kv_cache test_model; do
  t0=$SECONDS; timeout 90 b/$t > build/logs/$t.log 2>&1; echo "$t exit $? $((SECONDS - t0)) s: $(tail -1 build/logs/$t.log)"
done
grep -h "^FAIL" build/logs/*.log | head -8
save
for round in 1 2; do
  for v in o b; do
    t0=$SECONDS; timeout 120 $v/bench_ring --quick --out build/ab/ring_${v}$round.md > build/logs/ring_${v}$round.log 2>&1; echo "ring $v$round exit $? $((SECONDS - t0)) s"
    t0=$SECONDS; timeout 120 $v/bench_kv_cache --out build/ab/kv_${v}$round.md > build/logs/kv_${v}$round.log 2>&1; echo "kv $v$round exit $? $((SECONDS - t0)) s"
    t0=$SECONDS; timeout 60 $v/bench_attention_block_sparse --max-n 1048576 --out build/ab/bs_${v}$round.md > build/logs/bs_${v}$round.log 2>&1; echo "bs $v$round exit $? $((SECONDS - t0)) s"
    save
  done
done
t0=$SECONDS
PART=sanitizers BIN=b LOGS=build/logs timeout 200 tests/gpu/run_gpu_tests.sh > build/san.log 2>&1; echo "sanitizers exit $? in $((SECONDS - t0)) s"; tail -12 build/san.log
save
for v in o b; do echo "== $v"; grep -v "^#" build/ab/ring_${v}1.md | grep "|" | cut -c1-150 | head -12; grep -v "^#" build/ab/kv_${v}1.md | grep "|" | cut -c1-150 | head -8; grep -v '^#' build/ab/bs_${v}1.md | tail -2 | cut -c1-120; done
