#!/bin/bash
# session 12 call 3: the two-sided forward's masks, A/B on the ring's steps and the KV cache's prefill, interleaved, 2 rounds:
# o = c5089b4 (two-sided on the wgmma kernels), h6 = on the ws kernels, positions computed (tiles and mask elements),
# h6b = h6 with the mask elements' positions loaded again, h7 = h6 + the row-space mask for two-sided rows
set -u
tar -xJf .carry/s12/old.tar.xz; tar -xJf .carry/s12/h6b.tar.xz; tar -xJf .carry/s12/h7.tar.xz
for v in h6; do mkdir -p t_$v && tar -C t_$v -xJf .carry/s12/$v.tar.xz && mv t_$v/b $v; done
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/h6:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c3.tgz build/logs build/ab 2>/dev/null; }
for round in 1 2 3; do
  for v in o h6 h6b h7; do
    timeout 120 $v/bench_ring --quick --out build/ab/ring_${v}$round.md > build/logs/ring_${v}$round.log 2>&1 || echo "ring $v$round failed"
    timeout 120 $v/bench_kv_cache --contexts 65536,1048576 --decode 8 --out build/ab/kv_${v}$round.md > build/logs/kv_${v}$round.log 2>&1 || echo "kv $v$round failed"
  done
  save
done
echo "build round | ring dense 16K P=1/4 fwd, f+b ms | ring LongNet 64K P=1/4 fwd, f+b ms | kv prefill 64K, 1M s"
for r in 1 2 3; do for v in o h6 h6b h7; do
  ring=$(grep "^| d" build/ab/ring_${v}$r.md | awk -F'|' '$4+0==1||$4+0==4 {printf "%s/%s ", $5+0, $9+0}')
  kv=$(grep "^| [0-9]" build/ab/kv_${v}$r.md | awk -F'|' '{printf "%s ", $4+0}')
  echo "$v$r | $ring | $kv"
done; done
