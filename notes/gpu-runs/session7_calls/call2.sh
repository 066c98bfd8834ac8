#!/bin/bash
# session 7 call 2: the backward v6a (three groups in flight) and v6b (+ dQ by bulk reduce-add): tests of v6b, base / v6a / v6b interleaved, the two fixed defects, profiles, v6b beside cuDNN, sanitizers
set -u
tar -xJf .carry/s7/old.tar.xz && tar -xJf .carry/s7/v6.tar.xz
SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$PWD/b:$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
mkdir -p build/logs build/ab; nvidia-smi --query-gpu=name --format=csv,noheader
save() { tar -czf $OUT/c2.tgz build/logs build/ab; }
run() { local n=$1 lim=$2; shift 2; local t0=$SECONDS; timeout $lim "$@" > build/logs/$n.log 2>&1; echo "$n: exit $? $(grep -E '^[0-9]+ passed|SUMMARY' build/logs/$n.log | tail -1) $((SECONDS - t0)) s"; grep -m4 '^FAIL' build/logs/$n.log; }
run bwd_small 60 b/test_attention --small --backend "bwd wgmma"
run bwd_all 120 b/test_attention --backend "bwd wgmma"
save
for r in 1 2; do for x in old/b v6a/b b; do
  n=$(echo $x | tr / _); timeout 60 $x/bench_attention --no-cudnn --out build/ab/${n}_$r.md > /dev/null 2>&1 || echo "$x bench failed"
done; done
for pair in "old_b v6a_b" "v6a_b b" "old_b b"; do set -- $pair
  echo "== $2 / $1 (fwd time, f+b time; best of 2)"; python3 scripts/compare_bench_tables.py build/ab/$1_1.md,build/ab/$1_2.md build/ab/$2_1.md,build/ab/$2_2.md 0,2 | tail -15 > build/ab/ab_$1_vs_$2.md; tail -1 build/ab/ab_$1_vs_$2.md
done
save
run two_sided 60 b/test_attention_two_sided
run memcheck_flash 120 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 b/test_attention --small --backend flash
save
for x in old/b b; do n=$(echo $x | tr / _)
  t0=$SECONDS; timeout 45 ncu --clock-control none --section WarpStateStats --section SpeedOfLight --section SchedulerStats -k regex:dkdv_wgmma -c 1 -o build/bwd128_$n $x/attention_tool --device cuda --dtype bf16 --N 16384 --H 16 --D 128 --backward --reps 1 > build/logs/ncu128_$n.log 2>&1; echo "ncu $x: exit $? $((SECONDS - t0)) s"
  ncu -i build/bwd128_$n.ncu-rep --page details > build/logs/ncu_bwd128_$n.txt 2>&1; grep -E "Duration|Issue Slots Busy|No Eligible|Warp Cycles Per Issued" build/logs/ncu_bwd128_$n.txt | head -6
  ncu -i build/bwd128_$n.ncu-rep --page raw > build/logs/ncu_raw128_$n.txt 2>&1; grep "issue_stalled" build/logs/ncu_raw128_$n.txt | grep "per_warp_active.pct" | sort -k3 -g -r | head -8
done
save
t0=$SECONDS; timeout 70 b/bench_attention --out build/ab/bench_attention_cudnn.md > build/logs/bench.log 2>&1; echo "bench_attention (cuDNN beside): exit $? $((SECONDS - t0)) s"; grep -v "^#" build/logs/bench.log | head -16
save
run bwd_racecheck 60 compute-sanitizer --tool racecheck --error-exitcode 9 b/test_attention --small --backend "bwd wgmma"
run ring 45 b/test_ring
save
for pair in "old_b v6a_b" "v6a_b b"; do set -- $pair; echo "== $2 / $1"; cat build/ab/ab_$1_vs_$2.md; done
