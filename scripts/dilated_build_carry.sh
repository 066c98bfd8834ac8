#!/usr/bin/env bash
# Builds the dilated attention test and benchmark (and the dense attention test, which shares the
# kernels) with the Makefile into .carry/dilated/ for one device call
# (scripts/dilated_gpu_check.sh runs them there).
set -eu
OUT=.carry/dilated
make -j2 build/test_attention_dilated build/bench_attention_dilated build/test_attention
mkdir -p "$OUT"
cp build/test_attention_dilated build/bench_attention_dilated build/test_attention "$OUT/"
cp /lib/x86_64-linux-gnu/libgomp.so.1 "$OUT/"  # in case the GPU machine lacks it
ls -la "$OUT"
