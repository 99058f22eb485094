"""Checks that the design documents name only paths that exist, and that design.md stays short.

usage: check_doc_paths.py ROOT DOC.md [DOC.md ...]
What counts as a repository path, in each DOC:
- every word of an inline code span (`...`) that contains a `/` and either starts with one of
  the top-level folders (compiler, dialects, frontends, runtime, tools, tests, bench, scripts,
  docs, profiles, fuzz) or ends in a source or document extension (.cpp .cc .h .cuh .cu .td .def
  .inc .py .sh .md .fbs .json .txt .cmake .dict): it is checked as a path relative to ROOT, so
  a doc writes `runtime/ops/kernels.def`, never `ops/kernels.def`;
- in fenced code blocks (```), every word that starts with a top-level folder and a `/`
  (trailing punctuation dropped);
- a word ending in `/` names a folder, any other a file or a folder;
- a trailing `:LINE`, `:LINE-LINE` or `#anchor` is dropped before the check;
- words with glob characters (`*`, `?`, `[`), placeholders (`<...>`, `{...}`, `$`, `...`, `…`),
  URLs (`://`) or a leading `/` (absolute paths) are not repository paths and are skipped;
- a word under `build/` is build output, not part of the repository, and is reported.
Markdown links [text](target) to a relative target are checked relative to the doc's folder,
and a `#anchor` on a link to a .md file must be the slug of one of that file's headings.
Every line of every DOC is at most 100 columns, and docs/design.md (under ROOT, and any DOC named
design.md) has at most 600 lines.
Prints each problem with its doc and line; exits 1 if there is any, else prints
`doc paths exist: N paths in M docs` (N distinct paths checked) and exits 0.
"""
import pathlib
import re
import sys

TOP = ("compiler", "dialects", "frontends", "runtime", "tools", "tests", "bench", "scripts",
       "docs", "profiles", "fuzz")
EXTENSIONS = (".cpp", ".cc", ".h", ".cuh", ".cu", ".td", ".def", ".inc", ".py", ".sh", ".md",
              ".fbs", ".json", ".txt", ".cmake", ".dict")
MOST_LINES = 600
MOST_COLUMNS = 100
SKIP = re.compile(r"[*?\[<>{}$]|\.\.\.|…|://")
TOP_WORD = re.compile(r"(?<![\w./-])((?:%s)/[\w./+-]*)" % "|".join(TOP))


def strip_suffix(word):
    word = word.split("#", 1)[0]
    return re.sub(r":\d+(-\d+)?$", "", word)


def is_path(word):
    if "/" not in word or SKIP.search(word) or word.startswith("/"):
        return False
    if word.startswith("build/"):
        return True
    return word.split("/", 1)[0] in TOP or word.endswith(EXTENSIONS)


def slug(heading):
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def headings(path):
    slugs = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            slugs.add(slug(line.lstrip("#")))
    return slugs


def check(root, doc, problems, checked):
    lines = doc.read_text(encoding="utf-8").splitlines()
    prose = []
    fenced = False
    found = []  # (line number, word)
    for number, line in enumerate(lines, 1):
        if len(line) > MOST_COLUMNS:
            problems.append(f"{doc}:{number}: {len(line)} columns (at most {MOST_COLUMNS})")
        if line.startswith("```"):
            fenced = not fenced
            prose.append("")
        elif fenced:
            prose.append("")
            found += [(number, m.group(1).rstrip(".,;:)")) for m in TOP_WORD.finditer(line)]
        else:
            prose.append(line)
    text = "\n".join(prose)

    def line_of(match):
        return text.count("\n", 0, match.start()) + 1

    # A code span may continue on the next line of its paragraph, never past a blank line.
    for m in re.finditer(r"`([^`]+)`", text):
        if "\n\n" not in m.group(1):
            found += [(line_of(m), word.rstrip(",;")) for word in m.group(1).split()]
    for number, word in found:
        word = strip_suffix(word)
        if not is_path(word):
            continue
        if word.startswith("build/"):
            problems.append(f"{doc}:{number}: {word} is build output, not a repository path")
            continue
        checked.add(word)
        target = root / word
        if not (target.is_dir() if word.endswith("/") else target.exists()):
            problems.append(f"{doc}:{number}: {word} does not exist")
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = m.group(1)
        if SKIP.search(target) or target.startswith(("/", "mailto:")):
            continue
        file_part, _, anchor = target.partition("#")
        path = (doc.parent / file_part).resolve() if file_part else doc.resolve()
        where = f"{doc}:{line_of(m)}: link {target}"
        if not path.exists():
            problems.append(f"{where}: {file_part} does not exist")
        elif anchor and path.suffix == ".md" and anchor not in headings(path):
            problems.append(f"{where}: no heading #{anchor} in {path.name}")
    return len(lines)


def main(root, docs):
    root = pathlib.Path(root)
    problems = []
    checked = set()
    design = (root / "docs" / "design.md").resolve()
    lengths = {}
    for name in docs:
        doc = pathlib.Path(name)
        if not doc.is_file():
            problems.append(f"{doc}: no such document")
            continue
        lengths[doc.resolve()] = check(root, doc, problems, checked)
    if design.is_file() and design not in lengths:
        lengths[design] = len(design.read_text(encoding="utf-8").splitlines())
    for path, count in lengths.items():
        if (path == design or path.name == "design.md") and count > MOST_LINES:
            problems.append(f"{path}: {count} lines (design.md has at most {MOST_LINES})")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"doc paths exist: {len(checked)} paths in {len(docs)} docs")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
