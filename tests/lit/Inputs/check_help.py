"""Checks that the tools' --help and the documentation say the same: every flag a help text names
is in docs/command-line.md; every flag its dtc and dtrun sections name is one the tools take
(pass names and other programs' flags aside; either tool's section may name the other's); its
dtrun synopsis names exactly the flags of dtrun's usage; and a flag's choices (`--zero
0|1|2|3`) are the same wherever either lists them.

usage: check_help.py COMMAND_LINE.md DTC_HELP DTRUN_HELP PIPELINE_OPTIONS.def
(every pipeline option with a flag of its own in the .def is in dtc --help and the doc)
Prints what disagrees; exits 1 if anything does.
"""
import re
import sys

FLAG = r"(?<![\w-])--(?:\[no-\])?[a-z][a-z0-9-]*"
# Flags of other programs the README's sections mention beside dtc's and dtrun's.
OTHERS = {"--help", "--pass-pipeline", "--ntasks-per-node", "--allow-run-as-root", "--oversubscribe",
          "--logdir"}


def flags(text):
    out = set()
    for f in re.findall(FLAG, text):
        if f.startswith("--[no-]"):
            out |= {"--" + f[7:], "--no-" + f[7:]}
        else:
            out.add(f)
    return {f for f in out if not f.startswith("--dtc-")}


def choices(text):
    """{flag: {choice list}}: `--flag a|b|c` (README tables escape | as \\|)."""
    out = {}
    for m in re.finditer(r"(?<![\w-])(--[a-z][a-z0-9-]*)[ =]([\w.-]+(?:\\?\|[\w.-]+)+)", text):
        out.setdefault(m.group(1), set()).add(m.group(2).replace("\\|", "|"))
    return out


def section(text, start, end):
    i = text.index(start)
    return text[i:text.index(end, i)]


def main(doc_path, dtc_path, dtrun_path, options_path):
    readme = open(doc_path).read()
    dtc_help, dtrun_help = open(dtc_path).read(), open(dtrun_path).read()
    dtc_readme = section(readme, "## `dtc`", "## `dtrun`")
    dtrun_readme = readme[readme.index("## `dtrun`"):]
    problems = []
    for tool, helptext, own in (("dtc", dtc_help, dtc_readme), ("dtrun", dtrun_help, dtrun_readme)):
        for f in sorted(flags(helptext) - flags(readme)):
            problems.append(f"{tool} --help names {f}, docs/command-line.md does not")
        for f in sorted(flags(own) - flags(dtc_help) - flags(dtrun_help) - OTHERS):
            problems.append(f"docs/command-line.md's {tool} section names {f}, which {tool} --help does not")
        ours, theirs = choices(helptext), choices(own)
        for f in sorted(set(ours) & set(theirs)):
            for listed in sorted(theirs[f] - ours[f]):
                problems.append(f"{f}: docs/command-line.md lists {listed}, {tool} --help {' or '.join(sorted(ours[f]))}")
    # The options model: every pipeline option with a flag of its own is in the help and the doc.
    options = open(options_path).read()
    declared = re.findall(r'^DTC_OPTION\(\w+, \w+, "[^"]*", "([^"]+)"', options, re.M)
    if not declared:
        problems.append("driver/PipelineOptions.def declares no option with a flag")
    for flag in declared:
        if "--" + flag not in flags(dtc_help):
            problems.append(f"--{flag} (driver/PipelineOptions.def) is not in dtc --help")
        if "--" + flag not in flags(dtc_readme):
            problems.append(f"--{flag} (driver/PipelineOptions.def) is not in docs/command-line.md")
    # dtc compile's synopsis names the grouped options once, as OPTION: each is in its group.
    compile_usage = dtc_help[dtc_help.index("  dtc compile "):]
    compile_usage = compile_usage[:compile_usage.index("\n\n")]
    for flag in declared:
        if "--" + flag in flags(compile_usage):
            problems.append(f"dtc compile's synopsis names --{flag}, which its group lists")
    synopsis = re.search(r"`dtrun PLAN [^`]*`", dtrun_readme).group(0)
    usage = dtrun_help[:dtrun_help.index("dtrun --calibrate")]
    if flags(synopsis) != flags(usage):
        problems.append(f"docs/command-line.md's dtrun synopsis and dtrun's usage differ: "
                        f"only in the doc {sorted(flags(synopsis) - flags(usage))}, "
                        f"only in the usage {sorted(flags(usage) - flags(synopsis))}")
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print(f"help and docs agree: dtc {len(flags(dtc_help))} flags, dtrun {len(flags(dtrun_help))} flags, "
          f"{len(declared)} pipeline options")


if __name__ == "__main__":
    main(*sys.argv[1:5])
