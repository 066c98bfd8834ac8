#!/bin/bash
# packs build/ into .carry/s7/$1.tar.xz as b/ (every GPU test and benchmark, train/infer/tools stripped, sentencepiece, the test corpus)
set -eu
name=$1; shift
rm -rf /tmp/pack && mkdir -p /tmp/pack/b
for f in build/test_* build/bench_* build/attention_tool build/train build/infer build/data_tool; do
  [ -f "$f" ] && [ -x "$f" ] || continue
  n=$(basename $f); [ -f tests/gpu/$n.cu ] || [[ $n == train || $n == infer || $n == data_tool || $n == attention_tool ]] || continue
  cp $f /tmp/pack/b/
done
strip /tmp/pack/b/train /tmp/pack/b/infer /tmp/pack/b/data_tool /tmp/pack/b/attention_tool 2>/dev/null || true
cp -L /lib/x86_64-linux-gnu/libsentencepiece.so.0 /lib/x86_64-linux-gnu/libsentencepiece_train.so.0 /tmp/pack/b/
cp -r build/test_corpus /tmp/pack/b/
tar -C /tmp/pack -cf - ./b | xz -6 -T2 > .carry/s7/$name.tar.xz
ls -la .carry/s7/$name.tar.xz
