#!/usr/bin/env python3
"""Do quote items miss where the question's end recurs in the context?

    scripts/quote_distractors.py --tasks FILE.jsonl [--tasks ...] (--tokenizer T.model | --encoder CMD)
                                 [--k 4] ITEMS.csv [ITEMS.csv ...]

A quote item asks for the rest of a line from its first part (the question), which occurs once in
the context as text. A model that finds the line by the question's last few tokens meets every
other place those tokens occur: a neighbour line with another continuation. For each quote item of
the task files (data/task_file.h's JSON lines; `task` "quote"), the context and the question are
tokenized (`data_tool encode`, or any command that reads text on stdin and writes ids on stdout) and
the question's last K tokens counted in the context. The items files (P_items.csv, as `infer
--tasks-out P` writes them: the runs of one recipe, or of several) are matched to the task files'
items by length and answer, in order; each row of the table gives, for one length and one count of
those occurrences, the items, the runs and the share the runs got right. An item whose question's
end occurs once can only be missed by losing the line; one where it occurs many times can also be
missed by copying a neighbour.
"""
import argparse
import csv
import json
import shlex
import subprocess
import sys
from collections import defaultdict


def die(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)


def load_quotes(paths):
    """Quote items of the task files, by length, in file order."""
    by_length = defaultdict(list)
    for path in paths:
        try:
            lines = open(path, encoding="utf-8").read().splitlines()
        except OSError as e:
            die(f"cannot read the task file {path}: {e.strerror}")
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                it = json.loads(line)
                if it["task"] == "quote":
                    by_length[int(it["length"])].append(it)
            except (ValueError, KeyError, TypeError):
                die(f"{path} line {n} is not a task item (JSON with task, context, question, answer, length): "
                    "pass the .jsonl files data_tool tasks writes")
    return by_length


def load_items(path):
    """Quote rows of an items file, by length, in file order."""
    by_length = defaultdict(list)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            need = {"task", "length", "answer", "correct"}
            if not reader.fieldnames or not need <= set(reader.fieldnames):
                die(f"{path} is not an items file (no {', '.join(sorted(need))} columns): pass the P_items.csv "
                    "infer --tasks-out P writes")
            for row in reader:
                if row["task"] == "quote":
                    try:
                        by_length[int(row["length"])].append(row)
                    except ValueError:
                        die(f"{path}: the length {row['length']!r} is not a number")
    except OSError as e:
        die(f"cannot read the items file {path}: {e.strerror}")
    return by_length


def encode(cmd, text):
    try:
        r = subprocess.run(cmd, input=text, capture_output=True, text=True)
    except OSError as e:
        die(f"the encoder {shlex.join(cmd)} does not run: {e.strerror}")
    if r.returncode != 0:
        die(f"the encoder {shlex.join(cmd)} failed: {r.stderr.strip()[:200]}")
    return r.stdout.split()


def occurrences(ids, pattern):
    """Places where pattern occurs in ids."""
    k, n = len(pattern), 0
    last = pattern[-1]
    for i in range(k - 1, len(ids)):
        if ids[i] == last and ids[i - k + 1:i + 1] == pattern:
            n += 1
    return n


def bucket(n):
    if n == 0:
        return "0 (tokenized apart)"
    if n == 1:
        return "1"
    return "2-3" if n <= 3 else "4+"


BUCKETS = ["0 (tokenized apart)", "1", "2-3", "4+"]


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, as every refusal here
        die(f"{message}: see scripts/quote_distractors.py --help")


def main():
    ap = Parser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", action="append", required=True, help="a task file (.jsonl) the items were scored on")
    ap.add_argument("--tokenizer", help="the model's tokenizer: build/data_tool encode --tokenizer T")
    ap.add_argument("--encoder", help="a command that reads text on stdin and writes token ids on stdout")
    ap.add_argument("--data-tool", default="build/data_tool")
    ap.add_argument("--k", type=int, default=4, help="the question's last K tokens are counted (default 4)")
    ap.add_argument("items", nargs="+", help="P_items.csv files (one a run)")
    a = ap.parse_args()
    if (a.tokenizer is None) == (a.encoder is None):
        die("give one of --tokenizer T.model and --encoder CMD")
    if a.k < 1:
        die(f"--k {a.k}: count at least the question's last token (--k 1 or more)")
    cmd = shlex.split(a.encoder) if a.encoder else [a.data_tool, "encode", "--tokenizer", a.tokenizer]

    quotes = load_quotes(a.tasks)
    if not quotes:
        die(f"no quote items in {', '.join(a.tasks)}: pass the files data_tool tasks --task quote writes")
    runs = [(p, load_items(p)) for p in a.items]
    # Each item's count, then its runs' results.
    stats = defaultdict(lambda: [0, 0, 0])  # (length, bucket) -> items, runs scored, runs right
    for length in sorted(quotes):
        items = quotes[length]
        for path, by_length in runs:
            got = by_length.get(length, [])
            if len(got) != len(items):
                die(f"{path} has {len(got)} quote rows at length {length}, the task files {len(items)}: "
                    "pass the task files this run was scored on")
            for it, row in zip(items, got):
                if it["answer"].strip() != row["answer"].strip():
                    die(f"{path}: a row at length {length} answers {row['answer']!r} where the task file's item "
                        f"answers {it['answer']!r}: pass the task files this run was scored on, in order")
        for i, it in enumerate(items):
            q = encode(cmd, it["question"])
            ctx = encode(cmd, it["context"])
            if not q:
                die(f"a quote item at length {length} has an empty question")
            b = bucket(occurrences(ctx, q[-a.k:]))
            s = stats[(length, b)]
            s[0] += 1
            for _, by_length in runs:
                s[1] += 1
                s[2] += by_length[length][i]["correct"].strip() == "1"
    print(f"| length | the question's last {a.k} tokens in the context | items | runs scored | right |")
    print("| --- | --- | --- | --- | --- |")
    for length in sorted(quotes):
        for b in BUCKETS:
            n, scored, right = stats.get((length, b), (0, 0, 0))
            if n:
                print(f"| {length} | {b} | {n} | {scored} | {100 * right / scored:.0f}% |")


if __name__ == "__main__":
    main()
