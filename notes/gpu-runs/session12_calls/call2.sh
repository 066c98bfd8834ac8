#!/bin/bash
# session 12 call 2: build h6 (h5 + computed positions for two-sided launches): the two-sided, ring, KV-cache and
# model tests first; then old (c5089b4, o/) against new (b/) on the ring's steps, the KV cache's prefill and block-sparse 1M,
# interleaved, two rounds; then the sanitizers
set -u
tar -xJf .carry/s12/h6.tar.xz; tar -xJf .carry/s12/old.tar.xz; mkdir -p h5t && tar -C h5t -xJf .carry/s12/h5.tar.xz && mv h5t/b h5
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c2.tgz build/logs build/ab build/san.log 2>/dev/null; }
for t in test_attention_two_sided test_ring test_kv_cache test_model; do
  t0=$SECONDS; timeout 90 b/$t > build/logs/$t.log 2>&1; echo "$t exit $? $((SECONDS - t0)) s: $(tail -1 build/logs/$t.log)"
done
grep -h "^FAIL" build/logs/*.log | head -8
save
for round in 1 2; do
  for v in o h5 b; do
    t0=$SECONDS; timeout 120 $v/bench_ring --quick --out build/ab/ring_${v}$round.md > build/logs/ring_${v}$round.log 2>&1; echo "ring $v$round exit $? $((SECONDS - t0)) s"
    t0=$SECONDS; timeout 120 $v/bench_kv_cache --out build/ab/kv_${v}$round.md > build/logs/kv_${v}$round.log 2>&1; echo "kv $v$round exit $? $((SECONDS - t0)) s"
    t0=$SECONDS; timeout 60 $v/bench_attention_block_sparse --max-n 1048576 --out build/ab/bs_${v}$round.md > build/logs/bs_${v}$round.log 2>&1; echo "bs $v$round exit $? $((SECONDS - t0)) s"
    save
  done
done
t0=$SECONDS
PART=sanitizers BIN=b LOGS=build/logs timeout 200 tests/gpu/run_gpu_tests.sh > build/san.log 2>&1; echo "sanitizers exit $? in $((SECONDS - t0)) s"; tail -12 build/san.log
save
echo "build round | ring dense 16K P=1/4 fwd, f+b ms | ring LongNet 64K P=1/4 fwd, f+b ms | kv prefill 64K, 1M s | bs 1M fwd, f+b ms"
for r in 1 2; do for v in o h5 b; do
  ring=$(grep "^| d" build/ab/ring_${v}$r.md | awk -F'|' '$4+0==1||$4+0==4 {printf "%s/%s ", $5+0, $9+0}')
  kv=$(grep "^| [0-9]" build/ab/kv_${v}$r.md | awk -F'|' '{printf "%s ", $4+0}')
  bs=$(grep -v "^#" build/ab/bs_${v}$r.md | grep "^1048576 *b128" | awk '{printf "%s/%s", $8, $11}')
  echo "$v$r | $ring | $kv | $bs"
done; done
