"""What a checkpoint costs training: GPT-2 124M with AdamW (about 1.5 GB of state) on the CPU,
trained without checkpoints, with a synchronous checkpoint every EVERY steps and with
--checkpoint-async, in one run (the modes interleaved, ROUNDS times).

A mode's stall per checkpoint, two ways:
- across runs (the goal's own terms): the time its steps took beyond the run without checkpoints,
  over the checkpoints between the first and the last step (the last step's checkpoint, written
  at once in every mode, falls outside), from the wall clock between the progress lines of the
  first and the last step as dtrun prints them; medians over the rounds. Runs of one mode drift
  by several percent on a shared machine, which is most of what this measures below 0.2 s.
- within each run: the two step intervals after each checkpoint (the checkpoint, or its snapshot
  and the step its background write runs beside; then the step whose end publishes it) against
  the other intervals of the same run. A run's drift cancels; the run without checkpoints,
  measured the same way, shows what is left of the noise.
The goal: the asynchronous stall within 10% of the synchronous one. Twice: training on every core
(the background copy and write then take time from it), and on one thread fewer, a core left
free as on a GPU node, whose cores mostly wait for the device."""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
from dtc_harness import write_tokens  # noqa: E402

STEPS, EVERY, ROUNDS = 17, 4, 2  # ROUNDS: the default of --rounds
SETTLE_S = 10  # after `sync`: write-back of the previous mode drains before the next starts
AFTER = 2  # step intervals after a checkpoint that carry its cost


def measure(dtrun, plan, tokens, directory, threads, rounds):
    """Each mode's step intervals (seconds between progress lines 1..STEPS), `rounds` times,
    interleaved. "async" copies the snapshot beside the next step (dtrun's default),
    "async-step" in the step, on every training thread (DTC_SNAPSHOT_COPY=step)."""
    every = ["--checkpoint-every", str(EVERY)]
    modes = {"none": (None, None), "sync": (every, None), "async": (every + ["--checkpoint-async"], None),
             "async-step": (every + ["--checkpoint-async"], "step")}
    intervals = {m: [] for m in modes}
    for _ in range(rounds):
        for mode, (flags, copy) in modes.items():
            ckpt = os.path.join(directory, f"ck-{mode}")
            shutil.rmtree(ckpt, ignore_errors=True)
            os.sync()
            time.sleep(SETTLE_S)
            cmd = [dtrun, plan, "--data", tokens, "--steps", str(STEPS), "--threads", str(threads)]
            if flags:
                cmd += ["--checkpoint", ckpt] + flags
            env = dict(os.environ)
            env.pop("DTC_SNAPSHOT_COPY", None)
            if copy:
                env["DTC_SNAPSHOT_COPY"] = copy
            intervals[mode].append(step_intervals(cmd, env))
            shutil.rmtree(ckpt, ignore_errors=True)
    return intervals


def step_intervals(cmd, env):
    """{step: seconds from the previous step's progress line to this one's}, steps 2..STEPS."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    stamps = {}
    for line in proc.stdout:
        if line.startswith("step "):
            stamps[int(line.split()[1].split("/")[0])] = time.monotonic()
    if proc.wait() != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed")
    return {s: stamps[s] - stamps[s - 1] for s in range(2, STEPS + 1)}


def carries_checkpoint(step):
    """Whether the interval ending at `step`'s progress line carries a checkpoint's cost."""
    since = (step - 1) % EVERY  # steps since the last checkpoint, before this one
    return step > EVERY and since < AFTER


def paired_stall(run):
    """A run's seconds per checkpoint beyond its own clean intervals (see the module's text)."""
    clean = [s for step, s in run.items() if not carries_checkpoint(step)]
    carrying = [s for step, s in run.items() if carries_checkpoint(step)]
    checkpoints = (STEPS - 1) // EVERY
    return (sum(carrying) - len(carrying) * statistics.mean(clean)) / checkpoints


def report(intervals, threads):
    checkpoints = (STEPS - 1) // EVERY
    totals = {m: [sum(run.values()) for run in runs] for m, runs in intervals.items()}
    base = statistics.median(totals["none"])
    print(f"{threads} training thread(s) on {os.cpu_count()} cores:")
    across, within = {}, {}
    for mode, runs in intervals.items():
        s = statistics.median(totals[mode])
        across[mode] = (s - base) / checkpoints
        pairs = [paired_stall(run) for run in runs]
        within[mode] = statistics.median(pairs)
        clean = [statistics.mean(s for step, s in run.items() if not carries_checkpoint(step)) for run in runs]
        extra = f", {across[mode]:.3f} s stalled per checkpoint across runs" if mode != "none" else ""
        print(f"  {mode:10s} {s:7.2f} s for steps 2..{STEPS} ({s / (STEPS - 1):.3f} s a step){extra}  "
              f"(rounds: {', '.join(f'{x:.2f}' for x in totals[mode])})")
        print(f"  {'':10s} within each run: {within[mode]:.3f} s per checkpoint "
              f"(rounds: {', '.join(f'{x:.3f}' for x in pairs)}); the intervals that carry no "
              f"checkpoint: {', '.join(f'{x:.3f}' for x in clean)} s")
    for mode in (m for m in intervals if m.startswith("async")):
        print(f"  {mode} stall / synchronous: {across[mode] / across['sync']:.3f} across runs, "
              f"{within[mode] / within['sync']:.3f} within each run (goal: <= 0.10)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--dir", required=True, help="where checkpoints are written")
    p.add_argument("--rounds", type=int, default=ROUNDS)
    p.add_argument("--threads", type=int, nargs="*",
                   help="training threads of each pass (default: every core, then one fewer)")
    a = p.parse_args()
    dtc, dtrun = (os.path.join(a.build, "tools", t, t) for t in ("dtc", "dtrun"))
    os.makedirs(a.dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        model, plan, tokens = (os.path.join(work, n) for n in ("gpt2.dtm", "gpt2.dtp", "train.bin"))
        subprocess.run([dtc, "zoo", "gpt", "--vocab", "50257", "--ctx", "128", "--layers", "12", "--heads",
                        "12", "--embd", "768", "-o", model], check=True)
        subprocess.run([dtc, "compile", model, "-o", plan, "--batch", "2", "--optimizer", "adamw"], check=True,
                       capture_output=True)
        write_tokens(tokens, np.random.default_rng(0).integers(0, 50257, 100000).astype(np.int64))
        print(f"GPT-2 124M, AdamW, batch 2 x 128 tokens, {STEPS} steps, a checkpoint every {EVERY} "
              f"({(STEPS - 1) // EVERY} between the first and the last step), {a.rounds} rounds, medians:")
        cores = os.cpu_count()
        for threads in a.threads or (cores, max(1, cores - 1)):
            report(measure(dtrun, plan, tokens, a.dir, threads, a.rounds), threads)


if __name__ == "__main__":
    main()
