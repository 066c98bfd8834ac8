#!/bin/bash
# packs build/ into .carry/s8/$1.tar.xz as b/ (every GPU test and benchmark, train/infer/tools stripped, sentencepiece, the test corpus)
set -eu
name=$1; shift
rm -rf /tmp/pack && mkdir -p /tmp/pack/b
for f in build/test_* build/bench_* build/attention_tool build/train build/infer build/data_tool; do
  [ -f "$f" ] && [ -x "$f" ] || continue
  n=$(basename $f); [ -f tests/gpu/$n.cu ] || [[ $n == train || $n == infer || $n == data_tool || $n == attention_tool ]] || continue
  cp $f /tmp/pack/b/
done
strip /tmp/pack/b/* 2>/dev/null || true  # symbols only: the CUDA fatbins stay
cp -L /lib/x86_64-linux-gnu/libsentencepiece.so.0 /lib/x86_64-linux-gnu/libsentencepiece_train.so.0 /tmp/pack/b/
cp -r build/test_corpus /tmp/pack/b/
tar -C /tmp/pack -cf - ./b | xz -T1 --lzma2=preset=6,dict=192MiB > .carry/s8/$name.tar.xz
ls -la .carry/s8/$name.tar.xz
# one xz stream with a dictionary larger than the tree: the binaries share the same fatbins, so they compress ~5x better than in separate blocks
