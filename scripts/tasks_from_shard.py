#!/usr/bin/env python3
"""Turns training documents of a retrieval shard (data_tool task-shard) into a task file
(data/task_file.h): each document is cut right after its first multi-key question and after its
first pass-key question, and the number that followed becomes the answer. Scoring a model on it
(infer --tasks) asks: does it answer in the format it was trained on? (notes/long-context-retrieval.md)
Standard library only.
    scripts/tasks_from_shard.py SHARD.bin TOKENIZER.model OUT.jsonl DOCS [DATA_TOOL]
"""
import json, struct, subprocess, sys


def main():
    shard, tokenizer, out, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    data_tool = sys.argv[5] if len(sys.argv) > 5 else "build/data_tool"
    b = open(shard, "rb").read()
    if b[:8] != b"LNGSHARD":
        sys.exit(f"error: {shard} is not a token shard (data/FORMAT.md)")
    token_bytes, = struct.unpack("<I", b[12:16])
    n_tok, n_docs = struct.unpack("<QQ", b[16:32])
    starts = struct.unpack(f"<{n_docs}Q", b[64:64 + 8 * n_docs])
    toks = struct.unpack(f"<{n_tok}{'H' if token_bytes == 2 else 'I'}", b[64 + 8 * n_docs:])
    items = []
    for d in range(min(n, n_docs)):
        end = starts[d + 1] if d + 1 < n_docs else n_tok
        ids = " ".join(map(str, toks[starts[d] + 1:end]))  # without its BOS (infer adds one)
        text = subprocess.run([data_tool, "decode", "--tokenizer", tokenizer], input=ids.encode(),
                              capture_output=True, check=True).stdout.decode("utf-8", "replace")
        for task, marker in (("multikey", "mentioned in the provided text is "), ("passkey", "What is the pass key? The pass key is ")):
            at = text.find(marker)
            if at < 0:
                continue
            cut = at + len(marker) - 1  # the question ends before the space of the answer
            context, question = text[:cut].rsplit("\n", 1)
            answer = text[cut:].split(".")[0].strip()
            items.append({"task": "train-" + task, "context": context, "question": question, "answer": answer,
                          "length": end - starts[d], "depth": 0.5})
            # length: the document's tokens, the report's column. The prompt (cut at the first
            # question) is shorter, which data/task_file.h allows: `length` is a length class; a
            # prompt may fall short of it, never pass length + length/4 + 32 tokens.
    open(out, "w").write("".join(json.dumps(i) + "\n" for i in items))
    print(f"{len(items)} items from {min(n, n_docs)} documents of {shard} to {out}")


if __name__ == "__main__":
    main()
