#!/bin/bash
# session 9 call 6: p2, the dense L2 budget swept (8-128 MiB) in one binary, forward and forward + backward, no cuDNN
set -u
tar -xJf .carry/s9/p2.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
for r in 1 2; do for mib in 8 16 32 64 128; do n=l2_${mib}_$r
  timeout 40 b/bench_attention --no-cudnn --l2-budget $((mib << 20)) --out build/ab/$n.md > /dev/null 2>&1
done; done
tar -czf $OUT/c6.tgz build/ab
python3 - <<'PY'
import glob,collections
t=collections.defaultdict(dict)
for f in sorted(glob.glob('build/ab/l2_*.md')):
    mib,r=f.split('_')[1],f.split('_')[2][0]
    for line in open(f):
        w=line.split()
        if w and w[0].isdigit(): t[(int(w[0]),int(w[1]))][(int(mib),r)]=(float(w[4]),float(w[6]))
mibs=[8,16,32,64,128]
print('N D  ' + '  '.join(f'{m:>5}MiB fwd/fb' for m in mibs))
for k in sorted(t):
    print(k, '  '.join(f"{min(t[k][(m,r)][0] for r in '12'):7.3f}/{min(t[k][(m,r)][1] for r in '12'):7.3f}" for m in mibs))
PY
