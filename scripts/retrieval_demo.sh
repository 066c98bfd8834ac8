#!/usr/bin/env bash
# The million-token reader's demonstration (notes/long-context-retrieval.md), on one
# machine of 4 GPUs (H100 or H200): data, training, evaluation in three device calls of at most
# 9 minutes each, back to back inside one hold (the machine keeps out/ and build/ between them).
#
#   scripts/retrieval_demo.sh 1      data; four lanes: hybrid128k@1, @2, @3 on GPUs 0, 1, 2; the dense
#                                    2K control, then hybrid128k-nologn@1 on GPU 3
#   scripts/retrieval_demo.sh 2      every run to its end, scored at 2K-128K; then hybrid1m@1 and @2
#                                    (1M windows, train --cp 2) on GPUs 0,1 and 2,3
#   scripts/retrieval_demo.sh 3      the 1M runs to their end; 512K-1M scores, loss by position and
#                                    the book/source-tree demonstration on four lanes; the tables
#   scripts/retrieval_demo.sh v1|v2|v3  the depth-0 study (notes/long-context-retrieval.md, pass keys asked from far), the same machine and budget:
#                                    v1: data and its variants' shards; hybrid128k-$VA@1-3 and
#                                        hybrid128k-$VB@1 side by side, each scored at <= 128K
#                                    v2: hybrid1m-$VA@1 and @2 (1M windows, train --cp 2), scored at <= 128K
#                                    v3: their 512K-1M scores and loss by position beside
#                                        hybrid128k-$VB@2 and @3; the tables
#                                    v4: hybrid128k-whole@1-3 beside hybrid1m-$VA@1's demonstration
#                                        and hybrid1m-$VA@2's loss by position; the tables
#                                    (VA=pkfar, VB=leadmk unless set: variants of scripts/retrieval_study.sh)
#   scripts/retrieval_demo.sh check  one GPU: every step above, shortened, with its timings
#   scripts/retrieval_demo.sh pack   (on the CPU machine, after `make all` and `make data CORPUS=long`)
#                                    writes $CARRY for the calls above
#
# Inputs, carried from the CPU machine in $CARRY (default .carry/s13): bins.tar.xz (train, infer,
# data_tool, libsentencepiece*.so.0), corpus-long/ (tokenizer.model, train.bin.xz, val.bin.xz),
# demo.tar.xz (the held-out texts of the demonstration: debian-policy.txt, the Debian Policy Manual;
# net-sctp.txt and fs-nfs.txt, kernel subsystems in the corpus's validation split). Outputs: the
# study's logs, CSVs and heatmaps in build/rs ($STUDY_OUT), packed into $OUT/rs_CALL.tgz.
set -uo pipefail
call=${1:-}
CARRY=${CARRY:-.carry/s13}
T0=$SECONDS
study=scripts/retrieval_study.sh
lanes=scripts/run_lanes.sh
export STUDY_OUT=build/rs WORK=out/study
if [ "$call" = pack ]; then  # the calls' inputs, from this machine's build and corpus
    set -e
    for f in build/train build/infer build/data_tool corpus-long/train.bin corpus-long/val.bin corpus-long/raw/docs/linux/net-sctp.txt; do
        [ -f "$f" ] || { echo "pack: $f is missing: run make all and make data CORPUS=long first" >&2; exit 1; }
    done
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$CARRY/corpus-long" "$tmp/bin" "$tmp/demo" "$tmp/deb"
    cp build/train build/infer build/data_tool "$tmp/bin/"
    cp $(ldconfig -p | grep -oE '/[^ ]*libsentencepiece(_train)?\.so\.0$' | sort -u) "$tmp/bin/"
    tar -cJf "$CARRY/bins.tar.xz" -C "$tmp/bin" .
    cp corpus-long/tokenizer.model "$CARRY/corpus-long/"
    xz -T0 -c corpus-long/train.bin > "$CARRY/corpus-long/train.bin.xz"
    xz -T0 -c corpus-long/val.bin > "$CARRY/corpus-long/val.bin.xz"
    # The book: the Debian Policy Manual as info text (not in the corpus); the source trees: two
    # kernel subsystems of the corpus's validation split.
    apt_opts=(-qq); [ "$(id -u)" -eq 0 ] && apt_opts+=(-o APT::Sandbox::User=root)  # _apt cannot write to mktemp dirs
    (cd "$tmp/deb" && apt-get download "${apt_opts[@]}" debian-policy > /dev/null && dpkg -x debian-policy_*.deb x)
    zcat "$tmp"/deb/x/usr/share/info/debian-policy.info.gz | tr -d '\000\010\037' > "$tmp/demo/debian-policy.txt"
    cp corpus-long/raw/docs/linux/net-sctp.txt corpus-long/raw/docs/linux/fs-nfs.txt "$tmp/demo/"
    tar -cJf "$CARRY/demo.tar.xz" -C "$tmp/demo" .
    du -sh "$CARRY"
    exit 0
fi
if [ "$call" = finish ]; then  # (inside a lane) run $2 trained to its end or for $3 minutes; scored at <= 128K once done
    export CARRY=rs
    $study "train:$2:$3" | tail -3
    if grep -qE '^done:' "build/rs/$2_train.log" && [ ! -f "build/rs/$2_needles.csv" ]; then EVAL_MAX=131072 $study "eval:$2" | tail -4; fi
    exit 0
fi
# Unpack once per machine; the study reads rs/bin, rs/corpus-long, rs/demo.
mkdir -p rs/bin rs/corpus-long rs/demo build
[ -x rs/bin/train ] || tar -xJf "$CARRY/bins.tar.xz" -C rs/bin
[ -f rs/corpus-long/val.bin ] || { cp "$CARRY"/corpus-long/* rs/corpus-long/ && xz -d rs/corpus-long/*.xz; }
[ -f rs/demo/net-sctp.txt ] || tar -xJf "$CARRY/demo.tar.xz" -C rs/demo
export CARRY=rs LANE_LOGS=build/rs/lanes$call
# shellcheck source=scripts/gpu_lib_paths.sh
source scripts/gpu_lib_paths.sh "$PWD/rs/bin"  # for the binaries run here directly (check)
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
pack() { [ -n "${OUT:-}" ] && tar -czf "$OUT/rs_$call.tgz" build/rs; echo "call $call: $((SECONDS - T0)) s"; }
# Minutes until $1 s into the call (at least 0.3: train's --time-limit 0 would mean none).
left() { echo "$1 $SECONDS $T0" | awk '{ m = ($1 - ($2 - $3)) / 60; printf "%.2f", m < 0.3 ? 0.3 : m }'; }
# Demonstration prompts: a book and two source trees the models never trained on, each with a
# question at a stated depth.
export DEMOS="rs/demo/debian-policy.txt:0.3 rs/demo/net-sctp.txt:0.5 rs/demo/fs-nfs.txt:0.1"
export STEPS_1M=${STEPS_1M:-12}
VA=${VA:-pkfar} VB=${VB:-leadmk}  # the depth-0 study's variants (parts v1-v3)
me=scripts/retrieval_demo.sh

case $call in
    check)
        # The whole pipeline on one GPU at a fraction of the tokens: every stage of the recipe for a
        # step or two (TOKENS of 8 steps), the 1M stage over 2 ranks as threads, the scorer at 128K
        # and 1M, the loss by position and the demonstration; the step times are the figures that
        # plan parts 1-3.
        $study data | tail -3
        TOKENS=1048576 LOG_EVERY=1 $study train:hybrid128k@1 | tail -3
        grep -E '^step +[0-9]+/8 \| (loss|stage)' build/rs/hybrid128k@1_train.log
        TOKENS=1048576 LOG_EVERY=1 $study train:dense128k-nope@1 | tail -1
        grep -E '^step +[78]/8 \| loss' build/rs/dense128k-nope@1_train.log
        CP=2 SIMULATE_RANKS=1 STEPS_1M=2 LOG_EVERY=1 $study train:hybrid1m@1 | tail -2
        grep -E '^(step +[0-9]+/2 \| loss|.*recompute)' build/rs/hybrid1m@1_train.log | tail -4
        CP=1 STEPS_1M=3 LOG_EVERY=1 $study train:hybrid1m@9 2>&1 | tail -1  # no hybrid128k@9: refused in one line
        # One GPU, one rank, 1M windows: the step time that P = 2 should halve.
        rs/bin/train --device cuda --data rs/corpus-long --layers 6 --width 384 --heads 6 --rope-theta 1e7 \
            --attn block-sparse --block 128 --window 2048 --layer-pattern 1:dense,3:dense,5:dense --nope-layers 1,3,5 --logn-attn 512 \
            --seq-len 1048576 --batch 1 --steps 3 --log-every 1 --val-every 0 --val-batches 1 --ckpt-every 0 --sample-tokens 0 \
            --out out/t1m > build/rs/t1m.log 2>&1; grep -E '^(step|memory|  (none|selective|full)|error)' build/rs/t1m.log | tail -7
        EVAL_MAX=131072 $study eval:hybrid128k@1 | tail -2
        grep -hE '"length": *1048576' out/study/data/eval_1048576.jsonl | head -2 > out/study/data/eval_1m2.jsonl
        t=$SECONDS; rs/bin/infer --device cuda --checkpoint out/study/hybrid1m@1 --tasks out/study/data/eval_1m2.jsonl --ctx 1048576 \
            2>&1 | grep -E '^tasks'; echo "two 1M items: $((SECONDS - t)) s"
        MIN_DOC=262144 $study positions:hybrid1m@1 | tail -1
        $study demo:hybrid1m@1 | tail -1
        head -c 1500 build/rs/hybrid1m@1_demo.txt
        $study table | head -12
        pack ;;
    1)  # ~8 minutes: the data, then the 128K runs side by side, each scored at <= 128K when done
        $study data | tail -2
        m=$(left 430)
        $lanes "0|$me finish hybrid128k@1 $m" "1|$me finish hybrid128k@2 $m" "2|$me finish hybrid128k@3 $m" \
               "3|$me finish hybrid128k-nologn@1 $m"
        $study table | head -40
        pack ;;
    2)  # ~7.5 minutes: what part 1 left unfinished, then the two 1M runs, each over 2 GPUs
        $lanes "0|$me finish hybrid128k@1 4" "1|$me finish hybrid128k@2 4" "2|$me finish hybrid128k@3 4" \
               "3|$me finish hybrid128k-nologn@1 4"
        m=$(left 420)
        $lanes "0,1|$study train:hybrid1m@1:$m" "2,3|$study train:hybrid1m@2:$m"
        grep -hE '^\[rank 0\] (step +[0-9]+/[0-9]+ \| loss|done|stopped)' build/rs/hybrid1m@*_train.log | tail -8
        pack ;;
    3)  # ~5 minutes: the 1M runs' ends if part 2 cut them; every long score, the loss by position, the
        # demonstration, the dense 2K control; the tables
        $lanes "0,1|$study train:hybrid1m@1:2" "2,3|$study train:hybrid1m@2:2" > /dev/null
        $lanes "0|$study eval:hybrid1m@1 demo:hybrid1m@1" "1|$study eval:hybrid1m@2 demo:hybrid1m@2" \
               "2|EVAL_MIN=524288 EVAL_TAG=-long $study eval:hybrid128k@1; $study positions:hybrid128k@1 demo:hybrid128k@1" \
               "3|$study train:dense2k eval:dense2k positions:dense2k demo:dense2k positions:hybrid1m@1"
        $study table
        pack ;;
    v1) # ~7.5 minutes: the data with the variants' shards, four 128K runs side by side
        VARIANTS="pkfar whole leadmk" $study data | tail -2
        m=$(left 430)
        $lanes "0|$me finish hybrid128k-$VA@1 $m" "1|$me finish hybrid128k-$VA@2 $m" "2|$me finish hybrid128k-$VA@3 $m" \
               "3|$me finish hybrid128k-$VB@1 $m"
        $study table | head -40
        pack ;;
    v2) # ~6.5 minutes: what v1 left unfinished, then two 1M runs of variant VA, each over 2 GPUs
        $lanes "0|$me finish hybrid128k-$VA@1 2" "1|$me finish hybrid128k-$VA@2 2" "2|$me finish hybrid128k-$VA@3 2" \
               "3|$me finish hybrid128k-$VB@1 2" > /dev/null
        m=$(left 420)
        $lanes "0,1|$study train:hybrid1m-$VA@1:$m" "2,3|$study train:hybrid1m-$VA@2:$m"
        grep -hE '^\[rank 0\] (step +[0-9]+/[0-9]+ \| loss|done|stopped)' build/rs/hybrid1m-"$VA"@*_train.log | tail -6
        [ $((SECONDS - T0)) -lt 440 ] && $lanes "0|EVAL_MAX=131072 $study eval:hybrid1m-$VA@1" "1|EVAL_MAX=131072 $study eval:hybrid1m-$VA@2"
        pack ;;
    v3) # ~7 minutes: the 1M runs' long scores (and short ones if v2 had no time) beside two more 128K runs of VB
        $lanes "0,1|$study train:hybrid1m-$VA@1:2" "2,3|$study train:hybrid1m-$VA@2:2" > /dev/null
        short() { echo "[ -f build/rs/$1_needles.csv ] || EVAL_MAX=131072 $study eval:$1;"; }
        m=$(left 440)
        $lanes "0|$(short "hybrid1m-$VA@1") EVAL_MIN=524288 EVAL_TAG=-long $study eval:hybrid1m-$VA@1 positions:hybrid1m-$VA@1" \
               "1|$(short "hybrid1m-$VA@2") EVAL_MIN=524288 EVAL_TAG=-long $study eval:hybrid1m-$VA@2" \
               "2|$me finish hybrid128k-$VB@2 $m" "3|$me finish hybrid128k-$VB@3 $m"
        $study table
        pack ;;
    v4) # ~6.5 minutes: the third variant's 128K runs beside the 1M runs' demonstration and loss by position
        m=$(left 430)
        $lanes "0|$me finish hybrid128k-whole@1 $m" "1|$me finish hybrid128k-whole@2 $m" "2|$me finish hybrid128k-whole@3 $m" \
               "3|$study demo:hybrid1m-$VA@1 positions:hybrid1m-$VA@2"
        $study table
        pack ;;
    *) echo "usage: scripts/retrieval_demo.sh 1|2|3|v1|v2|v3|v4|check|pack" >&2; exit 2 ;;
esac
