"""Checks the source tree's layering rules.

usage: check_layering.py ROOT
- runtime/'s backend-neutral layers (exec, ops, plan, support, io) include nothing of
  runtime/cpu or runtime/cuda (the drivers above them, train and perf, may);
- no runtime file includes LLVM or MLIR (the runtime builds without them);
- compiler/lowering and compiler/pipeline_parallel do not both include each other;
- the tools are thin mains: every source file under tools/ has under 400 lines;
- the step functions' names are string literals in one header only (planfile/function_names.h),
  not in the code that runs or builds them;
- no comment in the sources quotes a measurement of a development machine (a rate in GB/s or
  MB/s, "this VM", "the development machine"): those belong in docs/benchmarks.md;
- no switch over op or kernel kinds of more than 10 cases in compiler/sharding or runtime/perf
  (a `switch` with its `case` labels, or a TypeSwitch with the types of its `.Case<...>`): what
  an op or kernel means there lives with the op (its interfaces) or in ops/kernels.def.
Prints what breaks a rule; exits 1 if anything does.
"""
import pathlib
import re
import sys

SOURCES = (".h", ".cc", ".cpp", ".cu", ".cuh", ".def")
NEUTRAL = ("exec", "ops", "planfile", "support", "io")


def files(root, *parts):
    base = root.joinpath(*parts)
    return [p for p in base.rglob("*") if p.suffix in SOURCES and p.is_file()]


def includes(path):
    return re.findall(r'^\s*#include\s+"([^"]+)"', path.read_text(errors="replace"), re.M)


SWITCH_FOLDERS = (("compiler", "sharding"), ("runtime", "perf"))
MOST_CASES = 10


def switch_sizes(text):
    """(line, cases) of each switch statement and TypeSwitch chain in C++ source `text`."""
    code = "\n".join(line.split("//")[0] for line in text.splitlines())
    sizes = []
    for m in re.finditer(r"\bswitch\s*\(", code):
        start = code.index("{", m.end())
        depth, i = 0, start
        while i < len(code):
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            if depth == 0:
                break
            i += 1
        body = code[start:i]
        cases = len(re.findall(r"\bcase\b", body))
        sizes.append((code.count("\n", 0, m.start()) + 1, cases))
    for m in re.finditer(r"TypeSwitch<", code):
        depth, end = 0, m.end()
        while end < len(code) and not (depth == 0 and code[end] == ";"):
            depth += {"(": 1, "{": 1, "[": 1, ")": -1, "}": -1, "]": -1}.get(code[end], 0)
            end += 1
        chain = code[m.end():end]
        types = sum(len(c.split(",")) for c in re.findall(r"\.Case<([^>]*)>", chain))
        sizes.append((code.count("\n", 0, m.start()) + 1, types))
    return sizes


def main(root):
    root = pathlib.Path(root)
    problems = []
    for folder in NEUTRAL:
        for path in files(root, "runtime", folder):
            for inc in includes(path):
                if inc.startswith(("cpu/", "cuda/")):
                    problems.append(f"{path.relative_to(root)} includes {inc}")
    for path in files(root, "runtime"):
        for inc in includes(path):
            if inc.startswith(("llvm/", "mlir/")):
                problems.append(f"{path.relative_to(root)} includes {inc} (the runtime has no LLVM)")
    lowering = any(inc.startswith("pipeline_parallel/") for p in files(root, "compiler", "lowering")
                   for inc in includes(p))
    pipeline = any(inc.startswith("lowering/") for p in files(root, "compiler", "pipeline_parallel")
                   for inc in includes(p))
    if lowering and pipeline:
        problems.append("compiler/lowering and compiler/pipeline_parallel include each other")
    for path in files(root, "tools"):
        lines = len(path.read_text().splitlines())
        if lines >= 400:
            problems.append(f"{path.relative_to(root)} has {lines} lines (tools are thin mains)")
    holders = []
    for top in ("compiler", "runtime", "tools", "frontends", "dialects"):
        for path in files(root, top):
            code = "\n".join(line.split("//")[0] for line in path.read_text(errors="replace").splitlines())
            if re.search(r'"train_step"', code):
                holders.append(str(path.relative_to(root)))
    if holders != ["runtime/planfile/function_names.h"]:
        problems.append(f'"train_step" is a literal in {holders} (planfile/function_names.h only)')
    measured = re.compile(r"\b\d+(\.\d+)? ?[GM]B/s\b|this VM|development (VM|machine)|"
                          r"on this machine")
    for top in ("compiler", "runtime", "tools", "frontends", "dialects"):
        for path in files(root, top):
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                comment = line.split("//", 1)[1] if "//" in line else ""
                if measured.search(comment):
                    problems.append(f"{path.relative_to(root)}:{number}: a measurement in a "
                                    "comment (docs/benchmarks.md keeps them)")
    for folder in SWITCH_FOLDERS:
        for path in files(root, *folder):
            for line, cases in switch_sizes(path.read_text(errors="replace")):
                if cases > MOST_CASES:
                    problems.append(f"{path.relative_to(root)}:{line}: a switch of {cases} "
                                    f"cases (at most {MOST_CASES}: give the op or kernel its "
                                    "own rule)")
    for p in problems:
        print(p)
    if not problems:
        print("layering holds")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
