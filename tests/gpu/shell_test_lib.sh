# Sourced by the GPU tests written in shell (test_resume_gpu.sh, test_infer_gpu.sh): PASS/FAIL
# bookkeeping, the libraries the lent machines keep in Python wheels, and the checks every such
# test makes first. Set corpus and BIN before sourcing.
passed=0 failed=0
pass() { echo "PASS $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
finish() { echo "$passed passed, $failed failed"; [ $failed -eq 0 ]; exit $?; }
if python3 -c "import nvidia" 2>/dev/null; then  # the lent machines keep cuDNN/cuBLAS in Python wheels
    SP=$(python3 -c "import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))")/nvidia
    export LD_LIBRARY_PATH=$SP/cudnn/lib:$SP/nccl/lib:$SP/cu13/lib:${LD_LIBRARY_PATH:-}
fi
# need_gpu_and_corpus program...: each $BIN/program built, a corpus at $corpus, a GPU.
need_gpu_and_corpus() {
    for prog in "$@"; do [ -x "$BIN/$prog" ] || { fail "$BIN/$prog not built"; finish; }; done
    [ -f "$corpus/train.bin" ] || { fail "no corpus at $corpus (run tests/test_data_cli.sh on the CPU machine and carry it)"; finish; }
    nvidia-smi --query-gpu=name --format=csv,noheader > /dev/null 2>&1 || { fail "no GPU"; finish; }
}
