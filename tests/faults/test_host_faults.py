"""Faults of a rank on another host: 8 ranks of dp=8 over two "hosts" (ranks 0-3 and 4-7, each
told its host by DTC_WATCHDOG_HOST, so that a rank sees only its own host's processes, as on
separate machines).

- kill -9 of a rank of the second host during training: a rank of the first host names it (pid,
  host, the call it waited in, and which rank of the dead one's host saw it die) within 30 s
  (at --collective-timeout 600, where it was found before) and writes its flight recorder;
- SIGSTOP of a rank of the second host: at the timeout (3 s) the job ends, exit 3, and the
  report of a rank of the first host names the stopped rank as its host-mates see it;
- kill -9 of a rank of the second host halfway through its asynchronous checkpoint write: the
  job names it, `latest` keeps the step before, whole, and the job resumes;
- kill -9 of a rank of the second host while it sends its blocks to --save: the job names it,
  the folder's earlier save is untouched, the next save leaves no temporary."""
import json
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_harness import (MPIRUN, command, errors, expect_failure, finish, kill_rank, logged_steps,  # noqa: E402
                           rank_pid, run, start, tool, wait_until, write_mlp_data)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from checkpoint_harness import index_of, latest_step  # noqa: E402
from test_checkpoint_faults import leftovers, verify_checkpoint  # noqa: E402

RANKS, PER_HOST = 8, 4


def two_hosts(work, plan, args):
    """mpirun of 8 ranks, each told the host of its half of the job."""
    wrapper = os.path.join(work, "host.sh")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\nexport DTC_WATCHDOG_HOST=host$((OMPI_COMM_WORLD_RANK / {PER_HOST}))\nexec "$@"\n')
    os.chmod(wrapper, 0o755)
    return [str(a) for a in MPIRUN + ["-np", RANKS, wrapper, tool("dtrun"), plan, "--threads", 1, *args]]


def launch(work, plan, data, name, extra=()):
    log = os.path.join(work, f"{name}.jsonl")
    proc = start(two_hosts(work, plan, ["--data", data, "--steps", 100000, "--log", log, *extra]))
    wait_until(lambda: logged_steps(log) >= 5 or proc.poll() is not None, 120, f"{name}: step 5")
    assert proc.poll() is None, f"{name}: ended before the fault"
    return proc, log


def check_remote_kill(work, plan, data, attempts=3):
    """The dead rank's host-mates see it in /proc and its death notice reaches the other host
    within about the same half second; whichever rank reports first ends the job. A report
    from the dead rank's own host only (no remote rank got to print before the job ended)
    tries again, at most `attempts` times: the other host must name it in one of them."""
    victim = 6
    for attempt in range(1, attempts + 1):
        name = f"remote-kill-{attempt}"
        proc, log = launch(work, plan, data, name)
        pid, rc, out, err, took = kill_rank(proc, victim, 60, f"kill -9 of rank {victim}")
        assert rc != 0, "kill -9: exit 0"
        named = [line for line in errors(err) if f"rank {victim} (pid {pid} on host1) died" in line]
        remote = [line for line in named if "seen by rank" in line
                  and any(f"while rank {r} waited" in line for r in range(PER_HOST))]
        assert took < 30, took
        if remote:
            break
        assert named or attempt < attempts, f"no rank named rank {victim}:\n{err[-3000:]}"
        print(f"attempt {attempt}: rank {victim}'s death was reported by its own host only: {named}")
    assert remote, f"no rank of host0 named rank {victim} in {attempts} attempts:\n{err[-3000:]}"
    reporter = int(remote[0].split("while rank ")[1].split()[0])
    with open(os.path.join(work, f"{name}.flight-rank{reporter}.json")) as f:
        record = json.load(f)
    assert record["rank"] == reporter and record["calls"][-1]["end"] is None, record["calls"][-1]
    print(f"kill -9 of rank {victim} (host1): named by rank {reporter} (host0) in {took:.1f} s, exit {rc}: "
          f"{remote[0]}")


def not_arrived(line):
    """The ranks a timeout report lists as not arrived ("not arrived: rank 5;", "ranks 4,5;")."""
    listed = line.split("not arrived: ", 1)[1].split(";", 1)[0]
    return [int(r) for r in listed.split(" ", 1)[1].split(",")]


def check_remote_stop(work, plan, data):
    victim, timeout = 5, 3
    proc, log = launch(work, plan, data, "remote-stop", ["--collective-timeout", timeout])
    pid = rank_pid(proc.pid, victim)
    begin = time.time()
    os.kill(pid, signal.SIGSTOP)
    try:
        result = finish(proc, timeout + 40, f"SIGSTOP of rank {victim}")
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    took = time.time() - begin
    expect_failure(result, 3, ["--collective-timeout",
                               f"rank {victim} (pid {pid} on host1) is stopped (SIGSTOP) (seen by rank"],
                   f"SIGSTOP of rank {victim}")
    line = [x for x in errors(result[2]) if "is stopped" in x][0]
    # A rank whose messages the stop wedged may be missing too, but the stopped one must be.
    assert victim in not_arrived(line), line
    print(f"SIGSTOP of rank {victim} (host1): exit 3 in {took:.1f} s (timeout {timeout} s): {line}")


def death_report(err, victim, what):
    """The error line naming the victim's death: a rank of the first host's where one printed
    before the job ended (check_remote_kill shows that one does), else its host-mates'."""
    named = [line for line in errors(err) if f"rank {victim} (pid " in line and "on host1) died" in line]
    assert named, f"{what}: no rank named rank {victim}:\n{err[-3000:]}"
    remote = [line for line in named if "seen by rank" in line]
    return (remote or named)[0]


def check_remote_kill_during_async_write(work, data):
    """ZeRO-1 over the two hosts, asynchronous checkpoints every 2 steps: rank 6 dies halfway
    through writing its file of step 4 (its background writer, after its first piece). A rank of
    the first host names it; `latest` still names step 2, complete; the job resumes from it."""
    model, plan = os.path.join(work, "mlp.dtm"), os.path.join(work, "zero1.dtp")
    run(tool("dtc"), "compile", model, "-o", plan, "--batch", 32, "--mesh", f"dp={RANKS}", "--zero", 1,
        "--optimizer", "adamw")
    probe = os.path.join(work, "async-probe")
    run(*two_hosts(work, plan, ["--data", data, "--steps", 2, "--checkpoint", probe]))
    index = index_of(os.path.join(probe, "step-2"))
    writer = [f["rank"] for f in index["files"]]
    pieces = sum(writer[s["file"]] == 6 for t in index["tensors"].values() for s in t["slices"])
    assert pieces > 0, "rank 6 writes nothing"
    ckpt = os.path.join(work, "async-ckpt")
    env = dict(os.environ, DTC_FAULT=f"checkpoint-file@6#{pieces + 1}")
    cmd = two_hosts(work, plan, ["--data", data, "--steps", 100000, "--checkpoint", ckpt, "--checkpoint-every", 2,
                                 "--keep", 3, "--checkpoint-async"])
    begin = time.time()
    rc, out, err = finish(start(cmd, env), 120, "rank 6 killed in its asynchronous write")
    assert rc != 0, "exit 0"
    line = death_report(err, 6, "kill -9 in an asynchronous write")
    assert latest_step(ckpt) == 2, (latest_step(ckpt), os.listdir(ckpt))
    verify_checkpoint(os.path.join(ckpt, "step-2"))
    resumed = run(*command(plan, RANKS, ["--data", data, "--steps", 4, "--resume", ckpt, "--checkpoint", ckpt]))
    assert latest_step(ckpt) == 4 and not leftovers(ckpt), os.listdir(ckpt)
    print(f"kill -9 of rank 6 (host1) in its asynchronous write of step 4: named in {time.time() - begin:.1f} s "
          f"from the start: {line}; latest is step 2, whole; resumed to step 4 "
          f"({resumed.stdout.strip().splitlines()[-1]})")


def check_remote_kill_during_save(work, data):
    """ZeRO-3 over the two hosts, --save into a folder that holds an earlier save: rank 6 dies
    after sending its first block. A rank of the first host names it; the earlier save is
    untouched; the next save replaces it and leaves no temporary behind."""
    model, plan = os.path.join(work, "mlp.dtm"), os.path.join(work, "zero3.dtp")
    run(tool("dtc"), "compile", model, "-o", plan, "--batch", 32, "--mesh", f"dp={RANKS}", "--zero", 3)
    out = os.path.join(work, "saved")
    run(*command(plan, RANKS, ["--steps", 0, "--save", out]))
    with open(os.path.join(out, "model.safetensors"), "rb") as f:
        before = f.read()
    env = dict(os.environ, DTC_FAULT="save-block@6")
    cmd = two_hosts(work, plan, ["--data", data, "--steps", 2, "--save", out])
    rc, _, err = finish(start(cmd, env), 120, "rank 6 killed in --save")
    assert rc != 0, "exit 0"
    line = death_report(err, 6, "kill -9 in --save")
    with open(os.path.join(out, "model.safetensors"), "rb") as f:
        assert f.read() == before, "the earlier save changed"
    left = sorted(os.listdir(out))
    run(*command(plan, RANKS, ["--data", data, "--steps", 2, "--save", out]))
    assert os.listdir(out) == ["model.safetensors"], os.listdir(out)
    with open(os.path.join(out, "model.safetensors"), "rb") as f:
        assert f.read() != before, "the next save wrote nothing new"
    print(f"kill -9 of rank 6 (host1) in --save: {line}; the earlier save untouched (folder: {left}); "
          "the next save replaced it, no temporary left")


def main():
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "data")
        write_mlp_data(data, 96, seed=0)
        model, plan = os.path.join(work, "mlp.dtm"), os.path.join(work, "dp8.dtp")
        run(tool("dtc"), "zoo", "mlp", "--seed", 5, "-o", model)
        run(tool("dtc"), "compile", model, "-o", plan, "--batch", 32, "--mesh", f"dp={RANKS}")
        check_remote_kill(work, plan, data)
        check_remote_stop(work, plan, data)
        check_remote_kill_during_async_write(work, data)
        check_remote_kill_during_save(work, data)
    print("faults on another host: ok")


if __name__ == "__main__":
    main()
