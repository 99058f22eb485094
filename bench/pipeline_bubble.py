"""Pipeline bubble, predicted against measured: a GPT on 2 pipeline stages (2 MPI processes, one
thread each) under GPipe, 1F1B and interleaved 1F1B for several micro-batch counts. The compiler
predicts the timeline from its cost model (`dtc compile` prints idle/busy); dtrun --trace
records every kernel call, from which the measured idle/busy is: per step, the step's span over
all ranks minus each rank's kernel time outside receives (receives are where a stage waits),
summed over ranks, over the summed kernel time. Balanced stages give (p-1)/(v*m).
Usage: bench/pipeline_bubble.sh [BUILD]"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

from common import tools

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
from dtc_harness import measured_bubble, write_tokens  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]
STEPS, SKIP = 8, 2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    a = parser.parse_args()
    dtc, dtrun = tools(a.build)
    configs = [("gpipe", m, 1) for m in (2, 4, 8)] + [("1f1b", m, 1) for m in (2, 4, 8)] + \
              [("interleaved", m, 2) for m in (4, 8)]
    with tempfile.TemporaryDirectory() as work:
        model, tokens = f"{work}/gpt.dtm", f"{work}/train.bin"
        subprocess.run([dtc, "zoo", "gpt", "--vocab", "256", "--ctx", "64", "--layers", "4", "--heads", "4",
                        "--embd", "128", "-o", model], check=True)
        write_tokens(tokens, np.random.default_rng(0).integers(0, 256, 100000).astype(np.int64))
        print("GPT (4 layers, 128 wide, context 64), batch 32, pp=2; idle/busy summed over ranks")
        print(f"{'schedule':>12} {'m':>3} {'v':>2} {'predicted':>10} {'measured':>9} {'(p-1)/(v*m)':>12}")
        for schedule, m, v in configs:
            plan, trace = f"{work}/p.dtp", f"{work}/trace.json"
            out = subprocess.run([dtc, "compile", model, "-o", plan, "--batch", "32", "--optimizer", "adamw",
                                  "--mesh", "pp=2", "--microbatches", str(m), "--schedule", schedule] +
                                 (["--virtual-stages", str(v)] if v > 1 else []),
                                 check=True, capture_output=True, text=True).stdout
            predicted = float(re.search(r"idle/busy ([0-9.]+)", out).group(1))
            subprocess.run(MPIRUN + ["2", dtrun, plan, "--data", tokens, "--steps", str(STEPS), "--threads", "1",
                                     "--trace", trace], check=True, stdout=subprocess.DEVNULL)
            print(f"{schedule:>12} {m:>3} {v:>2} {predicted:>10.3f} {measured_bubble(trace, STEPS, SKIP):>9.3f} "
                  f"{1 / (v * m):>12.3f}")


if __name__ == "__main__":
    main()
