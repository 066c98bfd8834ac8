#!/usr/bin/env bash
# A screen on the 2K bench (scripts/copy_circuit.sh; notes/reading.md, Results 19 and 21): several
# configs side by side on each GPU, GPU g with seed SEED0 + g (SEED0: 1), each config the bench with some of its
# settings changed (SEEDS_PER_GPU, 1: that many seeds side by side on each GPU, GPU g with seeds
# SEED0 + g*n ... SEED0 + g*n + n-1); then one table of every config's copy loss by gap, quotes and controls,
# validation loss and speed, by seed and variant. One device call (~4 minutes for four configs a GPU).
#
#   scripts/copy_screen.sh NAME[:VAR=VALUE[;VAR=VALUE...]] ...
#   e.g. scripts/copy_screen.sh C H:QKCONV=8 I:QKCONV=16 'G:LR=7.5e-4;MODEL_ARGS=--layers 6 --width 768 --heads 6 --attn-sink'
#
# The bench: readsinkhd128's model (MODEL_ARGS: 3 heads of 128, sinks) trained on the reading
# study's 2K documents (TOKENS, 78.6M; 16 windows a step, BATCH), its convolution (QKCONV, 4) in
# NoPE layers 3 and 5 (QKCONV_LAYERS), scored by the copy loss at GAPS over COPY_SAMPLES passages a
# gap and by quotes at 2K. VARIANTS (hybrid-qkconv) names the copy_circuit.sh variants each run
# trains side by side (the PyTorch peers among them: `VARIANTS="hybrid-qkconv torch-qkconv
# torch-qkconv-diff"`). A config's VAR=VALUE pairs override these or any other setting
# copy_circuit.sh reads (LR, HLOGN, ...); QKCONV_LAYERS= (empty) convolves every NoPE layer. GPUS
# (default: the GPUs nvidia-smi lists) sets how many
# seeds; CARRY (.carry/read) the binaries and corpus as scripts/reading_study.sh packs them.
# Outputs in SCREEN_DIR (build/copy_screen): NAME_sS.log, NAME_sS/ (copy_circuit.sh's files), table.md;
# checkpoints in SCREEN_WORK (out/screen/<SCREEN_DIR's name>);
# with OUT set (a device call), table.md and the whole folder as copy_screen.tgz there too (a call
# brings back 8 files at most, and each run writes a dozen).
set -uo pipefail
T0=$SECONDS
[ $# -gt 0 ] || { echo "usage: scripts/copy_screen.sh NAME[:VAR=VALUE[;VAR=VALUE...]] ... (a config per argument)" >&2; exit 2; }
names=() envs=()
for spec in "$@"; do
    name=${spec%%:*} sets=""; [ "$name" != "$spec" ] && sets=${spec#*:}
    [[ $name =~ ^[A-Za-z0-9_-]+$ ]] || { echo "error: config '$spec' needs a name of letters, digits, - or _ before its ':'" >&2; exit 2; }
    IFS=';' read -ra pairs <<< "$sets"
    for p in "${pairs[@]}"; do
        [[ $p =~ ^[A-Z][A-Z0-9_]*= ]] || { echo "error: config '$name': '$p' is not VAR=VALUE (an upper-case variable name, '=', its value)" >&2; exit 2; }
    done
    names+=("$name") envs+=("$sets")
done
out=${SCREEN_DIR:-build/copy_screen}
work_root=${SCREEN_WORK:-out/screen/$(basename "$out")}
CARRY=${CARRY:-.carry/read}
# The binaries and corpus once, before the runs side by side would each unpack them.
if [ -f "$CARRY/bins.tar.xz" ]; then
    mkdir -p rs/bin rs/corpus-long
    [ -x rs/bin/train ] || tar -xJf "$CARRY/bins.tar.xz" -C rs/bin
    [ -f rs/corpus-long/val.bin ] || { cp "$CARRY"/corpus-long/* rs/corpus-long/ && xz -d -T0 rs/corpus-long/*.xz; }
    CARRY=rs
fi
[[ ${SEED0:-1} =~ ^[0-9]+$ ]] || { echo "error: SEED0 '$SEED0' is not a whole number (the first GPU's seed)" >&2; exit 2; }
per_gpu=${SEEDS_PER_GPU:-1}
[[ $per_gpu =~ ^[1-9][0-9]*$ ]] || { echo "error: SEEDS_PER_GPU '$per_gpu' is not a whole number of at least 1 (the seeds each GPU runs side by side)" >&2; exit 2; }
gpus=${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
[ "$gpus" -ge 1 ] 2>/dev/null || { echo "error: no GPU found (nvidia-smi lists none); set GPUS=N to name how many" >&2; exit 1; }
# Each run's checkpoints and task files, apart from every other screen's (SCREEN_WORK sets the folder):
# a config screened twice at one seed into one folder would meet the first run's checkpoints, which
# train refuses to overwrite, so that is refused here, before any run starts.
for ((k = 0; k < gpus * per_gpu; k++)); do
    for name in "${names[@]}"; do
        for ckpt in "$work_root/${name}_s$((${SEED0:-1} + k))"/{,*/}ckpt_*.safetensors; do
            [ -e "$ckpt" ] || continue
            echo "error: config $name was screened at seed $((${SEED0:-1} + k)) before into $out (its checkpoints: $(dirname "$ckpt")); set SCREEN_DIR to a new folder or SEED0 to other seeds, or remove $work_root" >&2
            exit 2
        done
    done
done
mkdir -p "$out"
circuit=${COPY_CIRCUIT:-scripts/copy_circuit.sh}  # tests put a stand-in here
export CARRY BATCH=${BATCH:-16} GAPS=${GAPS:-16,128,512,1K,2K} COPY_CTX=${COPY_CTX:-4608} COPY_SAMPLES=${COPY_SAMPLES:-16}
export QKCONV_LAYERS=${QKCONV_LAYERS-3,5} TOKENS=${TOKENS:-78643200} MODEL_ARGS=${MODEL_ARGS:---layers 6 --width 384 --heads 3 --attn-sink}
pids=() runs=()
for ((k = 0; k < gpus * per_gpu; k++)); do
    g=$((k / per_gpu)) s=$((${SEED0:-1} + k))
    for i in "${!names[@]}"; do
        run=${names[$i]}_s$s
        (
            IFS=';' read -ra pairs <<< "${envs[$i]}"
            for p in "${pairs[@]}"; do export "${p?}"; done
            # shellcheck disable=SC2086
            CUDA_VISIBLE_DEVICES=$g SEED=$s OUTDIR=$out/$run WORK=$work_root/$run "$circuit" ${VARIANTS:-hybrid-qkconv}
        ) > "$out/$run.log" 2>&1 &
        pids+=($!) runs+=("$run")
    done
done
failed=0
for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; rc=$?
    [ $rc -eq 0 ] || { failed=1; echo "${runs[$i]}: exit $rc ($(tail -n 1 "$out/${runs[$i]}.log"))"; }
done
# One row a run and variant (copy_circuit.sh's summary: a block from each "== VARIANT:" line): the
# copy loss on the repeat at each gap, quotes (control), validation loss, speed.
python3 - "$out" "${runs[@]}" > "$out/table.md" <<'PY'
import re, sys
out, runs = sys.argv[1], sys.argv[2:]
rows, gaps = [], []
for run in runs:
    text = open(f"{out}/{run}.log", errors="replace").read()
    blocks = re.split(r"^== ([\w.-]+): ", text, flags=re.M)
    pairs = list(zip(blocks[1::2], blocks[2::2])) or [("-", text)]
    for variant, block in pairs:
        copy = dict(re.findall(r"^\s*(\d+K?)\s+\d+\s+\d+\s+[\d.]+\s+([\d.]+)", block, re.M))
        gaps += [g for g in copy if g not in gaps]
        quote = re.search(r"^\s*quote \| \S+ ([\d.]+)%", block, re.M)
        ctl = re.search(r"^\s*quote-control \| \S+ ([\d.]+)%", block, re.M)
        val = re.search(r"val loss ([\d.]+)", block)
        speed = re.search(r"(\d+) tokens/s", block)
        rows.append((run, variant, copy, *(m and m.group(1) for m in (quote, ctl, val, speed))))
print("| run | variant | " + " | ".join(f"gap {g}" for g in gaps) + " | quote (control) % | val loss | tokens/s |")
print("| --- " * (len(gaps) + 5) + "|")
for run, variant, copy, q, c, v, t in rows:
    print(f"| {run} | {variant} | " + " | ".join(copy.get(g, "-") for g in gaps) + f" | {q or '-'} ({c or '-'}) | {v or '-'} | {t or '-'} |")
PY
cat "$out/table.md"
if [ -n "${OUT:-}" ]; then
    cp "$out/table.md" "$OUT/table.md"
    tar -czf "$OUT/copy_screen.tgz" --exclude='*_tokens.csv' -C "$(dirname "$out")" "$(basename "$out")"
fi
echo "call copy_screen: $((SECONDS - T0)) s"
exit $failed
