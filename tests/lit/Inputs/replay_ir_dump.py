"""Checks a `dtc compile --dump-ir` directory against dtc-opt.

Every dumped file must parse back into dtc-opt, and running the recorded pipeline
(pipeline.txt) on 00-import.mlir must print exactly the last file: the registered pipeline
reproduces the compile on textual IR. Prints one line per directory; exits 1 on a mismatch.
"""
import pathlib
import subprocess
import sys


def body(text):
    # The IR printer heads each dump with a comment naming the pass.
    return "\n".join(l for l in text.splitlines() if not l.startswith("// -----//")).strip()


def main(directory):
    root = pathlib.Path(directory)
    dumps = sorted(root.glob("[0-9][0-9]-*.mlir"))
    for dump in dumps:
        parsed = subprocess.run(["dtc-opt", str(dump), "-o", "/dev/null"], capture_output=True, text=True)
        if parsed.returncode != 0:
            print(f"{dump.name} does not parse back: {parsed.stderr.strip()}")
            return 1
    pipeline = (root / "pipeline.txt").read_text().strip()
    replay = subprocess.run(["dtc-opt", str(root / "00-import.mlir"), f"--pass-pipeline={pipeline}",
                             "-mlir-print-debuginfo", "-mlir-print-local-scope"], capture_output=True, text=True)
    if replay.returncode != 0:
        print(f"the recorded pipeline fails: {replay.stderr.strip()}")
        return 1
    if body(replay.stdout) != body(dumps[-1].read_text()):
        print(f"dtc-opt's output differs from {dumps[-1].name}")
        return 1
    print(f"{len(dumps)} dumps parse; the pipeline reproduces {dumps[-1].name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
