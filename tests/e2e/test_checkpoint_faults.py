"""Checkpoints under failure: nothing written is lost, nothing damaged is loaded.

- kill -9 in the middle of a checkpoint write (halfway through a rank's file, before the index,
  before `latest` moves; DTC_FAULT) and at random moments from outside: the previous checkpoint
  stays loadable, --resume uses it, the next run removes the leftovers, and the continuation is
  bit-identical to the run that never crashed;
- SIGTERM to one rank of two: both finish the same step, write a checkpoint, exit 143; SIGINT
  on one process: exit 130; both resume exactly;
- a corrupted, truncated or incomplete checkpoint is a one-line error naming the file;
- every output and input path is checked before step 1;
- --keep K keeps the K newest steps."""
import os
import random
import signal
import subprocess
import sys
import tempfile
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from checkpoint_harness import (compile_plan, dtrun, dtrun_command, index_of, kill_during_write,  # noqa: E402
                                kill_group, latest_step, losses, same_weights, wait_for, weights)
from dtc_harness import run, tool  # noqa: E402
from test_data_parallel import make_models  # noqa: E402

ADAMW = ["--optimizer", "adamw", "--lr", 2e-3, "--eps", 1e-4]


def reference(plan, devices, data, steps, work, name):
    log, save = os.path.join(work, f"{name}-ref.jsonl"), os.path.join(work, f"{name}-ref")
    dtrun(plan, devices, ["--data", data, "--steps", steps, "--seed", 3, "--log", log, "--save", save])
    return losses(log), weights(save)


def leftovers(ckpt):
    return sorted(n for n in os.listdir(ckpt) if ".tmp" in n or n.endswith(".old"))


def check_injected_kills(work, plan, data):
    """dp=2: the job dies at each dangerous point of the second checkpoint's write (step 4)."""
    ref = reference(plan, 2, data, 6, work, "kill")
    probe = os.path.join(work, "kill-probe")
    dtrun(plan, 2, ["--data", data, "--steps", 2, "--seed", 3, "--checkpoint", probe])
    index = index_of(os.path.join(probe, "step-2"))
    writer = [f["rank"] for f in index["files"]]
    rank1_pieces = sum(writer[s["file"]] == 1 for t in index["tensors"].values() for s in t["slices"])
    # checkpoint-file is reached after each piece a rank writes: the first piece of the second
    # checkpoint leaves rank 1's file half-written.
    faults = [("file", f"checkpoint-file@1#{rank1_pieces + 1}", "step-4.tmp"),
              ("index", "checkpoint-index@0#2", "step-4.tmp"),
              ("latest", "checkpoint-latest@0#2", None)]
    for name, fault, leftover in faults:
        ckpt, log, save = (os.path.join(work, f"kill-{name}-{s}") for s in ("ckpt", "log.jsonl", "final"))
        command = ["--data", data, "--steps", 6, "--seed", 3, "--log", log, "--save", save,
                   "--checkpoint", ckpt, "--checkpoint-every", 2]
        crashed = dtrun(plan, 2, command, fault=fault, expect_ok=False)
        assert crashed.returncode != 0, (name, crashed.stdout)
        assert latest_step(ckpt) == 2, (name, os.listdir(ckpt))
        if leftover:
            assert leftovers(ckpt) == [leftover], (name, os.listdir(ckpt))
        else:  # the step is complete and in place; `latest` had not moved yet
            assert os.path.exists(os.path.join(ckpt, "step-4", "index.json")), os.listdir(ckpt)
        out = dtrun(plan, 2, command + ["--resume", ckpt]).stdout
        assert "resumed at step 2" in out, out
        assert leftovers(ckpt) == [], (name, os.listdir(ckpt))
        assert losses(log) == ref[0] and same_weights(weights(save), ref[1]), f"kill at {name}: continuation differs"
        print(f"kill -9 at {fault}: latest stayed at step 2, leftovers {leftover or 'none'} removed, "
              "the resumed run is bit-identical")


def verify_checkpoint(step_dir):
    """Every file's and piece's CRC-32 as the index records them (Python's zlib)."""
    index = index_of(step_dir)
    for f in index["files"]:
        with open(os.path.join(step_dir, f["name"]), "rb") as h:
            assert zlib.crc32(h.read()) == f["crc32"], f


def check_random_kills(work, model, data):
    """kill -9 from outside, at a random moment after a checkpoint write has begun."""
    plan = compile_plan(model, work, "big", 32, ADAMW)  # ~40 MB of state per checkpoint
    rng = random.Random(7)
    for trial in range(3):
        ckpt = os.path.join(work, f"random-{trial}")
        cmd = dtrun_command(plan, 1, ["--data", data, "--steps", 1000, "--seed", 3, "--checkpoint", ckpt,
                                      "--checkpoint-every", 1])
        # Wait for a write to start (step 2, 3 or 4), then kill at a random moment of it.
        kill_during_write(cmd, os.path.join(ckpt, f"step-{2 + trial}.tmp"), lambda: rng.uniform(0, 0.3))
        latest = latest_step(ckpt)
        left = leftovers(ckpt)
        assert latest is not None and latest >= 1 + trial, os.listdir(ckpt)
        verify_checkpoint(os.path.join(ckpt, f"step-{latest}"))
        out = dtrun(plan, 1, ["--data", data, "--steps", latest + 1, "--checkpoint", ckpt, "--resume", ckpt]).stdout
        assert f"resumed at step {latest}" in out and leftovers(ckpt) == [], (out, os.listdir(ckpt))
        print(f"kill -9 from outside during step-{2 + trial}'s write: latest step-{latest} intact "
              f"(CRC-32 checked), leftovers {left or 'none'} removed on resume")


def rank_pids(parent, plan):
    """{rank: pid} of dtrun processes under `parent` (mpirun) running `plan`."""
    ranks = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and plan.encode() in cmdline and b"OMPI_COMM_WORLD_RANK" in env:
            ranks[int(env[b"OMPI_COMM_WORLD_RANK"])] = int(pid)
    return ranks


def check_stop_signals(work, plan, data):
    """SIGTERM to rank 1 only: every rank stops after the same step with a checkpoint."""
    ckpt, log = os.path.join(work, "term-ckpt"), os.path.join(work, "term.jsonl")
    cmd = dtrun_command(plan, 2, ["--data", data, "--steps", 100000, "--seed", 3, "--log", log,
                                  "--checkpoint", ckpt])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for(lambda: os.path.exists(log) and len(losses(log)) >= 3, 60, "three steps")
        wait_for(lambda: len(rank_pids(proc.pid, plan)) == 2, 10, "both ranks")
        os.kill(rank_pids(proc.pid, plan)[1], signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        kill_group(proc)
    stopped = losses(log)[-1][0]
    assert proc.returncode == 128 + signal.SIGTERM, (proc.returncode, err)
    assert f"stopped by SIGTERM after step {stopped}" in err, err
    assert latest_step(ckpt) == stopped, (stopped, os.listdir(ckpt))
    index = index_of(os.path.join(ckpt, f"step-{stopped}"))
    assert sorted(f["rank"] for f in index["files"]) == [0, 1] and index["progress"]["step"] == stopped
    # Resume to three steps past the stop; equal to the run that never stopped.
    total = stopped + 3
    ref_losses, ref_final = reference(plan, 2, data, total, work, "term")
    save = os.path.join(work, "term-final")
    dtrun(plan, 2, ["--data", data, "--steps", total, "--log", log, "--save", save, "--resume", ckpt])
    assert losses(log) == ref_losses and same_weights(weights(save), ref_final)
    print(f"SIGTERM to rank 1 of 2: both ranks stopped after step {stopped}, checkpoint written, exit "
          f"{proc.returncode}; resumed to step {total} bit-identical")

    single = compile_plan(os.path.join(work, "mlp.dtm"), work, "int", 32, ADAMW)
    ckpt = os.path.join(work, "int-ckpt")
    log = os.path.join(work, "int.jsonl")
    proc = subprocess.Popen(dtrun_command(single, 1, ["--data", data, "--steps", 100000, "--log", log,
                                                      "--checkpoint", ckpt]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: os.path.exists(log) and len(losses(log)) >= 2, 60, "two steps")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT and latest_step(ckpt) == losses(log)[-1][0], (proc.returncode, err)
    print(f"SIGINT: exit {proc.returncode}, {err.strip()}")


def expect_error(plan, devices, args, fragment, work):
    proc = dtrun(plan, devices, args, expect_ok=False)
    assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
    assert fragment in proc.stderr, (fragment, proc.stderr)
    assert "step " not in proc.stdout, f"trained before finding a bad path: {proc.stdout}"
    lines = [line for line in proc.stderr.splitlines() if line.startswith("dtrun: error")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def check_damaged(work, plan, data):
    """A checkpoint whose bytes changed is refused, naming the file."""
    good = os.path.join(work, "good-ckpt")
    dtrun(plan, 2, ["--data", data, "--steps", 2, "--seed", 3, "--checkpoint", good])
    step = os.path.join(good, "step-2")

    def damaged(name, change):
        copy = os.path.join(work, f"damaged-{name}")
        subprocess.run(["cp", "-r", step, copy], check=True)
        change(copy)
        return copy

    def flip(path, offset):
        with open(path, "r+b") as f:
            f.seek(offset)
            byte = f.read(1)
            f.seek(offset)
            f.write(bytes([byte[0] ^ 0x40]))

    size = os.path.getsize(os.path.join(step, "rank-00001.safetensors"))
    cases = [("flipped", lambda d: flip(os.path.join(d, "rank-00001.safetensors"), size - 5),
              "rank-00001.safetensors is corrupted"),
             ("truncated", lambda d: os.truncate(os.path.join(d, "rank-00000.safetensors"), 1000),
              "rank-00000.safetensors is truncated or damaged"),
             ("missing", lambda d: os.remove(os.path.join(d, "rank-00001.safetensors")), "is incomplete"),
             ("index", lambda d: flip(os.path.join(d, "index.json"), 30), "index.json")]
    for name, change, fragment in cases:
        line = expect_error(plan, 2, ["--data", data, "--steps", 4, "--resume", damaged(name, change)], fragment, work)
        print(f"damaged checkpoint ({name}): {line}")


def check_paths(work, plan, data):
    """Bad outputs and inputs fail before step 1, in one line."""
    a_file = os.path.join(work, "a-file")
    open(a_file, "w").close()
    missing = os.path.join(work, "missing", "x")
    cases = [(["--checkpoint", a_file], "--checkpoint"), (["--save", os.path.join(a_file, "out")], "--save"),
             (["--log", missing], "--log"), (["--trace", missing], "--trace"),
             (["--resume", missing], "--resume"), (["--init", missing], missing),
             (["--eval", missing], missing), (["--checkpoint-every", 2], "need --checkpoint")]
    for extra, fragment in cases:
        line = expect_error(plan, 2, ["--data", data, "--steps", 3] + extra, fragment, work)
        print(f"before step 1: {line}")


def check_mismatches(work, m, plan):
    """A checkpoint that cannot continue this run exactly is refused before step 1."""
    ckpt = os.path.join(work, "good-ckpt")  # check_damaged wrote step-2 there (dp=2, seed 3)
    other_batch = compile_plan(m["mlp"], work, "dp2-b16", 16, ADAMW + ["--mesh", "dp=2", "--zero", 1])
    sgd = compile_plan(m["mlp"], work, "dp2-sgd", 32, ["--optimizer", "sgd", "--momentum", 0.9, "--mesh", "dp=2"])
    fewer = os.path.join(work, "fewer")
    os.makedirs(fewer)
    for name in ("input", "target"):
        np.save(os.path.join(fewer, f"{name}.npy"), np.load(os.path.join(m["data"], f"{name}.npy"))[:64])
    init = os.path.join(work, "init-params")
    dtrun(plan, 2, ["--steps", 0, "--save", init])
    cases = [(plan, ["--data", m["data"], "--seed", 4], "was trained with --seed 3, not 4"),
             (other_batch, ["--data", m["data"]], "took 32 samples per step"),
             (plan, ["--data", fewer], "was trained on other data"),
             (sgd, ["--data", m["data"]], "does not match"),
             (plan, ["--data", m["data"], "--init", os.path.join(init, "model.safetensors")],
              "--resume continues a run, --init starts one")]
    for p, extra, fragment in cases:
        line = expect_error(p, 2, ["--steps", 4, "--resume", ckpt] + extra, fragment, work)
        print(f"refused: {line}")
    for flag, value in (("--keep", -1), ("--checkpoint-every", -2)):
        line = expect_error(plan, 2, ["--steps", 1, "--checkpoint", os.path.join(work, "neg"), flag, value],
                            flag, work)
        print(f"refused: {line}")


def check_keep(work, plan, data):
    ckpt = os.path.join(work, "keep")
    dtrun(plan, 2, ["--data", data, "--steps", 5, "--checkpoint", ckpt, "--checkpoint-every", 1, "--keep", 2])
    assert sorted(os.listdir(ckpt)) == ["latest", "step-4", "step-5"], os.listdir(ckpt)
    print("--keep 2: step-4, step-5 and latest remain")


def main():
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as work:
        m = make_models(work, rng)
        plan = compile_plan(m["mlp"], work, "dp2", 32, ADAMW + ["--mesh", "dp=2", "--zero", 1])
        check_injected_kills(work, plan, m["data"])
        big = os.path.join(work, "big.dtm")
        run(tool("dtc"), "zoo", "mlp", "--hidden", "2048,2048", "-o", big)
        check_random_kills(work, big, m["data"])
        check_stop_signals(work, plan, m["data"])
        check_damaged(work, plan, m["data"])
        check_paths(work, plan, m["data"])
        check_mismatches(work, m, plan)
        check_keep(work, plan, m["data"])
    print("checkpoint faults: ok")


if __name__ == "__main__":
    main()
