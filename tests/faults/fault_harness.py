"""Helpers for the fault-injection suite: launch dtrun jobs in the background, find a rank's
process, wait for progress, and check that a failing job ends in time, says why in one line
and leaves its outputs whole. Run with /usr/bin/python3."""
import json
import math
import os
import signal
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from checkpoint_harness import wait_for as wait_until  # noqa: E402,F401
from dtc_harness import run, tool  # noqa: E402,F401

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def command(plan, devices, args):
    cmd = [tool("dtrun"), plan, "--threads", 1, *args]
    if devices > 1:
        cmd = MPIRUN + ["-np", devices] + cmd
    return [str(a) for a in cmd]


def mixed_command(per_rank):
    """mpirun's MPMD form: one (plan, args) per rank."""
    cmd = list(MPIRUN)
    for i, (plan, args) in enumerate(per_rank):
        if i:
            cmd.append(":")
        cmd += ["-np", "1", tool("dtrun"), plan, "--threads", "1", *args]
    return [str(a) for a in cmd]


def write_mlp_data(directory, samples, seed):
    """DIR/input.npy ([samples, 784] normal floats) and DIR/target.npy (10 classes) for the zoo's
    MLP, drawn from `seed`; returns (input, target)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, 784)).astype(np.float32)
    y = rng.integers(0, 10, samples).astype(np.int64)
    os.makedirs(directory, exist_ok=True)
    np.save(os.path.join(directory, "input.npy"), x)
    np.save(os.path.join(directory, "target.npy"), y)
    return x, y


def start(cmd, env=None, preexec_fn=None):
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env, preexec_fn=preexec_fn)


def finish(proc, bound, what):
    """Waits at most `bound` seconds; a job still running is a hang (killed, then an error)."""
    try:
        out, err = proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"{what}: still running after {bound} s (a hang)\n{out[-2000:]}\n{err[-2000:]}")
    return proc.returncode, out, err


def run_job(cmd, bound, what):
    return finish(start(cmd), bound, what)


def errors(err):
    """dtrun's error lines (mpirun adds its own banners around them)."""
    return [line for line in err.splitlines() if line.startswith("dtrun:")]


def expect_failure(result, code, needles, what):
    """Exit `code`, and an error line holding every needle."""
    rc, out, err = result
    lines = errors(err)
    assert rc == code, f"{what}: exit {rc}, expected {code}\n{out[-1500:]}\n{err[-3000:]}"
    assert any(all(n in line for n in needles) for line in lines), \
        f"{what}: no error line with {needles}:\n" + "\n".join(lines) + "\n" + err[-2000:]
    assert "Segmentation" not in err and "Bus error" not in err and "munmap" not in err, f"{what}: crashed\n{err}"


def kill_rank(proc, rank, bound, what):
    """kill -9 of `rank` in the job `proc` (mpirun), then its end within `bound` seconds:
    (the rank's pid, exit code, stdout, stderr, seconds from the kill to the end)."""
    pid = rank_pid(proc.pid, rank)
    assert pid, "no rank process found"
    begin = time.time()
    os.kill(pid, signal.SIGKILL)
    rc, out, err = finish(proc, bound, what)
    return pid, rc, out, err, time.time() - begin


def rank_pid(mpirun_pid, rank):
    """The process of `rank` in a job launched by mpirun (its OMPI_COMM_WORLD_RANK)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
        except OSError:
            continue
        if not argv0.endswith(b"dtrun"):
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() not in env:
            continue
        if belongs_to(int(entry), mpirun_pid):
            return int(entry)
    return None


def belongs_to(pid, ancestor):
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return False
    return False


def logged_steps(log):
    if not os.path.exists(log):
        return 0
    with open(log) as f:
        return sum(1 for line in f if line.endswith("\n") and '"loss"' in line)


def strict_json_lines(path):
    """Every line of a JSONL file parses as strict JSON (no NaN or Infinity)."""
    def refuse(token):
        raise ValueError(f"{path}: {token} is not JSON")
    entries = []
    with open(path) as f:
        for line in f:
            entries.append(json.loads(line, parse_constant=refuse))
    return entries


def finite_checkpoint(step_dir):
    """Every tensor of a checkpoint's files is finite."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
    import numpy as np
    import safetensors_np
    with open(os.path.join(step_dir, "index.json")) as f:
        index = json.load(f)
    for entry in index["files"]:
        for name, value in safetensors_np.load(os.path.join(step_dir, entry["name"])).items():
            if value.dtype.kind == "f" and not np.isfinite(value).all():
                return False
    return True


def is_nan_or_none(v):
    return v is None or (isinstance(v, float) and math.isnan(v))
