#!/usr/bin/env bash
# One call on a lent GPU machine (H100/H200): the GPU tests, the benchmarks and a short GPU
# training run, from binaries built on the CPU machine and carried in $CARRY (bin/ with the
# binaries and libsentencepiece, corpus/ with the prepared corpus). Logs and tables go to $OUT.
#   STAGES="tests bench train" scripts/gpu_session.sh
# Stages: tests (tests/gpu/run_gpu_tests.sh; CORPUS=dir for the resume test), bench, train,
# infer and long_prompt (after train), errors, dilated_bench, compare, bench_ab (this build's
# attention benchmarks against $CARRY/old, interleaved: scripts/bench_ab.sh), attn_perf (the
# attention harness's perf mode: every backend side by side), block_sparse (its benchmark and
# FlexAttention's), nccl (on a machine with several GPUs: NCCL ring attention, --cp training and
# perplexity against one GPU, a hung rank), recompute (gradient checkpointing: every policy's step
# time and peak against the plan on the 91M dilated model, the longest window, and train choosing
# its policy on the corpus; needs an H200 for 2M tokens), kv_cache (the KV cache test, prefill and
# decode speed, generation from a book and per-position scoring by a short dilated run),
# long_context (issue 12's study on the long-document corpus, $CARRY/corpus-long: the 91M model
# trained at equal tokens as dense at 2K and dilated at 32K and 256K, from scratch or after 2K
# (LC_MODELS picks some: dense2k dilated32k dilated256k dilated32k_from2k dilated256k_from2k), each
# scored by position over the held-out documents of at least 256K tokens; LC_PROMPTS=1 also
# generates from a book and a held-out kernel subsystem in $CARRY/prompts (book.txt: the long
# corpus's docs/manuals/debian-reference.txt, tree.txt: docs/linux/net-sctp.txt; the README's
# runs gave LC_BOOK_PROMPT=$'\n4.6.2. Secure Shell\n', LC_TREE_PROMPT=$'# ==== net/sctp/auth.c ====\n'); LC_MODEL the model's
# --layers --width --heads; LC_STEPS, LC_BASE_STEPS, LC_EXT_LR the schedule; LC_SLIDING=N also
# scores each model with windows of N tokens, so the difference is what its long context is worth).
set -uo pipefail
CARRY=${CARRY:-.carry/lead}
OUT=${OUT:-build/gpu_session}
STAGES=${STAGES:-tests bench train}
mkdir -p "$OUT" build
export LD_LIBRARY_PATH=$PWD/$CARRY/bin:${LD_LIBRARY_PATH:-}
if python3 -c "import nvidia" 2>/dev/null; then  # the lent machines keep cuDNN/NCCL/cuBLAS in Python wheels
    SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
    export LD_LIBRARY_PATH=$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:$LD_LIBRARY_PATH
fi
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader
summary=()
for stage in $STAGES; do
    t0=$SECONDS
    case $stage in
        tests) BIN=$CARRY/bin LOGS=$OUT/logs tests/gpu/run_gpu_tests.sh > "$OUT/tests.log" 2>&1
               summary+=("tests: $(tail -1 "$OUT/tests.log") ($((SECONDS - t0)) s)")
               tail -12 "$OUT/tests.log" ;;
        bench) BIN=$CARRY/bin OUTDIR=$OUT bench/run_bench.sh > "$OUT/bench.log" 2>&1
               summary+=("bench: exit $? ($((SECONDS - t0)) s)")
               tail -40 "$OUT/bench.log" ;;
        train) "$CARRY/bin/train" --device cuda --data "$CARRY/corpus" --out "$OUT/train" ${TRAIN_ARGS:-} > "$OUT/train.log" 2>&1
               summary+=("train: exit $? ($((SECONDS - t0)) s): $(grep -E '^done' "$OUT/train.log")")
               grep -E '^(model|data|step .*(val|/.* \| loss)|done)' "$OUT/train.log" | tail -14
               sed -n '/--- sample ---/,/^------/p' "$OUT/train.log" | head -14 ;;
        infer) # needs the train stage's checkpoint: generation and perplexity on the GPU
               "$CARRY/bin/infer" --device cuda --checkpoint "$OUT/train" --prompt "And God said" --max-new 60 --seed 3 > "$OUT/infer.log" 2>&1
               "$CARRY/bin/infer" --device cuda --checkpoint "$OUT/train" --perplexity "$CARRY/corpus/val_text.txt" --ctx 1024 >> "$OUT/infer.log" 2>&1
               summary+=("infer: exit $? ($((SECONDS - t0)) s): $(grep -E '^file' "$OUT/infer.log")")
               cat "$OUT/infer.log" ;;
        bench_ab) # this build's attention benchmarks against an older build's ($CARRY/old), interleaved
               OLD=$CARRY/old NEW=$CARRY/bin OUTDIR=$OUT/bench_ab scripts/bench_ab.sh > "$OUT/bench_ab.log" 2>&1
               summary+=("bench_ab: exit $? ($((SECONDS - t0)) s): $(grep -h worst "$OUT"/bench_ab/*_ab.md | tr '\n' ' ')")
               cat "$OUT/bench_ab.log" ;;
        long_prompt) # a book-sized prompt (400 KB of the corpus text) must start generating in
               # seconds (issue 7); needs the train stage's checkpoint
               head -c 400000 "$CARRY/corpus/bible.txt" > "$OUT/prompt_400k.txt"
               t1=$(date +%s.%N)
               "$CARRY/bin/infer" --device cuda --checkpoint "$OUT/train" --prompt-file "$OUT/prompt_400k.txt" --max-new 16 --seed 3 > "$OUT/long_prompt.log" 2>&1
               code=$?; t2=$(date +%s.%N)
               summary+=("long_prompt: exit $code, 400 KB prompt + 16 new tokens in $(awk -v a=$t1 -v b=$t2 'BEGIN{printf "%.2f", b-a}') s")
               tail -c 300 "$OUT/long_prompt.log"; echo ;;
        errors) # bad input on the GPU: one line, the cause and the fix, no bare CUDA error
               for args in "--batch 64 --seq-len 32768" "--attention cudnn" "--attention cudnn --doc-mask off --attn dilated"; do
                   "$CARRY/bin/train" --device cuda --data "$CARRY/corpus" --out "$OUT/bad" --steps 2 $args > "$OUT/err.log" 2>&1
                   echo "train $args -> exit $?: $(tail -1 "$OUT/err.log")"
               done ;;
        recompute) # gradient checkpointing (issue 11): the 91M dilated model, B = 1, random tokens
               LONGNET="--segments 2048,4096,8192,16384,32768 --dilations 1,2,4,6,12"
               "$CARRY/bin/bench_recompute" --seq-lens 262144 --steps 3 --out "$OUT/recompute_262k.md" > "$OUT/recompute.log" 2>&1
               "$CARRY/bin/bench_recompute" --recompute selective,full --seq-lens 1048576 --steps 2 --out "$OUT/recompute_1m.md" >> "$OUT/recompute.log" 2>&1
               "$CARRY/bin/bench_recompute" --recompute full --seq-lens 2097152 --steps 2 --out "$OUT/recompute_2m.md" >> "$OUT/recompute.log" 2>&1
               # the planner in train: 32 windows of 64K (2M tokens per step) on the corpus, auto
               "$CARRY/bin/train" --device cuda --data "$CARRY/corpus" --attn dilated $LONGNET --seq-len 65536 --batch 32 \
                   --steps 6 --warmup 2 --val-every 0 --val-batches 1 --ckpt-every 0 --log-every 1 --sample-tokens 0 \
                   --out "$OUT/train_2m_per_step" > "$OUT/recompute_train.log" 2>&1
               summary+=("recompute: train exit $? ($((SECONDS - t0)) s)")
               cat "$OUT"/recompute_262k.md "$OUT"/recompute_1m.md "$OUT"/recompute_2m.md 2>/dev/null | grep -v "^| ---"
               grep -E "^(memory plan|  (none|selective|full) |step +[0-9]+ |done|error)" "$OUT/recompute_train.log" | head -16 ;;
        kv_cache) # long-context inference (issue 12): the KV cache test, prefill/decode for dilated and dense,
               # and a short dilated training run whose checkpoint reads a book as its prompt and scores it
               LONGNET="--attn dilated --segments 2048,4096,8192,16384,32768 --dilations 1,2,4,6,12"
               "$CARRY/bin/test_kv_cache" > "$OUT/test_kv_cache.log" 2>&1
               "$CARRY/bin/bench_kv_cache" --contexts 65536,1048576 --batches 1,4,8 --decode 64 --out "$OUT/kv_dilated.md" > "$OUT/bench_kv.log" 2>&1
               "$CARRY/bin/bench_kv_cache" --dense --contexts 65536,262144,1048576 --decode 32 --out "$OUT/kv_dense.md" >> "$OUT/bench_kv.log" 2>&1
               "$CARRY/bin/bench_kv_cache" --breakdown > "$OUT/breakdown.md" 2>&1
               "$CARRY/bin/train" --device cuda --data "$CARRY/corpus" $LONGNET --seq-len 8192 --batch 8 --steps 250 --warmup 30 \
                   --val-every 0 --val-batches 2 --ckpt-every 0 --log-every 50 --sample-tokens 0 --out "$OUT/kv_ckpt" > "$OUT/kv_train.log" 2>&1
               "$CARRY/bin/infer" --device cuda --checkpoint "$OUT/kv_ckpt" --prompt-file "$CARRY/corpus/val_text.txt" \
                   --prompt " And the LORD said" --max-new 60 --seed 3 > "$OUT/gen_book.log" 2> "$OUT/gen_book.err"
               scripts/pack_tree.sh layers > "$OUT/tree.txt"  # this project's layers/ as a codebase prompt
               "$CARRY/bin/infer" --device cuda --checkpoint "$OUT/kv_ckpt" --prompt-file "$OUT/tree.txt" \
                   --prompt "# ==== layers/softmax.h ====" --max-new 60 --seed 3 > "$OUT/gen_tree.log" 2> "$OUT/gen_tree.err"
               "$CARRY/bin/infer" --device cuda --checkpoint "$OUT/kv_ckpt" --perplexity "$CARRY/corpus/val_text.txt" \
                   --per-position "$OUT/positions_dilated.csv" > "$OUT/ppl.log" 2>&1
               "$CARRY/bin/infer" --device cuda --checkpoint "$OUT/kv_ckpt" --perplexity "$CARRY/corpus/val_text.txt" \
                   --windows fresh --ctx 8192 >> "$OUT/ppl.log" 2>&1
               summary+=("kv_cache: $(tail -1 "$OUT/test_kv_cache.log") ($((SECONDS - t0)) s)")
               cat "$OUT/bench_kv.log"; tail -3 "$OUT/gen_book.err"; tail -c 400 "$OUT/gen_book.log"; echo
               tail -3 "$OUT/gen_tree.err"; tail -c 500 "$OUT/gen_tree.log"; echo
               grep -v "^scored" "$OUT/ppl.log" | grep "^file" ;;
        block_sparse) # block-sparse attention (issue 10): ours, every tile variant at 1M, and
               # PyTorch's FlexAttention on the same pattern, in this one call
               "$CARRY/bin/bench_attention_block_sparse" --variants --out "$OUT/block_sparse.md" > "$OUT/block_sparse.log" 2>&1
               summary+=("block_sparse: exit $? ($((SECONDS - t0)) s)")
               python3 scripts/bench_flex_attention.py --out "$OUT/flex.md" > "$OUT/flex.log" 2>&1
               summary+=("flex: exit $? ($((SECONDS - t0)) s)")
               cat "$OUT/block_sparse.md" "$OUT/flex.md" ;;
        nccl)  # one NCCL rank per GPU of this host (issues 9, 10): the communicator, ring attention
               # against one GPU, training and perplexity at --cp P against one GPU, a hung rank
               P=$(nvidia-smi -L | wc -l)
               L=scripts/launch.sh
               $L "$P" "$CARRY/bin/test_comm_nccl" > "$OUT/nccl_comm.log" 2>&1
               summary+=("nccl comm P=$P: exit $?: $(grep -E 'rank 0\] [0-9]+ passed' "$OUT/nccl_comm.log")")
               $L "$P" "$CARRY/bin/test_ring" --nccl > "$OUT/nccl_ring.log" 2>&1
               summary+=("nccl ring P=$P: exit $?: $(grep -E '\] [0-9]+ passed' "$OUT/nccl_ring.log" | tr '\n' ' ')")
               grep -E 'FAIL' "$OUT/nccl_ring.log" | head -5
               T=$((4096 * P))
               common="--device cuda --data $CARRY/corpus --steps 20 --seq-len $T --batch 2 --val-every 10 --ckpt-every 10 --seed 7"
               for attn in "dense" "dilated --segments 1024,2048,4096 --dilations 1,2,4" "block-sparse --block 64 --window 512 --global 64"; do
                   tag=${attn%% *}
                   "$CARRY/bin/train" $common --attn $attn --out "$OUT/cp1_$tag" > "$OUT/cp1_$tag.log" 2>&1
                   c1=$?
                   $L "$P" "$CARRY/bin/train" $common --attn $attn --cp "$P" --out "$OUT/cpP_$tag" > "$OUT/cpP_$tag.log" 2>&1
                   c2=$?
                   l1=$(grep -oE 'step +20/20 \| loss [0-9.]+' "$OUT/cp1_$tag.log" | grep -oE '[0-9.]+$')
                   l2=$(grep -oE 'step +20/20 \| loss [0-9.]+' "$OUT/cpP_$tag.log" | head -1 | grep -oE '[0-9.]+$')
                   v1=$(grep -E '^done' "$OUT/cp1_$tag.log"); v2=$(grep -E '^\[rank 0\] done' "$OUT/cpP_$tag.log")
                   summary+=("train $tag T=$T: 1 GPU exit $c1 step-20 loss $l1 | --cp $P exit $c2 loss $l2 | $v1 | $v2")
               done
               "$CARRY/bin/infer" --device cuda --checkpoint "$OUT/cp1_dense" --perplexity "$CARRY/corpus/val_text.txt" --ctx $T > "$OUT/ppl1.log" 2>&1
               $L "$P" "$CARRY/bin/infer" --device cuda --checkpoint "$OUT/cp1_dense" --perplexity "$CARRY/corpus/val_text.txt" --ctx $T --cp "$P" > "$OUT/pplP.log" 2>&1
               summary+=("perplexity 1 GPU: $(grep -E '^file' "$OUT/ppl1.log") | --cp $P: $(grep -E '\] file' "$OUT/pplP.log" | head -1)")
               # A rank that hangs (SIGSTOP) mid-training: the others must stop with a message
               # naming it within the NCCL timeout (60 s), and the checkpoints stay readable.
               $L "$P" "$CARRY/bin/train" $common --steps 100000 --ckpt-every 5 --attn dense --cp "$P" --out "$OUT/hang" > "$OUT/hang.log" 2>&1 &
               lpid=$!
               for i in $(seq 90); do grep -qs '^7,train' "$OUT/hang/metrics.csv" && break; sleep 1; done
               victim=""
               for p in $(pgrep -f "$CARRY/bin/train"); do tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "RANK=$((P - 1))" && victim=$p; done
               t_stop=$SECONDS; kill -STOP "$victim"
               wait $lpid; code=$?
               kill -KILL "$victim" 2>/dev/null
               "$CARRY/bin/infer" --device cuda --checkpoint "$OUT/hang" --perplexity "$CARRY/corpus/val_text.txt" --ctx 1024 > "$OUT/hang_ppl.log" 2>&1
               summary+=("hung rank $((P - 1)) (pid $victim): job exit $code after $((SECONDS - t_stop)) s: $(grep -iE 'rank|timed out|error' "$OUT/hang.log" | grep -v ' step ' | tail -2 | tr '\n' ' ') | checkpoint after: $(grep -E '^file' "$OUT/hang_ppl.log")")
               tail -3 "$OUT/hang.log" ;;
        attn_perf) "$CARRY/bin/test_attention" --perf > "$OUT/attn_perf.log" 2>&1
               summary+=("attn_perf: exit $? ($((SECONDS - t0)) s)")
               cat "$OUT/attn_perf.log" ;;
        dilated_bench) "$CARRY/bin/bench_attention_dilated" --out "$OUT/dilated_bench.md" > "$OUT/dilated_bench.log" 2>&1
               summary+=("dilated_bench: exit $? ($((SECONDS - t0)) s)")
               cat "$OUT/dilated_bench.md" ;;
        compare) # the same model at T = 32768, dense and dilated (LongNet), the same tokens seen
               common=(--device cuda --data "$CARRY/corpus" --seq-len 32768 --batch 1 --steps ${COMPARE_STEPS:-200}
                       --warmup 20 --val-every 50 --val-batches 3 --ckpt-every 0 --keep-ckpts 1 --log-every 25 --sample-tokens 0)
               for run in dense dilated; do
                   extra=(); [ $run = dilated ] && extra=(--attn dilated --segments 2048,4096,8192 --dilations 1,2,4)
                   "$CARRY/bin/train" "${common[@]}" "${extra[@]}" --out "$OUT/$run" > "$OUT/$run.log" 2>&1
                   summary+=("compare $run: exit $?: $(grep -E '^done' "$OUT/$run.log")")
                   cp "$OUT/$run.log" "$OUT/$run/train.log"; rm -f "$OUT/$run"/*.safetensors
                   grep -E 'val loss|^done' "$OUT/$run.log"
               done ;;
        long_context) # issue 12: does a model use its context? The same model (91M unless LC_MODEL) and the same tokens
               # (LC_STEPS x 262,144), trained as dense at 2K or dilated (LongNet) at 32K or 256K on the
               # long-document corpus, then scored by position inside held-out documents >= 256K tokens.
               # A *_from2k model trains its first LC_BASE_STEPS at 2K (128 windows a step), then the
               # rest at its full window from those weights (--init-from), at a tenth of the peak rate.
               LONG=$CARRY/corpus-long
               steps=${LC_STEPS:-300} base=${LC_BASE_STEPS:-200}
               common=(--device cuda --data "$LONG" ${LC_MODEL:---layers 12 --width 768 --heads 12} --warmup 30 --lr 1e-3 --val-every 0
                       --val-batches 4 --ckpt-every 0 --keep-ckpts 1 --log-every 25 --sample-tokens 0)
               D32=(--attn dilated --segments 2048,4096,8192,16384,32768 --dilations 1,2,4,6,12)
               D256=(--attn dilated --segments 2048,4096,8192,16384,32768,65536,131072,262144 --dilations 1,2,4,6,12,24,48,96)
               for m in ${LC_MODELS:-dense2k dilated32k dilated256k}; do
                   case $m in
                       dense2k) pattern=(--attn dense) full=(--seq-len 2048 --batch 128) ;;
                       dilated32k*) pattern=("${D32[@]}") full=(--seq-len 32768 --batch 8) ;;
                       dilated256k*) pattern=("${D256[@]}") full=(--seq-len 262144 --batch 1) ;;
                       *) echo "unknown LC_MODELS entry $m"; continue ;;
                   esac
                   if [[ $m == *_from2k ]]; then
                       "$CARRY/bin/train" "${common[@]}" "${pattern[@]}" --seq-len 2048 --batch 128 --steps "$base" \
                           --out "$OUT/lc_${m}_base" > "$OUT/lc_${m}_base.log" 2>&1
                       summary+=("long_context $m base: exit $? ($((SECONDS - t0)) s): $(grep -E '^done' "$OUT/lc_${m}_base.log")")
                       "$CARRY/bin/train" "${common[@]}" "${pattern[@]}" "${full[@]}" --steps $((steps - base)) --warmup 10 --lr "${LC_EXT_LR:-1e-4}" \
                           --init-from "$OUT/lc_${m}_base" --out "$OUT/lc_$m" > "$OUT/lc_$m.log" 2>&1
                       rm -f "$OUT/lc_${m}_base"/*.safetensors
                   else
                       "$CARRY/bin/train" "${common[@]}" "${pattern[@]}" "${full[@]}" --steps "$steps" --out "$OUT/lc_$m" > "$OUT/lc_$m.log" 2>&1
                   fi
                   summary+=("long_context $m: train exit $? ($((SECONDS - t0)) s): $(grep -E '^done' "$OUT/lc_$m.log")")
                   "$CARRY/bin/infer" --device cuda --checkpoint "$OUT/lc_$m" --perplexity "$LONG/val.bin" --min-doc-tokens 262144 \
                       --per-position "$OUT/positions_$m.csv" > "$OUT/lc_${m}_ppl.log" 2>&1
                   summary+=("long_context $m: $(grep -E '^file' "$OUT/lc_${m}_ppl.log") ($((SECONDS - t0)) s)")
                   if [ -n "${LC_SLIDING:-}" ]; then  # the same model with a short context: what its long context is worth
                       "$CARRY/bin/infer" --device cuda --checkpoint "$OUT/lc_$m" --perplexity "$LONG/val.bin" --min-doc-tokens 262144 \
                           --windows sliding --ctx "$LC_SLIDING" --per-position "$OUT/positions_${m}_ctx$LC_SLIDING.csv" > "$OUT/lc_${m}_ppl_short.log" 2>&1
                       summary+=("long_context $m, --windows sliding --ctx $LC_SLIDING: $(grep -E '^file' "$OUT/lc_${m}_ppl_short.log") ($((SECONDS - t0)) s)")
                   fi
                   grep -E '^(model|weights from|  .*<- chosen|step +[0-9]+/.*(val|\| loss)|done)' "$OUT/lc_$m.log" | tail -8
                   if [ "${LC_PROMPTS:-0}" = 1 ]; then  # a book and a held-out codebase as prompts
                       "$CARRY/bin/infer" --device cuda --checkpoint "$OUT/lc_$m" --prompt-file "$CARRY/prompts/book.txt" \
                           --prompt "${LC_BOOK_PROMPT:-}" --max-new 80 --seed 3 > "$OUT/lc_${m}_gen_book.log" 2> "$OUT/lc_${m}_gen_book.err"
                       "$CARRY/bin/infer" --device cuda --checkpoint "$OUT/lc_$m" --prompt-file "$CARRY/prompts/tree.txt" \
                           --prompt "${LC_TREE_PROMPT:-}" --max-new 120 --seed 3 > "$OUT/lc_${m}_gen_tree.log" 2> "$OUT/lc_${m}_gen_tree.err"
                       summary+=("long_context $m prompts: $(grep -h prefilled "$OUT"/lc_${m}_gen_*.err | tr '\n' ' ')")
                       tail -c 600 "$OUT/lc_${m}_gen_book.log"; echo; tail -c 800 "$OUT/lc_${m}_gen_tree.log"; echo
                   fi
                   rm -f "$OUT/lc_$m"/*.safetensors
               done ;;
    esac
done
echo; printf '%s\n' "${summary[@]}"
