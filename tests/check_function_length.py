#!/usr/bin/env python3
"""Production functions stay short enough to read: none past 100 lines, except a few kernel main
loops named here, each of which names its phases (prologue, main loop, epilogue, as FlashAttention-3
names them). Production is core/ comm/ data/ eval/ layers/ model/ and train.cu, infer.cu (every
kernel rung in layers/cuda/attention/ is included by the launch templates, so all of it counts).

    tests/check_function_length.py           the check (prints "N passed, M failed")
    tests/check_function_length.py --list N  every production function past N lines, longest first

A function's length runs from the line of its opening brace to that of its closing one (the body:
a signature over several lines does not count). Functions are found by matching braces in the
text with comments, strings and preprocessor lines blanked: a brace after a parameter list opens a
function, one after struct, class, namespace or enum opens a scope to look inside, anything else
(initializers, lambdas at namespace scope) is skipped. A planted file shows the check can fail.
"""
import glob
import os
import re
import sys
import tempfile

LIMIT = 100
ROOTS = ["core", "comm", "data", "eval", "layers", "model"]
PROGRAMS = ["train.cu", "infer.cu"]
EXTENSIONS = (".h", ".cuh", ".cu", ".cpp")
# The kernel main loops allowed past the limit (file, function): at most five, and each must name
# its phases in comments or helper names.
ALLOWED = {
    ("layers/cuda/attention/backward_ws.cuh", "attention_backward_dkdv_ws_kernel"),
    ("layers/cuda/attention_decode.cuh", "decode_piece"),
}
PHASES = ("prologue", "main loop", "epilogue")


def blank(src):
    """The source with comments, string and character literals and preprocessor lines replaced by
    spaces (newlines kept, so line numbers stay)."""
    out, i, n = [], 0, len(src)
    line_start = True
    while i < n:
        c = src[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":  # a preprocessor line, with its continuations
            while i < n and src[i] != "\n":
                if src[i] == "\\" and i + 1 < n and src[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = c == "\n"
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == 'R' and src.startswith('R"', i):  # raw string R"delim( ... )delim"
            k = src.find("(", i)
            delim = src[i + 2:k]
            j = src.find(")" + delim + '"', k)
            j = n if j < 0 else j + len(delim) + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and (src[i - 1].isalnum()):  # a digit separator (1'000)
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_template(header):
    """header without a leading template<...> (angle brackets matched)."""
    m = re.match(r"\s*template\s*<", header)
    if not m:
        return header
    depth, i = 1, m.end()
    while i < len(header) and depth:
        depth += {"<": 1, ">": -1}.get(header[i], 0)
        i += 1
    return strip_template(header[i:])


def top_level(text, ch):
    """Indices of ch in text outside (), [], <> (a rough template depth), {}."""
    depth, hits = 0, []
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == ch and depth == 0:
            hits.append(i)
    return hits


def classify(header):
    """'function', 'scope' or 'other' for the text before a brace at namespace or class scope."""
    h = re.sub(r"\b(public|private|protected)\s*:(?!:)", " ", header)
    h = strip_template(h).strip()
    paren = h.find("(")
    head = h if paren < 0 else h[:paren]
    if re.search(r"\b(namespace|struct|class|union|enum)\b", head) or re.fullmatch(r"extern\s*", h):
        return "scope"
    if paren < 0:
        return "other"
    if "operator" not in head and any(h[i - 1:i + 1] not in ("==", "!=", "<=", ">=") and
                                      h[i:i + 2] != "==" for i in top_level(h, "=")):
        return "other"  # an initializer or a lambda assigned at namespace scope
    return "function"


NOT_NAMES = {"__launch_bounds__", "__align__", "alignas", "__attribute__", "decltype", "__declspec"}


def function_name(header):
    h = strip_template(re.sub(r"\b(public|private|protected)\s*:(?!:)", " ", header))
    for m in re.finditer(r"(operator\s*\(\)|operator\s*[^\s(]+|~?[A-Za-z_]\w*(?:\s*::\s*~?[A-Za-z_]\w*)*)\s*\(", h):
        if m.group(1) not in NOT_NAMES:
            return re.sub(r"\s+", "", m.group(1))
    return "?"


def functions(path, text=None):
    """(name, first line, last line) of each function defined in path, in order."""
    src = blank(text if text is not None else open(path, encoding="utf-8", errors="replace").read())
    found = []
    stack = []  # entries: ("scope"|"other"|"init", None) or ("function", (name, start line))
    header_start = 0
    line = 1
    for i, c in enumerate(src):
        if c == "\n":
            line += 1
            continue
        inside = any(kind in ("function", "other") for kind, _ in stack)
        if c == "{":
            if inside:
                stack.append(("block", None))
                continue
            header = src[header_start:i]
            kind = classify(header)
            if kind == "function":
                close = header.rfind(")")
                after = header[close + 1:] if close >= 0 else ""
                # a constructor's member initialized with braces: x_{...} inside ") : a(1), x_{"
                if re.search(r"(?<!:):(?!:)", after) and re.search(r"[\w>]\s*$", header):
                    stack.append(("init", None))
                    continue
                stack.append(("function", (function_name(header), line)))
            else:
                stack.append((kind, None))
            header_start = i + 1
        elif c == "}":
            if not stack:
                continue
            kind, info = stack.pop()
            if kind == "init":
                continue
            if kind == "function":
                found.append((info[0], info[1], line))
            if not any(k in ("function", "other") for k, _ in stack):
                header_start = i + 1
        elif c == ";" and not inside and not (stack and stack[-1][0] == "init"):
            header_start = i + 1
    return found


def production_files(root="."):
    files = []
    for d in ROOTS:
        for p in sorted(glob.glob(os.path.join(root, d, "**", "*"), recursive=True)):
            if p.endswith(EXTENSIONS) and os.path.isfile(p):
                files.append(p)
    files += [os.path.join(root, p) for p in PROGRAMS if os.path.isfile(os.path.join(root, p))]
    return files


def long_functions(files, limit, root="."):
    out = []
    for f in files:
        for name, first, last in functions(f):
            if last - first + 1 > limit:
                out.append((last - first + 1, os.path.relpath(f, root), name, first))
    return sorted(out, reverse=True)


def names_phases(path, first, last):
    body = "".join(open(path, encoding="utf-8").readlines()[first - 1:last]).lower()
    return [p for p in PHASES if p not in body and p.replace(" ", "_") not in body]


def main():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    os.chdir(here)
    if len(sys.argv) == 3 and sys.argv[1] == "--list":
        for n, f, name, first in long_functions(production_files(), int(sys.argv[2])):
            print(f"{n:4d}  {f}:{first}  {name}")
        return 0
    passed = failed = 0

    def report(ok, text):
        nonlocal passed, failed
        print(("PASS " if ok else "FAIL ") + text)
        passed, failed = passed + ok, failed + (not ok)

    # The check can fail: a planted file with functions of 100 and 101 lines, one of them inside a
    # namespace and a struct, beside a constructor with brace initializers and a lambda.
    with tempfile.TemporaryDirectory() as tmp:
        planted = os.path.join(tmp, "planted.cuh")
        lines = lambda n: "".join(f"    x += {k};  // {{ a brace in a comment\n" for k in range(n))
        with open(planted, "w") as f:  # each: its two brace lines, two more, and the lines planted
            f.write("namespace n {\nstruct S {\n    S(int a) : a_{a}, b_(a) {}\n    int a_, b_;\n"
                    "    template <int K>\n    __device__ int exactly_limit(int x)\n    {\n"
                    "        auto l = [&](int y) { return y; };\n" + lines(96) + "        return l(x);\n    }\n};\n"
                    "__global__ void __launch_bounds__(128, 1)\n    exactly_over(int x) {\n"
                    "    const char* s = \"}\";\n" + lines(97) + "    return x;\n}\n}  // namespace n\n")
        got = {name: last - first + 1 for name, first, last in functions(planted)}
        report(got.get("exactly_limit") == 100 and got.get("exactly_over") == 101 and "S" in got,
               f"the planted file's functions are measured: 100 and 101 lines ({got})")
        flagged = [name for _, _, name, _ in long_functions([planted], LIMIT, tmp)]
        report(flagged == ["exactly_over"], f"the planted 101-line function is flagged, the 100-line one not ({flagged})")

    report(len(ALLOWED) <= 5, f"at most 5 functions allowed past {LIMIT} lines ({len(ALLOWED)})")
    over = long_functions(production_files(), LIMIT)
    seen = set()
    for n, f, name, first in over:
        if (f, name) in ALLOWED:
            seen.add((f, name))
            missing = names_phases(f, first, first + n - 1)
            report(not missing, f"{f}:{first} {name} ({n} lines) is an allowed main loop" +
                   (f" but does not name its phases: {', '.join(missing)} missing" if missing else ", its phases named"))
        else:
            report(False, f"{f}:{first} {name} is {n} lines (over {LIMIT}): split it into named steps")
    if not [o for o in over if (o[1], o[2]) not in ALLOWED]:
        report(True, f"no other production function is over {LIMIT} lines")
    for f, name in sorted(set(ALLOWED) - seen):
        report(False, f"{f} {name} is allowed but is not over {LIMIT} lines (or gone): drop it from ALLOWED")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
