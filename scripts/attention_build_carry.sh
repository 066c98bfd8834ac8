#!/usr/bin/env bash
# Builds the attention test and benchmark with the Makefile's flags (minus the libraries they do not
# use: the test needs only the CUDA runtime, the benchmark also cuDNN for its comparison columns,
# found on the GPU machine through LD_LIBRARY_PATH) into .carry/attn/ for a device call.
set -eu
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
mkdir -p .carry/attn
FLAGS=(-O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I. -Xcompiler "-fopenmp -march=x86-64-v3 -Wall"
       --expt-relaxed-constexpr -lineinfo)
"$NVCC" "${FLAGS[@]}" -o .carry/attn/test_attention tests/gpu/test_attention.cu -lgomp &
"$NVCC" "${FLAGS[@]}" -o .carry/attn/bench_attention tests/gpu/bench_attention.cu -lcudnn -lcublasLt -lcublas -lgomp &
wait %1 && wait %2
ls -la .carry/attn
cp /lib/x86_64-linux-gnu/libgomp.so.1 .carry/attn/  # in case the GPU machine lacks it
