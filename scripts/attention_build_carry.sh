#!/usr/bin/env bash
# Builds the attention test and benchmark with the Makefile (the kernels come from the shared
# objects in build/obj/) and copies them into .carry/attn/ for a device call.
set -eu
make -j2 build/test_attention build/bench_attention
mkdir -p .carry/attn
cp build/test_attention build/bench_attention .carry/attn/
cp /lib/x86_64-linux-gnu/libgomp.so.1 .carry/attn/  # in case the GPU machine lacks it
ls -la .carry/attn
