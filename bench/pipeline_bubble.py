"""Pipeline bubble and step, predicted against measured: a GPT on 2 pipeline stages (2 MPI
processes, one thread each) under GPipe, 1F1B, interleaved 1F1B and the zero-bubble ZB-H1 and
ZB-V for several micro-batch counts.

- Bubble: the compiler predicts the timeline from its cost model (`dtc compile` prints
  idle/busy); dtrun --trace records every kernel call, from which the measured idle/busy is: per
  step, the step's span over all ranks minus each rank's kernel time outside receives (receives
  are where a stage waits), summed over ranks, over the summed kernel time. Balanced stages give
  (p-1)/(v*m) under textbook 1F1B.
- Step: `dtc inspect --profile` on a profile calibrated here (`dtrun --calibrate` on 2
  processes) predicts each plan's step; dtrun measures its median step over the steps after a
  warm-up. Each round calibrates again and runs every schedule, in turn: a shared machine's speed
  drifts over minutes, and a prediction is held against measurements of its own round. The
  medians over the rounds are compared.
Usage: bench/pipeline_bubble.sh [BUILD] [ROUNDS]"""
import argparse
import json
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
STEPS, SKIP, BATCH = 12, 3, 32
CONFIGS = [("gpipe", 4, 1), ("1f1b", 4, 1), ("zb-h1", 4, 1), ("interleaved", 4, 2), ("zb-v", 4, 2),
           ("gpipe", 8, 1), ("1f1b", 8, 1), ("zb-h1", 8, 1), ("interleaved", 8, 2), ("zb-v", 8, 2)]


def compile_plan(dtc, model, plan, schedule, m, v):
    flags = ["--virtual-stages", str(v)] if v > 1 else []
    out = subprocess.run([dtc, "compile", model, "-o", plan, "--batch", str(BATCH), "--optimizer", "adamw",
                          "--mesh", "pp=2", "--microbatches", str(m), "--schedule", schedule] + flags,
                         check=True, capture_output=True, text=True).stdout
    return float(re.search(r"idle/busy ([0-9.]+)", out).group(1))


def measure(dtrun, plan, tokens, work):
    """The measured idle/busy and the median step (ms) of one run."""
    trace, log = os.path.join(work, "trace.json"), os.path.join(work, "run.jsonl")
    subprocess.run(MPIRUN + ["2", dtrun, plan, "--data", tokens, "--steps", str(STEPS), "--threads", "1",
                             "--trace", trace, "--log", log], check=True, stdout=subprocess.DEVNULL)
    rates = [json.loads(line)["samples_per_s"] for line in open(log)][SKIP:]
    return measured_bubble(trace, STEPS, SKIP), 1000.0 * BATCH / float(np.median(rates))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    a = parser.parse_args()
    dtc, dtrun = tools(a.build)
    with tempfile.TemporaryDirectory() as work:
        model, tokens, profile = f"{work}/gpt.dtm", f"{work}/train.bin", f"{work}/here.json"
        subprocess.run([dtc, "zoo", "gpt", "--vocab", "256", "--ctx", "64", "--layers", "4", "--heads", "4",
                        "--embd", "128", "-o", model], check=True, stdout=subprocess.DEVNULL)
        write_tokens(tokens, np.random.default_rng(0).integers(0, 256, 100000).astype(np.int64))
        plans, bubble, rows = [], {}, {}
        for k, (schedule, m, v) in enumerate(CONFIGS):
            plans.append(f"{work}/p{k}.dtp")
            bubble[k] = compile_plan(dtc, model, plans[k], schedule, m, v)
        for _ in range(a.rounds):
            subprocess.run(MPIRUN + ["2", dtrun, "--calibrate", "-o", profile, "--name", "calibrated here"],
                           check=True, stdout=subprocess.DEVNULL)
            for k in range(len(CONFIGS)):
                info = json.loads(subprocess.run([dtc, "inspect", plans[k], "--json", "--profile", profile],
                                                 check=True, capture_output=True, text=True).stdout)
                measured_idle, step = measure(dtrun, plans[k], tokens, work)
                rows.setdefault(k, []).append((1000.0 * info["prediction"]["step_s"], step, measured_idle))
        print(f"GPT (4 layers, 128 wide, context 64), batch {BATCH}, pp=2 (one thread a process), "
              f"{a.rounds} rounds; idle/busy summed over ranks")
        print(f"{'schedule':>12} {'m':>3} {'v':>2} {'idle/busy':>10} {'measured':>9} "
              f"{'step pred.':>11} {'measured':>9} {'error':>7}")
        steps = {}
        for k, (schedule, m, v) in enumerate(CONFIGS):
            predicted = float(np.median([r[0] for r in rows[k]]))
            step = float(np.median([r[1] for r in rows[k]]))
            idle = float(np.median([r[2] for r in rows[k]]))
            steps[(schedule, m)] = step
            print(f"{schedule:>12} {m:>3} {v:>2} {bubble[k]:>10.3f} {idle:>9.3f} {predicted:>9.2f}ms "
                  f"{step:>7.2f}ms {100 * (predicted - step) / step:>+6.1f}%")
        for m in (4, 8):
            print(f"m={m}: zb-h1's measured step is {steps[('zb-h1', m)] / steps[('1f1b', m)]:.3f}x 1F1B's, "
                  f"zb-v's {steps[('zb-v', m)] / steps[('1f1b', m)]:.3f}x")


if __name__ == "__main__":
    main()
