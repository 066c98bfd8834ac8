#!/usr/bin/env python3
"""Quote items as a reader sees them: for each depth asked, the first quote item of a task file at
one length, its cue (the prompt's last line), the text that follows it, how many of the runs wrote
that text, and what the first runs and a control run wrote (README's demonstration).

  python3 scripts/quote_examples.py --tasks eval_qbook.jsonl --length 50000 [--depths 0,0.33,0.9]
      [--label "Debian Policy, 50K"] [--show 2] [--control CTL_items.csv] RUN_items.csv ...

RUN_items.csv are the item files `infer --tasks FILE --tasks-out P` writes (P_items.csv), of runs
scored on that task file or on part of it: an item is found by its task, length, depth and answer,
not by its line, so a file scored with its longest lengths left out still matches. The names
shown are what follows the last '@' in each file's name (the seed), else the file's name.
"""
import argparse
import csv
import json
import os
import sys


def show(text, n):
    """A model's text on one line: tabs and line breaks as \\t and \\n, at most n characters."""
    return text.replace("\t", "\\t").replace("\n", "\\n")[:n]


def run_name(path):
    base = os.path.basename(path).split("_")[0]
    return "@" + base.rsplit("@", 1)[1] if "@" in base else base


def key(task, length, depth, answer):
    return (task, int(length), round(float(depth), 6), answer)


def read_items(path):
    """{(task, length, depth, answer): [rows in file order]} of one items file."""
    out = {}
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        sys.exit(f"error: cannot read {path}: {e.strerror}")
    need = {"task", "length", "depth", "answer", "output", "correct"}
    if not rows or not need <= set(rows[0]):
        sys.exit(f"error: {path} is not an items file (infer --tasks-out P writes P_items.csv with {', '.join(sorted(need))})")
    for r in rows:
        try:
            out.setdefault(key(r["task"], r["length"], r["depth"], r["answer"]), []).append(r)
        except ValueError:
            sys.exit(f"error: {path}: a row's length or depth is not a number ({r['length']!r}, {r['depth']!r})")
    return out


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage block
        sys.exit(f"error: {message} (scripts/quote_examples.py --help lists the flags)")


def main():
    ap = Parser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", required=True, help="the task file the runs were scored on (JSON lines)")
    ap.add_argument("--length", type=int, required=True)
    ap.add_argument("--depths", default="0,0.33,0.9")
    ap.add_argument("--label", default="")
    ap.add_argument("--show", type=int, default=2, help="how many runs' outputs to print beside the count")
    ap.add_argument("--control", default="", help="the items file of a control run (say the model reading its last 2K)")
    ap.add_argument("--width", type=int, default=34, help="characters of each output shown")
    ap.add_argument("items", nargs="+")
    args = ap.parse_args()
    try:
        depths = [round(float(d), 6) for d in args.depths.split(",")]
    except ValueError:
        sys.exit(f"error: --depths {args.depths} is not a comma list of numbers in [0, 1]: say 0,0.33,0.9")
    tasks = []
    try:
        with open(args.tasks) as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        tasks.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        sys.exit(f"error: {args.tasks} line {n} is not JSON ({e.msg}): give the task file the runs were scored on")
    except OSError as e:
        sys.exit(f"error: cannot read {args.tasks}: {e.strerror}")
    for n, t in enumerate(tasks, 1):  # the quote items' fields this reads, checked once
        if not isinstance(t, dict):
            sys.exit(f"error: {args.tasks} item {n} is not a JSON object: give the task file the runs were scored on")
        if t.get("task") != "quote":
            continue
        try:
            t["depth"] = round(float(t["depth"]), 6)
            ok = isinstance(t["answer"], str) and isinstance(t["question"], str)
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            sys.exit(f"error: {args.tasks} item {n} is a quote without a numeric depth, an answer and a question: "
                     "give a task file of data_tool tasks --task quote")
    runs = [(run_name(p), read_items(p)) for p in args.items]
    control = read_items(args.control) if args.control else None
    label = args.label or f"{os.path.basename(args.tasks)}, {args.length}"
    printed = 0
    for depth in depths:
        item = next((t for t in tasks if t.get("task") == "quote" and t.get("length") == args.length
                     and t["depth"] == depth), None)
        if item is None:
            continue
        k = key("quote", args.length, depth, item["answer"])
        scored = [(name, rows[k][0]) for name, rows in runs if k in rows]
        if not scored:
            sys.exit(f"error: no items file holds the quote at length {args.length}, depth {depth} "
                     f"(answer {item['answer']!r}): give the items of runs scored on {args.tasks}")
        right = sum(r["correct"] == "1" for _, r in scored)
        cue = show(item["question"].split("\n")[-1], 60)
        print(f'{label}, depth {depth:g}: "{cue}"  the text: "{item["answer"]}"  ({right} of {len(scored)} runs)')
        outs = [f'{name}: "{show(r["output"], args.width)}"' for name, r in scored[:args.show]]
        if control and k in control:
            outs.append(f'{run_name(args.control)}, control: "{show(control[k][0]["output"], args.width)}"')
        print("    " + "  ".join(outs))
        printed += 1
    if printed == 0:
        sys.exit(f"error: {args.tasks} has no quote item at length {args.length} and depths {args.depths}")


if __name__ == "__main__":
    main()
