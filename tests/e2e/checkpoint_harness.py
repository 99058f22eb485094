"""Helpers for the checkpoint tests: compile and run plans on 1..8 MPI processes, crash them on
purpose (DTC_FAULT, runtime/support/fault_points.h), read checkpoints and compare runs."""
import json
import os
import signal
import subprocess
import time

import numpy as np

from dtc_harness import load_safetensors, read_log, run, tool

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]


def devices_of(flags):
    """Processes a plan compiled with `flags` runs on: the product of its --mesh sizes."""
    if "--mesh" not in flags:
        return 1
    n = 1
    for axis in str(flags[flags.index("--mesh") + 1]).split(","):
        n *= int(axis.split("=")[1])
    return n


def compile_plan(model, work, name, batch, flags):
    plan = os.path.join(work, f"{name}.dtp")
    run(tool("dtc"), "compile", model, "-o", plan, "--batch", batch, *flags)
    return plan


def dtrun_command(plan, devices, args, fault=None, switches=()):
    cmd = [tool("dtrun"), plan, "--threads", 1, *args]
    if devices > 1:
        exported = (["DTC_FAULT"] if fault else []) + list(switches)
        cmd = MPIRUN + [devices] + [a for name in exported for a in ("-x", name)] + cmd
    return [str(a) for a in cmd]


def dtrun(plan, devices, args, fault=None, expect_ok=True, timeout=180, switches=None):
    """Runs dtrun (under mpirun for devices > 1); `fault` sets DTC_FAULT for every rank, `switches`
    ({name: value}) other DTC_* switches."""
    env = dict(os.environ)
    env.pop("DTC_FAULT", None)
    if fault:
        env["DTC_FAULT"] = fault
    env.update(switches or {})
    proc = subprocess.run(dtrun_command(plan, devices, args, fault, switches or {}), capture_output=True,
                          text=True, env=env, timeout=timeout)
    if expect_ok and proc.returncode != 0:
        raise RuntimeError(f"dtrun {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def losses(log):
    return [(e["step"], e["loss"]) for e in read_log(log)]


def weights(save_dir):
    """The tensors of a --save folder: model.safetensors, or the shards its index maps."""
    index = os.path.join(save_dir, "model.safetensors.index.json")
    if not os.path.exists(index):
        return load_safetensors(os.path.join(save_dir, "model.safetensors"))
    with open(index) as f:
        weight_map = json.load(f)["weight_map"]
    state = {}
    for file in sorted(set(weight_map.values())):
        part = load_safetensors(os.path.join(save_dir, file))
        assert sorted(part) == sorted(k for k, v in weight_map.items() if v == file), file
        state.update(part)
    return state


def same_weights(a, b):
    return sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)


def index_of(step_dir):
    with open(os.path.join(step_dir, "index.json")) as f:
        return json.load(f)


def latest_step(ckpt):
    """The step `latest` names, or None."""
    link = os.path.join(ckpt, "latest")
    if not os.path.islink(link):
        return None
    return int(os.readlink(link).split("-")[1])


def saved_tensor(step_dir, name):
    """Tensor `name` of a checkpoint, assembled from its slices (whatever wrote them)."""
    index = index_of(step_dir)
    info = index["tensors"][name]
    whole = None
    for s in info["slices"]:
        piece = load_safetensors(os.path.join(step_dir, index["files"][s["file"]]["name"]))[s["key"]]
        if whole is None:
            whole = np.zeros(info["shape"], dtype=piece.dtype)
        region = tuple(slice(o, o + n) for o, n in zip(s["offsets"], s["shape"]))
        whole[region] = piece
    return whole


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


def kill_during_write(cmd, step_tmp, delay):
    """Starts `cmd` (a dtrun writing checkpoints), waits until the write of `step_tmp` (a
    step-<N>.tmp directory) has begun, then kill -9s the job `delay` seconds later."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: os.path.isdir(step_tmp), 60, f"the write of {os.path.basename(step_tmp)}")
        time.sleep(delay())
    finally:
        kill_group(proc)
        proc.wait()


def kill_group(proc, sig=signal.SIGKILL):
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
