"""Checks the source tree's layering rules.

usage: check_layering.py ROOT
- runtime/'s backend-neutral layers (exec, ops, plan, support, io) include nothing of
  runtime/cpu or runtime/cuda (the drivers above them, train and perf, may);
- no runtime file includes LLVM or MLIR (the runtime builds without them);
- compiler/lowering and compiler/pipeline_parallel do not both include each other;
- the tools are thin mains: every source file under tools/ has under 400 lines;
- the step functions' names are string literals in one header only (plan/function_names.h),
  not in the code that runs or builds them.
Prints what breaks a rule; exits 1 if anything does.
"""
import pathlib
import re
import sys

SOURCES = (".h", ".cc", ".cpp", ".cu", ".cuh", ".def")
NEUTRAL = ("exec", "ops", "plan", "support", "io")


def files(root, *parts):
    base = root.joinpath(*parts)
    return [p for p in base.rglob("*") if p.suffix in SOURCES and p.is_file()]


def includes(path):
    return re.findall(r'^\s*#include\s+"([^"]+)"', path.read_text(errors="replace"), re.M)


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
    if holders != ["runtime/plan/function_names.h"]:
        problems.append(f'"train_step" is a literal in {holders} (plan/function_names.h only)')
    for p in problems:
        print(p)
    if not problems:
        print("layering holds")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
