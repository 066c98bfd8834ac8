#!/usr/bin/env python3
"""Where the questions of a retrieval training shard find their needles.

    scripts/needle_distances.py SHARD WINDOW TOKENIZER [DATA_TOOL]

For every pass-key and multi-key question in SHARD (made by `data_tool task-shard`), finds its
needle in its document (the latest pass key before it; the multi-key needle of the same word) and
counts ("no needle found": a pair the patterns miss: a word whose pieces differ between the needle
and the question, such as every royal-* with the corpus-long tokenizer), inside the
training windows of WINDOW tokens that train cuts the shard into (data/loader.h: windows at
multiples of WINDOW from the shard's start):
  - questions whose needle sits in an earlier window (the model cannot see it: it learns to guess);
  - the others by where the needle sits in its window (its first 256 tokens, where an evaluation
    item at depth 0 puts it, or later) and how far back it is (at least WINDOW / 4: far, or near).
notes/long-context-retrieval.md (why depth 0, from the training data) reads these counts. The patterns are encoded with the shard's
tokenizer by DATA_TOOL (default build/data_tool). Pure Python: no numpy.
"""
import array
import bisect
import collections
import struct
import subprocess
import sys


def encode(data_tool, tokenizer, text):
    out = subprocess.run([data_tool, "encode", "--tokenizer", tokenizer], input=text, capture_output=True, text=True, check=True)
    return [int(x) for x in out.stdout.split()]


def read_shard(path):
    with open(path, "rb") as f:
        hdr = f.read(64)
        if hdr[:8] != b"LNGSHARD":
            sys.exit(f"error: {path} is not a token shard (data/FORMAT.md)")
        _, token_bytes, n_tokens, n_docs, _ = struct.unpack("<IIQQI", hdr[8:36])
        starts = array.array("Q")
        starts.frombytes(f.read(8 * n_docs))
        tokens = array.array("H" if token_bytes == 2 else "I")
        tokens.frombytes(f.read(token_bytes * n_tokens))
    return tokens, list(starts)


def find_all(tokens, raw, pattern):
    """Token positions where `pattern` (a list of ids) starts."""
    needle = array.array(tokens.typecode, pattern).tobytes()
    width = tokens.itemsize
    found, at = [], raw.find(needle)
    while at >= 0:
        if at % width == 0:
            found.append(at // width)
        at = raw.find(needle, at + 1)
    return found


def words_after(tokens, start, stop_id, limit=16):
    """The ids from `start` up to (not including) the first `stop_id`."""
    out = []
    while start < len(tokens) and tokens[start] != stop_id and len(out) < limit:
        out.append(tokens[start])
        start += 1
    return tuple(out)


def classify(counts, needle_at, question_at, window):
    if needle_at // window != question_at // window:
        counts["needle in an earlier window"] += 1
        return
    where = "needle in the first 256" if needle_at % window < 256 else "needle later"
    far = "far (>= window/4)" if question_at - needle_at >= window // 4 else "near"
    counts[f"{where}, {far}"] += 1


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    shard, window, tokenizer = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    data_tool = sys.argv[4] if len(sys.argv) == 5 else "build/data_tool"
    # Each pattern as it sits in a document: after a newline (data/tasks.h joins lines by '\n').
    nl = encode(data_tool, tokenizer, "\n")[-1:]
    strip = lambda ids: ids[len(nl):] if ids[: len(nl)] == nl else ids
    pk_needle = strip(encode(data_tool, tokenizer, "\nThe pass key is"))
    pk_question = strip(encode(data_tool, tokenizer, "\nWhat is the pass key? The pass key is"))
    mk_needle = strip(encode(data_tool, tokenizer, "\nOne of the special magic numbers for"))
    mk_question = strip(encode(data_tool, tokenizer, "\nWhat is the special magic number for"))
    # The first id after the word: what " is:" and " mentioned" start with (pieces split at spaces).
    def after_word(prefix, rest):
        head = encode(data_tool, tokenizer, prefix + " x")
        return encode(data_tool, tokenizer, prefix + " x" + rest)[len(head)]
    mk_is = after_word("\nOne of the special magic numbers for", " is:")
    mk_mentioned = after_word("\nWhat is the special magic number for", " mentioned")
    tokens, starts = read_shard(shard)
    raw = tokens.tobytes()
    doc = lambda at: bisect.bisect_right(starts, at) - 1  # the document holding position `at`

    pk = collections.Counter()
    needles = find_all(tokens, raw, pk_needle)
    questions = find_all(tokens, raw, pk_question)
    for q in questions:
        k = bisect.bisect_right(needles, q) - 1
        if k >= 0 and doc(needles[k]) == doc(q):
            classify(pk, needles[k], q, window)
        else:
            pk["no needle found"] += 1

    mk = collections.Counter()
    by_word = collections.defaultdict(list)
    for n in find_all(tokens, raw, mk_needle):
        by_word[words_after(tokens, n + len(mk_needle), mk_is)].append(n)
    mk_questions = find_all(tokens, raw, mk_question)
    for q in mk_questions:
        word = words_after(tokens, q + len(mk_question), mk_mentioned)
        before = [n for n in by_word.get(word, []) if n < q and doc(n) == doc(q)]  # words are distinct in a document
        if before:
            classify(mk, max(before), q, window)
        else:
            mk["no needle found"] += 1

    print(f"{shard}: windows of {window} tokens; the first 256 tokens are {256 / window:.4%} of a window")
    for name, counts, n in (("pass-key", pk, len(questions)), ("multi-key", mk, len(mk_questions))):
        print(f"  {name} questions: {n}")
        for key in sorted(counts):
            print(f"    {key}: {counts[key]}")


if __name__ == "__main__":
    main()
