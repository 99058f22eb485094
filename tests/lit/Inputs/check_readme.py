"""Checks the documented lists against what the tools register.

usage: check_readme.py ROOT OPS PASSES
  OPS     `dtc ops`: one model op type per line, then the attributes it takes
  PASSES  `dtc-opt --help`: the registered passes and pipelines (--dtc-*)
docs/writing-models.md's op list and docs/model-format.md's op table name every op type and
attribute the importer reads and no other; docs/command-line.md's dtc-opt paragraph names every
registered pass and no other; every directory the README's layout names exists, and every
directory of dialects/, compiler/ and runtime/ is in the layout.
Prints what disagrees; exits 1 if anything does.
"""
import pathlib
import re
import sys


def section(text, start, end):
    i = text.index(start)
    return text[i:text.index(end, i)]


def main(root, ops_path, passes_path):
    root = pathlib.Path(root)
    readme = (root / "README.md").read_text()
    model_format = (root / "docs" / "model-format.md").read_text()
    writing = (root / "docs" / "writing-models.md").read_text()
    command_line = (root / "docs" / "command-line.md").read_text()
    problems = []

    ops = {}
    for line in pathlib.Path(ops_path).read_text().split("\n"):
        if line.strip():
            name, *attributes = line.split()
            ops[name] = attributes
    op_list = section(writing, "Op types", "docs/model-format.md")
    named = set(re.findall(r"`([A-Z][A-Za-z]+)`", op_list))
    op_table = section(model_format, "## Op types", "\n## ")
    tabled = set(re.findall(r"^\| (`[A-Z].*?) \|", op_table, re.M))
    tabled = {op for cell in tabled for op in re.findall(r"`([A-Z][A-Za-z]+)`", cell)}
    for where, listed, text in (("docs/writing-models.md op list", named, op_list),
                                ("docs/model-format.md op table", tabled, op_table)):
        for op in sorted(set(ops) - listed):
            problems.append(f"{where} lacks {op}")
        for op in sorted(listed - set(ops)):
            problems.append(f"{where} names {op}, which dtc does not import")
        for op, attributes in ops.items():
            for attribute in attributes:
                if f"`{attribute}`" not in text:
                    problems.append(f"{where} lacks {op}'s attribute {attribute}")

    passes = set(re.findall(r"^\s+--(dtc-[a-z0-9-]+)\s", pathlib.Path(passes_path).read_text(), re.M))
    if not passes:
        problems.append("dtc-opt --help lists no dtc passes")
    pass_list = section(command_line, "`dtc-opt` is `mlir-opt`", "## `dtrun`")
    for name in sorted(passes):
        if f"`--{name}" not in pass_list:
            problems.append(f"docs/command-line.md's dtc-opt paragraph does not name --{name}")
    for name in sorted(set(re.findall(r"`--(dtc-[a-z0-9-]+)", pass_list)) - passes):
        problems.append(f"docs/command-line.md's dtc-opt paragraph names --{name}, which dtc-opt does not register")

    layout = section(readme, "## Layout", "```\n\n")
    for path in re.findall(r"^([a-z_]+/(?:[a-z_]+/)*)", layout, re.M):
        if not (root / path).is_dir():
            problems.append(f"README layout names {path}, which does not exist")
    for parent in ("dialects", "compiler", "runtime"):
        for child in sorted(p.name for p in (root / parent).iterdir() if p.is_dir()):
            if child in ("test",):
                continue
            if not re.search(rf"(^{parent}/{child}/|\b{child}/)", layout, re.M):
                problems.append(f"README layout does not mention {parent}/{child}/")

    for problem in problems:
        print(problem)
    if not problems:
        print(f"README agrees: {len(ops)} op types, {len(passes)} passes, layout")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
