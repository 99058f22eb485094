"""Faults of a rank, under dp=2 and pp=2: nothing hangs, the report names the rank and what it
did, and what was written stays whole.

- kill -9 of one rank at a random step: dtrun names the dead rank (pid, host, the call the
  survivor waited in) within 30 s; the last checkpoint is loadable, the log is JSON;
- SIGSTOP of one rank: after --collective-timeout the job ends (exit 3) with a report naming
  the ranks that arrived and the stopped one, and every live rank's flight recorder;
- SIGTERM of one rank: every rank stops after the same step with a checkpoint (exit 143);
- ranks given different plans, flags or data: one error naming the field and the ranks, before
  step 1 (exit 2), instead of diverged replicas, a hang or a crash in MPI."""
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_harness import (command, expect_failure, finish, kill_rank, logged_steps, mixed_command, rank_pid,  # noqa: E402
                           run, run_job, start, strict_json_lines, tool, wait_until, write_mlp_data)

LONG = 100000  # steps: the runs below end by the fault, not by finishing


def make_plans(work):
    data = os.path.join(work, "data")
    write_mlp_data(data, 96, seed=0)
    model = os.path.join(work, "mlp.dtm")
    run(tool("dtc"), "zoo", "mlp", "--seed", 5, "-o", model)
    plans = {}
    for name, flags in {"dp2": ["--mesh", "dp=2"], "pp2": ["--mesh", "pp=2", "--microbatches", 4],
                        "dp2-b16": ["--mesh", "dp=2", "--batch", 16], "dp2-adamw": ["--mesh", "dp=2", "--optimizer", "adamw"]}.items():
        plans[name] = os.path.join(work, f"{name}.dtp")
        batch = [] if "--batch" in flags else ["--batch", 32]
        run(tool("dtc"), "compile", model, "-o", plans[name], *batch, *flags)
    return plans, data


def launch_long(plan, data, work, name, extra=()):
    log = os.path.join(work, f"{name}.jsonl")
    ckpt = os.path.join(work, f"{name}-ckpt")
    # --keep: a run of LONG steps keeping every checkpoint would need room for all of them.
    args = ["--data", data, "--steps", LONG, "--log", log, "--checkpoint", ckpt, "--checkpoint-every", 5,
            "--keep", 3, *extra]
    return start(command(plan, 2, args)), log, ckpt


def at_random_step(proc, log, rng, what):
    step = int(rng.integers(3, 40))
    wait_until(lambda: logged_steps(log) >= step or proc.poll() is not None, 60, f"{what}: step {step}")
    assert proc.poll() is None, f"{what}: ended before the fault"
    return step


def check_outputs(log, ckpt, what):
    entries = strict_json_lines(log)
    assert entries, f"{what}: empty log"
    latest = os.path.join(ckpt, "latest")
    if os.path.islink(latest):
        step_dir = os.path.join(ckpt, os.readlink(latest))
        with open(os.path.join(step_dir, "index.json")) as f:
            json.load(f)  # complete and parseable: what --resume reads


def check_kill(plans, data, work, rng):
    for layout in ("dp2", "pp2"):
        victim = int(rng.integers(0, 2))
        proc, log, ckpt = launch_long(plans[layout], data, work, f"kill-{layout}")
        at_random_step(proc, log, rng, f"kill -9 ({layout})")
        pid, rc, out, err, took = kill_rank(proc, victim, 30, f"kill -9 of rank {victim} ({layout})")
        assert rc != 0, f"kill -9 ({layout}): exit 0"
        lines = [line for line in err.splitlines() if line.startswith("dtrun:")]
        named = [line for line in lines if f"rank {victim} (pid {pid}" in line and "died" in line]
        assert named, f"kill -9 ({layout}): dtrun did not name rank {victim}:\n{err[-3000:]}"
        assert took < 30, took
        check_outputs(log, ckpt, f"kill -9 ({layout})")
        print(f"kill -9 rank {victim} ({layout}): exit {rc} in {took:.1f} s: {named[0]}")


def check_stop(plans, data, work, rng):
    timeout = 3
    for layout in ("dp2", "pp2"):
        victim = int(rng.integers(0, 2))
        proc, log, ckpt = launch_long(plans[layout], data, work, f"stop-{layout}",
                                      ["--collective-timeout", timeout])
        at_random_step(proc, log, rng, f"SIGSTOP ({layout})")
        pid = rank_pid(proc.pid, victim)
        begin = time.time()
        os.kill(pid, signal.SIGSTOP)
        result = finish(proc, timeout + 30, f"SIGSTOP of rank {victim} ({layout})")
        took = time.time() - begin
        survivor = 1 - victim
        expect_failure(result, 3, [f"rank {survivor} waited", "--collective-timeout", f"arrived: rank {survivor}",
                                   f"not arrived: rank {victim}", "is stopped (SIGSTOP)"],
                       f"SIGSTOP ({layout})")
        # The survivor's flight recorder: its last calls, the one it waited in without an end.
        flight = os.path.join(work, f"stop-{layout}.flight-rank{survivor}.json")
        with open(flight) as f:
            record = json.load(f)
        assert record["rank"] == survivor and record["calls"], flight
        assert record["calls"][-1]["end"] is None, record["calls"][-1]
        check_outputs(log, ckpt, f"SIGSTOP ({layout})")
        line = [x for x in result[2].splitlines() if "waited" in x][0]
        print(f"SIGSTOP rank {victim} ({layout}): exit 3 in {took:.1f} s (timeout {timeout} s): {line}")


def check_term(plans, data, work, rng):
    for layout in ("dp2", "pp2"):
        victim = int(rng.integers(0, 2))
        proc, log, ckpt = launch_long(plans[layout], data, work, f"term-{layout}")
        at_random_step(proc, log, rng, f"SIGTERM ({layout})")
        os.kill(rank_pid(proc.pid, victim), signal.SIGTERM)
        rc, out, err = finish(proc, 30, f"SIGTERM of rank {victim} ({layout})")
        assert rc == 143, f"SIGTERM ({layout}): exit {rc}\n{err[-2000:]}"
        stopped = [line for line in err.splitlines() if "stopped by SIGTERM after step" in line]
        assert stopped, err[-2000:]
        step = int(stopped[0].split("after step ")[1].split()[0].rstrip(";"))
        assert os.path.realpath(os.path.join(ckpt, "latest")).endswith(f"step-{step}"), os.listdir(ckpt)
        check_outputs(log, ckpt, f"SIGTERM ({layout})")
        print(f"SIGTERM rank {victim} ({layout}): exit 143, checkpoint step-{step}")


def check_disagreement(plans, data, work):
    other = os.path.join(work, "data-other")
    shutil.copytree(data, other)
    x = np.load(os.path.join(other, "input.npy"))
    x[7, 7] += 1
    np.save(os.path.join(other, "input.npy"), x)
    base = ["--data", data, "--steps", 4]
    cases = [
        ("another plan", [(plans["dp2"], base), (plans["dp2-adamw"], base)], ["disagree on the plan"]),
        ("another batch", [(plans["dp2"], base), (plans["dp2-b16"], base)], ["disagree on the plan", "batch 16"]),
        ("dp and pp", [(plans["dp2"], base), (plans["pp2"], base)], ["disagree on the plan", "mesh pp=2"]),
        ("--steps", [(plans["dp2"], base), (plans["dp2"], ["--data", data, "--steps", 5])],
         ["disagree on --steps", "rank 0: 4", "rank 1: 5"]),
        ("--seed", [(plans["dp2"], base + ["--seed", 1]), (plans["dp2"], base + ["--seed", 2])],
         ["disagree on --seed"]),
        ("data", [(plans["dp2"], base), (plans["dp2"], ["--data", other, "--steps", 4])],
         ["disagree on --data", "input.npy"]),
        ("a bad flag", [(plans["dp2"], base), (plans["dp2"], base + ["--bogus"])],
         ["rank 1: unknown option --bogus"]),
    ]
    for what, per_rank, needles in cases:
        begin = time.time()
        result = run_job(mixed_command(per_rank), 30, what)
        expect_failure(result, 2, needles, f"ranks with {what}")
        assert "step " not in result[1], f"{what}: trained before agreeing:\n{result[1]}"
        print(f"ranks with {what}: exit 2 in {time.time() - begin:.1f} s: {[x for x in result[2].splitlines() if x.startswith('dtrun:')][0]}")


def main():
    rng = np.random.default_rng(int(os.environ.get("DTC_FAULT_SEED", random.randrange(1 << 30))))
    with tempfile.TemporaryDirectory() as work:
        plans, data = make_plans(work)
        check_disagreement(plans, data, work)
        check_kill(plans, data, work, rng)
        check_stop(plans, data, work, rng)
        check_term(plans, data, work, rng)
    print("rank faults: OK")


if __name__ == "__main__":
    main()
