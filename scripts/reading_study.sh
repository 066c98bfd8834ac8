#!/usr/bin/env bash
# The reading study (notes/reading.md) on ONE H200: does a model quote a book or a source
# tree it never saw? Runs share the GPU side by side (the 13.8M-parameter model leaves most of an
# H200 idle at short windows, so two runs side by side cost little more than one).
#
#   scripts/reading_study.sh pack   (on the CPU machine, after `make all` and `make data CORPUS=long`)
#                                   writes $CARRY (binaries, corpus, the held-out book and source trees)
#   scripts/reading_study.sh full   one call (~9.5 minutes): data; hybrid128k-read@4 and the baseline
#                                   hybrid128k-pkfar@4 side by side at the recipe's 150M tokens, each
#                                   scored at <= 128K (needles, quotes and their controls, the book and
#                                   the source tree), the copy loss by gap, read@4 reading its last 2K
#                                   tokens only (the control); the tables
#   scripts/reading_study.sh train A B  then  score A B   two calls back to back in one hold (~7 and
#                                   ~3.5 minutes): runs A and B (say hybrid128k-readmore@1 hybrid128k-read@5)
#                                   side by side at the recipe's 150M tokens (train resumes a run the call
#                                   cut), then scored as full scores them, A also with 2K of sight, the
#                                   copy loss at COPY_GAPS (16 tokens to 128K; COPY_ATTN=1: with where the
#                                   heads look, infer --copy-attn). Only the variants A and B
#                                   name get their shards (readwide, readconv, readconvpart and every
#                                   readsink recipe, cW ones included: read's; readsink2x's twice as large,
#                                   readsinkhd128x3's three times). A and B may be two
#                                   seeds of one recipe (on one GPU: hybrid128k-readsink@11 hybrid128k-readsink@12).
#                                   readsink2x's and readsinkhd128x3's runs take two train calls (~14 and ~18
#                                   minutes side by side), then score, which first trains a run the calls
#                                   before cut to its end (FINISH_UNTIL, 300 s at most); a run whose NoPE
#                                   heads learn their log-n slopes (a name ending in ls) also gets the
#                                   slopes it learned (scripts/logn_slopes.py, RUN_slopes.md); WEIGHTS=1
#                                   brings A's weights back as the `weights` call does
#   scripts/reading_study.sh weights A   after A's training: A's weights alone into $OUT (56 MB as four
#                                   xz pieces of 15 MiB; one run a call), so that a later hold in the same
#                                   checkout can `restore A FILE.xz.aa` (after a `data` call) and score
#                                   it or train its 1M stage without training it again
#   scripts/reading_study.sh long A [B]  then  score1m A [B]   after `train A B` finished them in the
#                                   same hold (the checkpoints stay on the machine): the 1M stage of each
#                                   readsink-family run (hybrid1m-X@S from hybrid128k-X@S's weights,
#                                   STEPS_1M steps of 1M windows, side by side, resumed by a second `long`),
#                                   then each scored at 512K-1M (SAMPLES_LONG, 2, items a depth) with the copy
#                                   loss at COPY_GAPS_1M (128K,512K,1000K); ~5 minutes a run alone
#   scripts/reading_study.sh data [V]  the data of variants V (read; "read readfirst": both) alone, before
#                                   `train` calls side by side on several GPUs (CUDA_VISIBLE_DEVICES one
#                                   each); TPS (131072) sets the tokens a
#                                   step of the runs they train, TRAIN_UNTIL (560) the second of the call they stop at
#   scripts/reading_study.sh pairs train|score|long|score1m A B S1 S2 ...   one call on a host of several GPUs:
#                                   `train A@Sg B@Sg` (after the data of both, once) or `score` (after
#                                   finishing a run the call before cut), `long` or `score1m`, on GPU g for the g-th seed,
#                                   side by side; each GPU's output in build/pairs_<what>_Sg.log
#                                   (a version beside its base in the same calls: notes/reading.md)
#   scripts/reading_study.sh seeds train|score|long|score1m A S1 S2 S3 S4 ...   the same for four (2n)
#                                   runs of one recipe: A@S1 beside A@S2 on GPU 0, A@S3 beside A@S4 on GPU 1;
#                                   long and score1m: the 1M stages of A@S1 on GPU 0 and A@S3 on GPU 1, each alone
#   scripts/reading_study.sh 1 2    the first plan, two calls back to back in one hold, at TOKENS (100M)
#                                   per run: four runs side by side (read@1-3, pkfar@1), then their scores
#                                   and controls beside the 1M stage of read@1 (cut by the call's end). At
#                                   100M tokens no run formed retrieval, needles included (notes/reading.md).
#
# The recipe: scripts/retrieval_study.sh's hybrid128k-pkfar with one change, its training documents
# carrying quoted lines and repeated passages of their own text (variant `read`). Outputs: build/rs
# (logs, CSVs, tables), packed into $OUT/rs_CALL.tgz.
set -uo pipefail
call=${1:-}
CARRY=${CARRY:-.carry/read}
T0=$SECONDS
# The variants whose shards runs A and B train on (readwide, readconv, readconvpart and every readsink
# recipe: read's).
train_variants() {
    local out="" n v
    for n in "$1" "$2"; do
        [ -n "$n" ] || continue
        v=${n#hybrid128k-}; v=${v%@*}
        case $v in readwide|readconv|readconvpart|readsink*) v=read ;; esac
        out+="${out:+ }$v"
    done
    echo "$out"
}
# readsink2x trains on twice the tokens, readsinkhd128x3 on three times: their task shards as many
# times the default's, so that no task document is seen more often than in readsink
# (scripts/retrieval_study.sh).
shard_tokens() {
    case "$*" in
        *readsinkhd128x3*) echo "${SHARD_TOKENS:-150M}" ;;
        *readsink2x*) echo "${SHARD_TOKENS:-100M}" ;;
        *) echo "${SHARD_TOKENS:-50M}" ;;
    esac
}
if [ "$call" = pairs ] || [ "$call" = seeds ]; then
    what=${2:-} a=${3:-} b=${4:-} nfixed=4
    [ "$call" = seeds ] && b=$a nfixed=3
    usage="usage: scripts/reading_study.sh pairs train|score|long|score1m A B S1 [S2 ...] (one seed a GPU)"
    [ "$call" = seeds ] && usage="usage: scripts/reading_study.sh seeds train|score|long|score1m A S1 S2 [S3 S4 ...] (two seeds a GPU)"
    if [[ ! $what =~ ^(train|score|long|score1m)$ ]] || [ -z "$a" ] || [ -z "$b" ] || [ $# -le $nfixed ]; then
        echo "$usage" >&2; exit 2
    fi
    shift $nfixed
    [ "$call" = seeds ] && [ $(($# % 2)) -ne 0 ] && { echo "$usage: an even number of seeds" >&2; exit 2; }
    # Each GPU's runs and the seed that names its log. pairs: A@S and B@S for the g-th seed. seeds: A at
    # the g-th two seeds; the 1M stages (long, score1m) of the first of them only, alone on the GPU, so
    # that it keeps every activation.
    gpu_runs=() gpu_seed=()
    while [ $# -gt 0 ]; do
        if [ "$call" = pairs ]; then gpu_runs+=("$a@$1 $b@$1"); gpu_seed+=("$1"); shift
        else
            if [[ $what =~ ^(train|score)$ ]]; then gpu_runs+=("$a@$1 $a@$2"); else gpu_runs+=("$a@$1"); fi
            gpu_seed+=("$1"); shift 2
        fi
    done
    self=${READING_STUDY:-$0}  # tests put a stand-in here
    mkdir -p build
    # The data once, before the GPUs' calls side by side would each make it.
    [[ $what =~ ^(train|long)$ ]] && { SHARD_TOKENS=$(shard_tokens "$a" "$b") "$self" data "$(train_variants "$a" "$b")" 2>&1 | tail -1; echo "data: $((SECONDS - T0)) s"; }
    pids=()
    for g in "${!gpu_runs[@]}"; do
        read -ra runs <<< "${gpu_runs[$g]}"
        log=build/pairs_${what}_${gpu_seed[$g]}.log
        case $what in
            train|long)
                CUDA_VISIBLE_DEVICES=$g TRAIN_UNTIL=$((${TRAIN_UNTIL:-578} - (SECONDS - T0))) "$self" "$what" "${runs[@]}" > "$log" 2>&1 & ;;
            score)
                (CUDA_VISIBLE_DEVICES=$g TRAIN_UNTIL=300 "$self" train "${runs[@]}"
                 CUDA_VISIBLE_DEVICES=$g FINISH_UNTIL=0 "$self" score "${runs[@]}") > "$log" 2>&1 & ;;
            score1m)  # finishes a 1M stage the call before cut by itself
                CUDA_VISIBLE_DEVICES=$g "$self" score1m "${runs[@]}" > "$log" 2>&1 & ;;
        esac
        pids+=($!)
    done
    failed=0
    for g in "${!gpu_runs[@]}"; do
        wait "${pids[$g]}" || failed=1
        echo "== GPU $g, seed ${gpu_seed[$g]}: $(tail -n 1 "build/pairs_${what}_${gpu_seed[$g]}.log")"
    done
    [[ $what =~ ^score ]] && tail -n 45 "build/pairs_${what}_${gpu_seed[0]}.log"
    [ -n "${OUT:-}" ] && tar -czf "$OUT/pairs_${what}_${gpu_seed[0]}.tgz" build/pairs_"$what"_*.log
    echo "call $call $what: $((SECONDS - T0)) s"
    exit $failed
fi
study=scripts/retrieval_study.sh
export STUDY_OUT=build/rs WORK=out/study TOKENS=${TOKENS:-104857600} VARIANTS="pkfar read readmore"
if [ "$call" = pack ]; then
    CARRY=$CARRY exec scripts/retrieval_demo.sh pack
fi
mkdir -p rs/bin rs/corpus-long rs/demo build/rs
[ -x rs/bin/train ] || tar -xJf "$CARRY/bins.tar.xz" -C rs/bin
[ -f rs/corpus-long/val.bin ] || { cp "$CARRY"/corpus-long/* rs/corpus-long/ && xz -d rs/corpus-long/*.xz; }
[ -f rs/demo/net-sctp.txt ] || tar -xJf "$CARRY/demo.tar.xz" -C rs/demo
export CARRY=rs
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
label=$call; case $call in train|score|long|score1m) label="${call}_${2:-}_${3:-}" ;; esac
label=${label//@/-}  # the device tool brings back only plain file names
# Each item's answer and continuation come back too (the *_items.csv: what a miss wrote); the scored
# tokens and the task files do not (the sizes).
# A run's weights alone (scripts/weights_only.py: 56 MB for the 13.8M model) into $OUT as xz pieces
# of WEIGHTS_PIECE bytes (15M): a call brings back files of at most 16 MiB, 8 of them, so 56 MB come
# back as RUN_weights.safetensors.xz.aa, .ab, ...; `restore RUN FILE.xz.aa` joins them.
weights_out() {
    local r=$1 f
    f=$(mktemp -d)/${1//@/-}_weights.safetensors
    python3 scripts/weights_only.py "$WORK/$r" "$f" || return 1
    xz -0 -T0 -c "$f" | split -b "${WEIGHTS_PIECE:-15M}" - "$OUT/$(basename "$f").xz."
    local rc=$?
    rm -r "$(dirname "$f")"
    ls "$OUT/$(basename "$f").xz."*
    return $rc
}
pack() { [ -n "${OUT:-}" ] && tar -czf "$OUT/rs_$label.tgz" --exclude='*_tokens.csv' --exclude='*.jsonl' build/rs; echo "call $label: $((SECONDS - T0)) s"; }
# Minutes until $1 s into the call (at least 0.3: train's --time-limit 0 would mean none).
left() { echo "$1 $SECONDS $T0" | awk '{ m = ($1 - ($2 - $3)) / 60; printf "%.2f", m < 0.3 ? 0.3 : m }'; }
# Commands side by side on the one GPU; each one's output in build/rs/side_N.log, its last lines shown.
# A command that fails makes the call exit 1 (after the rest have run and the call has packed).
sides=0 side_failed=0
side() {
    local pids=() i=0 rc
    sides=$((sides + 1))
    for c in "$@"; do bash -c "$c" > "build/rs/side_$label.$sides.$i.log" 2>&1 < /dev/null & pids+=($!); i=$((i + 1)); done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}"; rc=$?; [ $rc -eq 0 ] || side_failed=1
        echo "== ${*:$((i + 1)):1}: exit $rc"; tail -n 4 "build/rs/side_$label.$sides.$i.log"
    done
}
copy() {  # copy loss of model $1 at the gaps $2 (ctx $3); COPY_ATTN=1: where its heads look too (--copy-attn)
    echo "rs/bin/infer --device cuda --checkpoint $WORK/$1 --copy-loss rs/corpus-long/val.bin --gaps $2 --copy-samples ${COPY_SAMPLES:-4}" \
         "--ctx $3 ${COPY_ATTN:+--copy-attn} --copy-out build/rs/$1_copy > build/rs/$1_copy.log 2>&1"
}
# How the runs' quote items were missed (scripts/quote_misses.py), where their grid was scored.
misses() {
    local f files=()
    for r in "$@"; do f=build/rs/${r}_needles_items.csv; [ -f "$f" ] && files+=("$f"); done
    [ ${#files[@]} -gt 0 ] && python3 scripts/quote_misses.py "${files[@]}"
}
source scripts/gpu_lib_paths.sh "$PWD/rs/bin"
export DEMOS="rs/demo/debian-policy.txt:0.3 rs/demo/net-sctp.txt:0.5 rs/demo/fs-nfs.txt:0.1"
export STEPS_1M=${STEPS_1M:-12} SAMPLES_LONG=${SAMPLES_LONG:-2} LENGTHS="2048 8192 32768 131072 524288 1048576"
short="EVAL_MAX=131072 $study"
case $call in
    1)  # data, then four 128K runs side by side
        $study data | tail -2
        m=$(left 500)
        side "$study train:hybrid128k-read@1:$m" "$study train:hybrid128k-read@2:$m" "$study train:hybrid128k-read@3:$m" \
             "$study train:hybrid128k-pkfar@1:$m"
        grep -hE '^(step +[0-9]+/[0-9]+ \| loss|done|stopped)' build/rs/hybrid128k-*_train.log | tail -8
        pack ;;
    2)  # the runs' ends; the 1M stage of read@1 beside their scores at <= 128K, the copy loss, the 2K control
        side "$study train:hybrid128k-read@1:3" "$study train:hybrid128k-read@2:3" "$study train:hybrid128k-read@3:3" \
             "$study train:hybrid128k-pkfar@1:3" > /dev/null
        m=$(left 510)
        side "$study train:hybrid1m-read@1:$m" \
             "$short eval:hybrid128k-read@1; $(copy hybrid128k-read@1 2K,8K,32K,128K 140000)" \
             "$short eval:hybrid128k-read@2; $(copy hybrid128k-read@2 2K,8K,32K,128K 140000)" \
             "$short eval:hybrid128k-read@3; $(copy hybrid128k-read@3 2K,8K,32K,128K 140000)" \
             "$short eval:hybrid128k-pkfar@1; $(copy hybrid128k-pkfar@1 2K,8K,32K,128K 140000)" \
             "CTL=2048 $short eval:hybrid128k-read@1"
        $study table | head -80
        pack ;;
    full)  # (one call) read and pkfar at the recipe's own 150M tokens side by side, seed 4, scored at <= 128K
        export TOKENS=157286400
        $study data | tail -1
        m=$(left 445)
        side "$study train:hybrid128k-read@4:$m" "$study train:hybrid128k-pkfar@4:$m"
        side "$short eval:hybrid128k-read@4; $(copy hybrid128k-read@4 2K,8K,32K,128K 140000); CTL=2048 $short eval:hybrid128k-read@4" \
             "$short eval:hybrid128k-pkfar@4; $(copy hybrid128k-pkfar@4 2K,8K,32K,128K 140000)"
        $study table | head -40
        pack ;;
    data)  # the data of variants $2 (default read) alone: several `train` calls side by side (one a GPU) then share it
        export TOKENS=157286400 VARIANTS=${2:-read}
        $study data | tail -1 ;;
    train)  # (one call) runs $2 and $3 side by side at 150M tokens, each to its end or to TRAIN_UNTIL (560) s into the call
        a=${2:?train needs two runs, say hybrid128k-readmore@1 hybrid128k-read@5} b=${3:?train needs two runs}
        export TOKENS=157286400 VARIANTS SHARD_TOKENS; VARIANTS=$(train_variants "$a" "$b") SHARD_TOKENS=$(shard_tokens "$a" "$b")
        $study data | tail -1
        m=$(left "${TRAIN_UNTIL:-560}")
        side "$study train:$a:$m" "$study train:$b:$m"
        grep -hE '^(done|stopped)' "build/rs/${a}_train.log" "build/rs/${b}_train.log"
        pack ;;
    score)  # (one call) runs $2 and $3 scored at <= 128K with the copy loss; $2 also with 2K of sight
        a=${2:?score needs two runs} b=${3:?score needs two runs}
        # A run the calls before cut (its log, no done line) is trained to its end first, for at most
        # FINISH_UNTIL (300) s of the call: the last training call and the scores are one command
        # (FINISH_UNTIL=0: none, where the caller has just finished them, so a call cannot run twice 300 s).
        [ "${FINISH_UNTIL:-300}" = 0 ] || for r in "$a" "$b"; do
            log=build/rs/${r}_train.log
            if [ -f "$log" ] && ! grep -qE '^(\[rank 0\] )?done:' "$log"; then
                TRAIN_UNTIL=${FINISH_UNTIL:-300} "$0" train "$a" "$b" | grep -E '^(done|stopped)'
                break
            fi
        done
        g=${COPY_GAPS:-16,128,512,2K,8K,32K,128K}  # the short gaps: the copy circuit where distance is no obstacle
        side "$short eval:$a" "$short eval:$b" "$(copy "$a" "$g" 140000); $(copy "$b" "$g" 140000)" \
             "CTL=2048 $short eval:$a"
        $study table | head -60
        misses "$a" "$b" "ctl2048-$a"
        # What a run whose NoPE heads learn their log-n slopes (a name ending in ls) learned.
        for r in "$a" "$b"; do
            if [[ $r == *ls@* ]]; then
                python3 scripts/logn_slopes.py "$WORK/$r" > "build/rs/${r}_slopes.md" 2>&1 || true
                cat "build/rs/${r}_slopes.md"
            fi
        done
        # WEIGHTS=1: the first run's weights alone come back too (as the `weights` call's pieces).
        [ "${WEIGHTS:-0}" = 1 ] && [ -n "${OUT:-}" ] && weights_out "$a"
        pack ;;
    weights)  # (one call, after the run's training) run $2's weights alone in $OUT (scripts/weights_only.py: 56 MB for
              # the 13.8M model, so one run a call), for a later hold to score or to train its 1M stage from
        r=${2:?weights needs a run, say hybrid128k-readsinkhd128x3c16@11}
        [ -n "${OUT:-}" ] || { echo "weights: OUT (the device call's folder) is not set" >&2; exit 2; }
        weights_out "$r" ;;
    restore)  # run $2 from the weights file $3 (a `weights` call's): its folder as training would leave it, so that
              # score, long and score1m take it as a run trained in this hold (its data: the `data` call)
        r=${2:?restore needs a run and its weights file} w=${3:?restore needs a run and its weights file}
        [ -f "$w" ] || { echo "restore: no weights file $w: carry the one a weights call brought back" >&2; exit 2; }
        [ ! -e "$WORK/$r" ] || { echo "restore: $WORK/$r exists already: a run of this hold; restore under another name" >&2; exit 2; }
        mkdir -p "$WORK/$r"
        ck=$WORK/$r/ckpt_00000000.safetensors
        case $w in
            # The first of a `weights` call's pieces: the rest lie beside it, in name order.
            *.xz.aa) cat "${w%aa}"?? | xz -dc > "$ck.part" 2> "$WORK/$r/restore.err" && mv "$ck.part" "$ck" \
                || { echo "error: restore: the pieces ${w%aa}?? do not join into one xz file ($(head -1 "$WORK/$r/restore.err")): carry every piece the weights call brought back" >&2
                     rm -r "${WORK:?}/$r"; exit 1; } ;;
            *) cp "$w" "$ck" ;;
        esac
        rm -f "$WORK/$r/restore.err"
        echo "restored $r from $w" ;;
    long|score1m)  # (one call each) the 1M stages of the 128K runs named, side by side; then their scores at 512K-1M
        [ $# -ge 2 ] || { echo "usage: scripts/reading_study.sh $call A@S [B@S] (128K runs trained in this hold)" >&2; exit 2; }
        runs=() trains=() cmds=()
        for r in "${@:2}"; do runs+=("${r/#hybrid128k-/hybrid1m-}"); done
        # long trains to TRAIN_UNTIL; score1m first finishes a stage the call before cut (nothing if done).
        until=${TRAIN_UNTIL:-560}; [ "$call" = score1m ] && until=${TRAIN_UNTIL:-300}
        m=$(left "$until")
        for r in "${runs[@]}"; do trains+=("$study train:$r:$m"); done
        # Each run's memory plan sees the whole GPU free when it starts: two side by side on one
        # GPU must not both keep every activation.
        [ ${#runs[@]} -gt 1 ] && export RECOMPUTE_1M=${RECOMPUTE_1M:-selective}
        if [ "$call" = long ]; then
            export TOKENS=157286400 VARIANTS SHARD_TOKENS; VARIANTS=$(train_variants "$2" "${3:-$2}") SHARD_TOKENS=$(shard_tokens "$@")
            $study data | tail -1
            side "${trains[@]}"
        else
            side "${trains[@]}" > /dev/null
            g=${COPY_GAPS_1M:-128K,512K,1000K}
            for r in "${runs[@]}"; do cmds+=("EVAL_MIN=524288 $study eval:$r; $(copy "$r" "$g" 1048576)"); done
            side "${cmds[@]}"
            $study table | head -60
            misses "${runs[@]}"
        fi
        for r in "${runs[@]}"; do grep -hE '^(done|stopped)' "build/rs/${r}_train.log" | tail -1; done
        pack ;;
    *) echo "usage: scripts/reading_study.sh pack|1|2|full|data [V]|train A B|score A B|weights A|restore A FILE|long A [B]|score1m A [B]|pairs train|score|long|score1m A B S1 S2...|seeds train|score|long|score1m A S1 S2 S3 S4..." >&2; exit 2 ;;
esac
exit "$side_failed"
