#!/usr/bin/env bash
# Builds the dilated attention test and benchmark (and the dense attention test, which shares the
# kernels) with the Makefile's flags, minus libraries they do not use (only the CUDA runtime and
# OpenMP), into .carry/dilated/ for one device call (scripts/dilated_gpu_check.sh runs them there).
set -eu
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
OUT=.carry/dilated
mkdir -p "$OUT"
FLAGS=(-O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I. -Xcompiler "-fopenmp -march=x86-64-v3 -Wall"
       --expt-relaxed-constexpr -lineinfo)
"$NVCC" "${FLAGS[@]}" -o "$OUT/test_attention_dilated" tests/gpu/test_attention_dilated.cu -lgomp &
"$NVCC" "${FLAGS[@]}" -o "$OUT/bench_attention_dilated" tests/gpu/bench_attention_dilated.cu -lgomp &
wait %1 && wait %2
"$NVCC" "${FLAGS[@]}" -o "$OUT/test_attention" tests/gpu/test_attention.cu -lgomp
cp /lib/x86_64-linux-gnu/libgomp.so.1 "$OUT/"  # in case the GPU machine lacks it
ls -la "$OUT"
