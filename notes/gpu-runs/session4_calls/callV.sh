#!/bin/bash
set -u
source .carry/s4/setup.sh
mkdir -p build/logsV
for t in test_resume_gpu test_infer_gpu; do
  BIN=b tests/gpu/$t.sh b/test_corpus > build/logsV/$t.log 2>&1; echo "$t: exit $? $(tail -1 build/logsV/$t.log)"
done
timeout 200 b/test_attention --filter block-sparse > build/logsV/test_attention_bs.log 2>&1; echo "test_attention --filter block-sparse: exit $? $(tail -1 build/logsV/test_attention_bs.log)"
grep ^FAIL build/logsV/*.log | head
tar -czf $OUT/logsV.tgz build/logsV
