"""Asynchronous checkpoints (dtrun --checkpoint-async): at the step, each rank copies its pieces of
the state to host memory and a background thread writes them while training goes on; rank 0
publishes the step (index, rename, `latest`) once every rank's file is synced.

1. Same bytes: on dp=2 x tp=2 with ZeRO-1, every step the asynchronous run writes is
   byte-identical to the synchronous run's (each rank file and the index), and both runs' losses
   and final weights are identical; whether the training threads copy the snapshot in the step
   or the writer thread copies it beside the next one (DTC_SNAPSHOT_COPY), also where the writer
   is held back so that the training threads copy it before the next step writes the state, and
   where the snapshot is read from a device's memory (--device cpu-staged); and where a rank's
   pieces are column blocks of its tensor (transformers' GPT-2 layout on tp=2).
2. Exact resume: that run, killed after step 5 while step 4's write is in flight (the ranks
   agree that every file is synced at the end of the next step, and the kill comes first),
   resumes from step 2 bit-identically to the run that never stopped.
3. Resharding: an asynchronous checkpoint of dp=2 x tp=2 continues on one device and on pp=2
   within the partitioned-parity bounds of the other tests (1e-5, relative).
4. Crash safety: kill -9 at 20 random moments of asynchronous writes (18 from outside at random
   delays, 2 inside the background writer of one rank of two): `latest` always names a complete
   checkpoint (every CRC-32 checked), the next run removes the leftovers, and resuming from it
   writes the next step byte-identical to the uninterrupted run's.
5. The snapshot's host memory is in dtrun's memory report; --checkpoint-async without
   --checkpoint is a one-line error.
6. A full disk: a background write that fails ends the run with one line; `latest` still names
   the last complete step, no partial step is left, and the run continues from it with room."""
import filecmp
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from checkpoint_harness import (compile_plan, dtrun, dtrun_command, index_of, kill_during_write,  # noqa: E402
                                latest_step, losses, same_weights, weights)
from dtc_harness import run, tool, weight_error  # noqa: E402
from test_checkpoint_faults import leftovers, verify_checkpoint  # noqa: E402
from test_data_parallel import make_models  # noqa: E402

ADAMW = ["--optimizer", "adamw", "--lr", 2e-3, "--eps", 1e-4]
GRID = ["--mesh", "dp=2,tp=2", "--zero", 1]
TOLERANCE = 1e-5


def same_step(a, b):
    """Two step directories hold the same files, byte for byte."""
    names = sorted(os.listdir(a))
    return names == sorted(os.listdir(b)) and all(
        filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False) for n in names)


def check_same_bytes(work, plan, tokens):
    runs = {}
    # The snapshot copied by the training threads in the step ("async"), by the writer thread beside
    # the next step ("beside"), and by the training threads before the next step writes the state
    # while the writer thread is held back a second ("held"); "staged": the device path (state in
    # memory of its own, the snapshot read from it).
    async_flags = ["--checkpoint-async"]
    beside = {"DTC_SNAPSHOT_COPY": "background"}
    modes = {"sync": ([], None, None), "async": (async_flags, None, {"DTC_SNAPSHOT_COPY": "step"}),
             "beside": (async_flags, None, beside), "held": (async_flags, "snapshot-copy:pause", None),
             "staged": (async_flags + ["--device", "cpu-staged"], None, None)}
    for mode, (flags, fault, switches) in modes.items():
        ckpt, log, save = (os.path.join(work, f"grid-{mode}-{s}") for s in ("ckpt", "log.jsonl", "final"))
        args = ["--data", tokens, "--steps", 8, "--seed", 5, "--log", log, "--save", save,
                "--checkpoint", ckpt, "--checkpoint-every", 2]
        out = dtrun(plan, 4, args + flags, fault=fault, switches=switches).stdout
        runs[mode] = (ckpt, losses(log), weights(save), out)
    sync_ckpt, sync_losses, sync_final, _ = runs["sync"]
    for mode in ("async", "beside", "held", "staged"):
        async_ckpt, async_losses, async_final, out = runs[mode]
        assert "written in the background" in out, out
        assert "checkpoint snapshot" in out, out
        for step in (2, 4, 6, 8):
            name = f"step-{step}"
            assert same_step(os.path.join(sync_ckpt, name), os.path.join(async_ckpt, name)), f"{mode}: {name}"
        assert async_losses == sync_losses and same_weights(async_final, sync_final), mode
    files = len(index_of(os.path.join(runs["async"][0], "step-8"))["files"])
    print(f"dp=2 x tp=2: steps 2, 4, 6 and 8 written in the background (the snapshot copied in the step, beside "
          f"the next one, before it writes the state, and from a device's memory) are byte-identical to the "
          f"synchronous run's ({files} rank files each); losses and final weights identical")
    return sync_losses, sync_final


def check_column_pieces(work, tokens):
    """Transformers' GPT-2 layout under tp=2: a rank's block of the fused q/k/v weight ([C, 3C],
    split by heads along its columns) is three column blocks, none of them one range of the
    rank's tensor. Copied out of the whole tensor, beside the step and from a device's memory,
    the files are the synchronous run's."""
    model = os.path.join(work, "gpt-hf.dtm")
    run(tool("dtc"), "zoo", "gpt", "--vocab", 64, "--ctx", 16, "--layers", 2, "--heads", 4, "--embd", 32,
        "--seed", 11, "--layout", "hf", "-o", model)
    plan = compile_plan(model, work, "gpt-hf-tp2", 8, ADAMW + ["--mesh", "tp=2"])
    ckpts = {}
    for mode, flags in {"sync": [], "async": ["--checkpoint-async"],
                        "staged": ["--checkpoint-async", "--device", "cpu-staged"]}.items():
        ckpts[mode] = os.path.join(work, f"columns-{mode}")
        dtrun(plan, 2, ["--data", tokens, "--steps", 4, "--seed", 5, "--checkpoint", ckpts[mode],
                        "--checkpoint-every", 2] + flags)
    index = index_of(os.path.join(ckpts["sync"], "step-2"))
    for mode in ("async", "staged"):
        for step in ("step-2", "step-4"):
            assert same_step(os.path.join(ckpts["sync"], step), os.path.join(ckpts[mode], step)), f"{mode}: {step}"
    print(f"transformers' GPT-2 layout on tp=2 (q/k/v column blocks): steps 2 and 4 written in the background, "
          f"beside the step and from a device's memory, are byte-identical to the synchronous run's "
          f"({len(index['files'])} rank files)")


def check_exact_resume(work, plan, tokens, ref):
    ckpt, log, save = (os.path.join(work, f"resume-{s}") for s in ("ckpt", "log.jsonl", "final"))
    command = ["--data", tokens, "--steps", 8, "--seed", 5, "--log", log, "--save", save,
               "--checkpoint", ckpt, "--checkpoint-every", 2, "--checkpoint-async"]
    crashed = dtrun(plan, 4, command, fault="after-step@3#5", expect_ok=False)
    assert crashed.returncode != 0, crashed.stdout
    latest = latest_step(ckpt)
    assert latest == 2, os.listdir(ckpt)
    out = dtrun(plan, 4, command + ["--resume", ckpt]).stdout
    assert f"resumed at step {latest}" in out, out
    assert losses(log) == ref[0] and same_weights(weights(save), ref[1]), "continuation differs"
    print(f"dp=2 x tp=2 killed after step 5: resumed from step-{latest} (asynchronous), 8 losses and "
          "every weight bit-identical to the uninterrupted run")


def check_reshard(work, gpt, plan, tokens):
    ckpt = os.path.join(work, "reshard-ckpt")
    # Step 3's write is the last periodic one; step 4 (the run's end) is written at once.
    dtrun(plan, 4, ["--data", tokens, "--steps", 4, "--seed", 5, "--checkpoint", ckpt,
                    "--checkpoint-every", 3, "--checkpoint-async"])
    one = compile_plan(gpt, work, "one", 8, ADAMW)
    ref_log, ref_save = os.path.join(work, "one-ref.jsonl"), os.path.join(work, "one-ref")
    dtrun(one, 1, ["--data", tokens, "--steps", 6, "--seed", 5, "--log", ref_log, "--save", ref_save])
    ref_losses, ref_final = dict(losses(ref_log)), weights(ref_save)
    for name, flags in (("one device", []), ("pp=2", ["--mesh", "pp=2", "--microbatches", 4])):
        plan_b = compile_plan(gpt, work, f"reshard-{len(flags)}", 8, ADAMW + flags)
        log, save = os.path.join(work, f"reshard-{len(flags)}.jsonl"), os.path.join(work, f"reshard-{len(flags)}")
        devices = 2 if flags else 1
        dtrun(plan_b, devices, ["--data", tokens, "--steps", 6, "--resume", os.path.join(ckpt, "step-3"),
                                "--log", log, "--save", save])
        ours = dict(losses(log))
        assert sorted(ours) == [4, 5, 6], ours
        loss_err = max(abs(ours[s] - ref_losses[s]) / abs(ref_losses[s]) for s in ours)
        weight_err = weight_error(weights(save), ref_final)
        assert loss_err <= TOLERANCE and weight_err <= TOLERANCE, (name, loss_err, weight_err)
        print(f"asynchronous step-3 of dp=2 x tp=2 continued on {name}: max loss rel err {loss_err:.2e}, "
              f"max weight rel err {weight_err:.2e}")


def reference_steps(work, plan, data, steps):
    """The synchronous run's checkpoint of every step, to hold the crashed runs' against."""
    ckpt = os.path.join(work, "kills-ref")
    dtrun(plan, 1, ["--data", data, "--steps", steps, "--seed", 3, "--checkpoint", ckpt, "--checkpoint-every", 1])
    return ckpt


def resumed_matches(work, plan, data, ckpt, latest, ref_ckpt, devices=1):
    """Resumes from `latest` for one step; its checkpoint must be the reference's, byte for byte."""
    out = dtrun(plan, devices, ["--data", data, "--steps", latest + 1, "--checkpoint", ckpt, "--resume", ckpt]).stdout
    assert f"resumed at step {latest}" in out and leftovers(ckpt) == [], (out, os.listdir(ckpt))
    name = f"step-{latest + 1}"
    return same_step(os.path.join(ckpt, name), os.path.join(ref_ckpt, name))


def check_random_kills(work, plan, data):
    """kill -9 from outside at random moments of asynchronous writes (one process, ~40 MB a step)."""
    ref_ckpt = reference_steps(work, plan, data, 16)
    rng = random.Random(11)
    seen = {}
    for trial in range(18):
        ckpt = os.path.join(work, f"kill-{trial}")
        cmd = dtrun_command(plan, 1, ["--data", data, "--steps", 1000, "--seed", 3, "--checkpoint", ckpt,
                                      "--checkpoint-every", 1, "--keep", 2, "--checkpoint-async"])
        target = rng.randint(2, 6)
        kill_during_write(cmd, os.path.join(ckpt, f"step-{target}.tmp"), lambda: rng.uniform(0, 0.3))
        latest = latest_step(ckpt)
        left = leftovers(ckpt)
        # The write of step `target` started after step target-1's was published.
        assert latest is not None and target - 1 <= latest <= 15, (latest, os.listdir(ckpt))
        verify_checkpoint(os.path.join(ckpt, f"step-{latest}"))
        assert same_step(os.path.join(ckpt, f"step-{latest}"), os.path.join(ref_ckpt, f"step-{latest}"))
        assert resumed_matches(work, plan, data, ckpt, latest, ref_ckpt), trial
        shutil.rmtree(ckpt)
        seen[latest - target + 1] = seen.get(latest - target + 1, 0) + 1
        print(f"kill -9 from outside after step-{target}'s write began: latest step-{latest} intact "
              f"(CRC-32 checked, equal to the synchronous run's), leftovers {left or 'none'} removed, "
              f"resumed step-{latest + 1} byte-identical")
    print(f"18 kills: `latest` was the step whose write had begun in {seen.get(1, 0)}, the one before "
          f"in {seen.get(0, 0)}, a later one in {sum(v for k, v in seen.items() if k > 1)}")


def check_writer_kills(work, mlp, data):
    """A rank of two killed inside its background writer, halfway through its file of step 4."""
    plan = compile_plan(mlp, work, "dp2", 32, ADAMW + ["--mesh", "dp=2", "--zero", 1])
    ref_ckpt = os.path.join(work, "dp2-ref")
    dtrun(plan, 2, ["--data", data, "--steps", 6, "--seed", 3, "--checkpoint", ref_ckpt, "--checkpoint-every", 1])
    index = index_of(os.path.join(ref_ckpt, "step-2"))
    writer = [f["rank"] for f in index["files"]]
    pieces = {r: sum(writer[s["file"]] == r for t in index["tensors"].values() for s in t["slices"]) for r in (0, 1)}
    # The fault point follows each piece a rank writes: rank r's pieces * 3 + 1 is the first of its
    # file of step 4 (steps 1, 2 and 3 were written before).
    for rank in (0, 1):
        ckpt = os.path.join(work, f"writer-kill-{rank}")
        command = ["--data", data, "--steps", 6, "--seed", 3, "--checkpoint", ckpt, "--checkpoint-every", 1,
                   "--checkpoint-async"]
        crashed = dtrun(plan, 2, command, fault=f"checkpoint-file@{rank}#{3 * pieces[rank] + 1}", expect_ok=False)
        assert crashed.returncode != 0, crashed.stdout
        assert latest_step(ckpt) == 3, os.listdir(ckpt)
        assert "step-4.tmp" in leftovers(ckpt), os.listdir(ckpt)
        verify_checkpoint(os.path.join(ckpt, "step-3"))
        assert resumed_matches(work, plan, data, ckpt, 3, ref_ckpt, devices=2)
        print(f"rank {rank} of dp=2 killed inside its background writer (step 4): latest stayed at step-3, "
              "step-4.tmp removed on resume, resumed step-4 byte-identical")


def check_errors(work, plan, data):
    proc = dtrun(plan, 1, ["--data", data, "--steps", 2, "--checkpoint-async"], expect_ok=False)
    assert proc.returncode == 2 and "--checkpoint-async need --checkpoint DIR" in proc.stderr, proc.stderr
    print("--checkpoint-async without --checkpoint: " + proc.stderr.strip().splitlines()[-1])


def check_full_disk(work, plan, data):
    """A write that fails in the background (the file may not grow past 1 MB: RLIMIT_FSIZE, its
    signal ignored, so write(2) fails with EFBIG as it fails with ENOSPC on a full disk): the run
    ends with one line naming the file and the reason, `latest` still names the last complete
    step, no partial step is left, and the same run with room continues from it. (One process:
    MPI's own shared-memory files would hit the limit first.)"""
    ckpt = os.path.join(work, "full")
    dtrun(plan, 1, ["--data", data, "--steps", 2, "--seed", 3, "--checkpoint", ckpt])

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, 1_000_000))

    args = ["--data", data, "--steps", 6, "--resume", ckpt, "--checkpoint", ckpt, "--checkpoint-every", 2,
            "--checkpoint-async"]
    proc = subprocess.run([str(a) for a in dtrun_command(plan, 1, args)], capture_output=True, text=True,
                          preexec_fn=small_files, timeout=120)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("dtrun: error")]
    assert proc.returncode == 1 and len(errors) == 1, (proc.returncode, proc.stderr)
    assert "checkpoint of step 4: cannot write" in errors[0] and "File too large" in errors[0], errors
    assert latest_step(ckpt) == 2 and not leftovers(ckpt), os.listdir(ckpt)
    verify_checkpoint(os.path.join(ckpt, "step-2"))
    dtrun(plan, 1, args)
    assert latest_step(ckpt) == 6 and sorted(os.listdir(ckpt)) == ["latest", "step-2", "step-4", "step-6"]
    print(f"a background write that fails for room: {errors[0]}; latest still step 2, whole; "
          "with room, the run continues to step 6")


def main():
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as work:
        m = make_models(work, rng)
        grid = compile_plan(m["gpt"], work, "grid", 8, ADAMW + GRID)
        ref = check_same_bytes(work, grid, m["tokens"])
        check_column_pieces(work, m["tokens"])
        check_exact_resume(work, grid, m["tokens"], ref)
        check_reshard(work, m["gpt"], grid, m["tokens"])
        big = os.path.join(work, "big.dtm")
        run(tool("dtc"), "zoo", "mlp", "--hidden", "2048,2048", "-o", big)
        check_random_kills(work, compile_plan(big, work, "big", 32, ADAMW), m["data"])
        check_writer_kills(work, m["mlp"], m["data"])
        mlp = compile_plan(m["mlp"], work, "mlp", 32, ADAMW)
        check_errors(work, mlp, m["data"])
        check_full_disk(work, mlp, m["data"])
    print("asynchronous checkpoints: ok")


if __name__ == "__main__":
    main()
