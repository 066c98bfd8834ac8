#!/usr/bin/env python3
"""How the quote items were missed: not found, or found and lost.

    scripts/quote_misses.py ITEMS.csv [ITEMS.csv ...]

Reads the item files `infer --tasks ... --tasks-out P` writes (P_items.csv: line, task, length,
depth, tokens, answer, output, correct) and prints, for each file and each length of its quote
items (and of their controls), how many of the answer's words the continuation reproduces before
it leaves the text: none (the model did not find the line, or guessed), some (it found the line
and lost it), all (correct, infer's rule: the continuation, leading spaces removed, starts with
the answer). A model that finds its lines but copies badly misses with words right; one that
cannot find them misses with none, as the control (the line taken out) does. Given several files
(the runs of one recipe), a last row per task and length gives each column's median over them.
"""
import csv
import statistics
import sys
from collections import defaultdict


def words_right(output, answer):
    """The answer's words the output reproduces, in order, from its first character."""
    out, ans = output.lstrip(" "), answer.lstrip(" ")
    n = 0
    while n < len(out) and n < len(ans) and out[n] == ans[n]:
        n += 1
    # A word counts when the match covers it and the output's word ends where the answer's does
    # ("locatedness" does not reproduce "located"); the last word by infer's rule, a prefix match.
    words, i = 0, 0
    while i < len(ans):
        while i < len(ans) and ans[i].isspace():
            i += 1
        start = i
        while i < len(ans) and not ans[i].isspace():
            i += 1
        if i > start and n >= i and (n > i or i == len(ans) or i == len(out) or out[i].isspace()):
            words += 1
        else:
            break
    return words


def summarize(path):
    """{(task, length): [items, none right, some right, all right]} of a file's quote items."""
    cells = defaultdict(lambda: [0, 0, 0, 0])
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        rows = csv.DictReader(f)
        need = {"task", "length", "answer", "output", "correct"}
        if rows.fieldnames is None or not need <= set(rows.fieldnames):
            sys.exit(f"error: {path} is not an items file (infer --tasks-out P writes P_items.csv with "
                     f"the columns line,task,length,depth,tokens,answer,output,correct)")
        for row in rows:
            if row["task"] not in ("quote", "quote-control"):
                continue
            try:
                length = int(row["length"])
            except ValueError:
                sys.exit(f"error: {path} line {rows.line_num}: length '{row['length']}' is not a number")
            c = cells[(row["task"], length)]
            c[0] += 1
            if row["correct"] == "1":
                c[3] += 1
            elif words_right(row["output"], row["answer"]) > 0:
                c[2] += 1
            else:
                c[1] += 1
    return cells


def main(paths):
    if not paths:
        print("usage: scripts/quote_misses.py ITEMS.csv [ITEMS.csv ...] (infer --tasks-out P writes P_items.csv)", file=sys.stderr)
        sys.exit(2)
    summaries = []
    for path in paths:  # every file read before any row: a bad one ends the run with its error alone
        try:
            summaries.append((path, summarize(path)))
        except OSError as e:
            sys.exit(f"error: cannot read {path}: {e.strerror}")
    print("| file | task | length | items | correct | missed, some words right | missed, none right |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for path, cells in summaries:
        if not cells:
            print(f"| {path} | (no quote items) | | | | | |")
        for (task, length), (n, none, some, right) in sorted(cells.items()):
            pct = lambda k: f"{100 * k / n:.0f}%"
            print(f"| {path} | {task} | {length} | {n} | {pct(right)} | {pct(some)} | {pct(none)} |")
    if len(summaries) > 1:
        print_medians(summaries)


def print_medians(summaries):
    """Each task and length's shares, the median over the files that have it."""
    keys = sorted({key for _, cells in summaries for key in cells})
    for task, length in keys:
        have = [cells[(task, length)] for _, cells in summaries if (task, length) in cells]
        items = sorted({c[0] for c in have})
        shares = [[100 * c[k] / c[0] for c in have] for k in (3, 2, 1)]  # correct, some, none
        n = str(items[0]) if len(items) == 1 else f"{items[0]}-{items[-1]}"
        print(f"| median of {len(have)} files | {task} | {length} | {n} each | " +
              " | ".join(f"{statistics.median(v):.0f}%" for v in shares) + " |")

if __name__ == "__main__":
    main(sys.argv[1:])
