"""Bad numbers and bad files: the run stops with a one-line error and a documented exit code,
and nothing good is lost.

- NaN and inf in the data, and a huge learning rate, on one process and under dp=2 and pp=2:
  exit 4 at the first bad step, naming it; no checkpoint or --save of that step, the previous
  checkpoint intact and finite; weights that overflow in an update after a finite step are not
  checkpointed (synchronous or asynchronous); the JSONL log stays strict JSON (null for NaN);
  --check-numerics names the data input or the first op whose output is not finite;
- fp16 steps skipped by the loss scale are in the log and the progress line, and
  --max-skipped-steps in a row is exit 4;
- unwritable outputs (--log, --save, --trace, --checkpoint, --tensorboard) and a --sample the
  plan cannot do are found before step 1 (exit 2);
- no room for --save or for the checkpoints asked for (a small file system of its own), and an
  --eval set shorter than one batch: exit 2 before step 1, naming the sizes;
- a data file truncated or rewritten while the job runs: exit 2 naming the file, never SIGBUS."""
import os
import stat
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_harness import (command, expect_failure, finish, finite_checkpoint, is_nan_or_none,  # noqa: E402
                           logged_steps, run, run_job, start, strict_json_lines, tool, wait_until,
                           write_mlp_data)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from dtc_harness import write_tokens  # noqa: E402


def make_inputs(work):
    good = os.path.join(work, "data")
    x, y = write_mlp_data(good, 96, seed=1)
    bad = {}
    for kind, value in (("nan", np.nan), ("inf", np.inf)):
        bad[kind] = os.path.join(work, f"data-{kind}")
        os.makedirs(bad[kind])
        poisoned = x.copy()
        poisoned[:, 11] = value  # every sample: the first step that reads any sees it
        np.save(os.path.join(bad[kind], "input.npy"), poisoned)
        np.save(os.path.join(bad[kind], "target.npy"), y)
    model = os.path.join(work, "mlp.dtm")
    run(tool("dtc"), "zoo", "mlp", "--seed", 5, "-o", model)
    plans = {}
    for name, flags in {"one": [], "dp2": ["--mesh", "dp=2"], "pp2": ["--mesh", "pp=2", "--microbatches", 4],
                        "huge-lr": ["--lr", 1e6], "fp16": ["--precision", "fp16", "--loss-scale", 1e30],
                        "overflow": ["--lr", 1e30], "overflow-dp2": ["--lr", 1e30, "--mesh", "dp=2"]}.items():
        plans[name] = os.path.join(work, f"{name}.dtp")
        run(tool("dtc"), "compile", model, "-o", plans[name], "--batch", 32, *flags)
    return plans, good, bad


def devices(name):
    return 2 if name in ("dp2", "pp2", "overflow-dp2") else 1


def check_nonfinite_data(plans, bad, work):
    for kind, data in bad.items():
        for layout in ("one", "dp2", "pp2"):
            what = f"{kind} in the data ({layout})"
            log, save = os.path.join(work, f"{kind}-{layout}.jsonl"), os.path.join(work, f"{kind}-{layout}-save")
            result = run_job(command(plans[layout], devices(layout), ["--data", data, "--steps", 5, "--log", log,
                                                                      "--save", save]), 60, what)
            expect_failure(result, 4, ["step 1:", "not finite"], what)
            entries = strict_json_lines(log)
            assert len(entries) == 1 and is_nan_or_none(entries[0]["loss"]), entries
            assert not os.path.exists(os.path.join(save, "model.safetensors")), f"{what}: saved"
            print(f"{what}: exit 4: {[x for x in result[2].splitlines() if x.startswith('dtrun:')][0]}")
    result = run_job(command(plans["one"], 1, ["--data", bad["nan"], "--steps", 5, "--check-numerics"]), 60, "check")
    expect_failure(result, 4, ["data input 'input' holds inf or NaN"], "--check-numerics (data)")


def check_huge_lr(plans, good, work):
    what = "a huge learning rate"
    log, ckpt = os.path.join(work, "lr.jsonl"), os.path.join(work, "lr-ckpt")
    result = run_job(command(plans["huge-lr"], 1, ["--data", good, "--steps", 20, "--log", log, "--checkpoint", ckpt,
                                                   "--checkpoint-every", 1]), 60, what)
    expect_failure(result, 4, ["not finite", "the last checkpoint, step-"], what)
    bad_step = int([x for x in result[2].splitlines() if "not finite" in x][0].split("step ")[1].split(":")[0])
    entries = strict_json_lines(log)
    assert entries[-1]["step"] == bad_step, (entries, bad_step)
    kept = sorted(int(n.split("-")[1]) for n in os.listdir(ckpt) if n.startswith("step-") and "." not in n)
    assert kept and max(kept) < bad_step, (kept, bad_step)
    assert finite_checkpoint(os.path.join(ckpt, os.readlink(os.path.join(ckpt, "latest")))), "non-finite checkpoint"
    print(f"{what}: exit 4 at step {bad_step}; checkpoints up to step {max(kept)} finite")
    result = run_job(command(plans["huge-lr"], 1, ["--data", good, "--steps", 20, "--check-numerics"]), 60, what)
    expect_failure(result, 4, ["node '", "holds inf or NaN"], "--check-numerics (a huge learning rate)")


def check_nonfinite_weights(plans, work):
    """Weights that overflow in the update after a finite step: the checkpoint of that step is
    refused (synchronous, asynchronous, and asynchronous from a device's memory), on every rank."""
    data = os.path.join(work, "data-huge")
    x, _ = write_mlp_data(data, 96, seed=1)
    np.save(os.path.join(data, "input.npy"), x * np.float32(1e12))  # gradients ~1e11, times lr 1e30
    for layout in ("overflow", "overflow-dp2"):
        for mode in ([], ["--checkpoint-async"], ["--checkpoint-async", "--device", "cpu-staged"]):
            what = f"weights overflowing ({devices(layout)} process(es), {' '.join(mode) or 'synchronous'})"
            ckpt = os.path.join(work, f"overflow-{devices(layout)}-{len(mode)}")
            result = run_job(command(plans[layout], devices(layout),
                                     ["--data", data, "--steps", 3, "--checkpoint", ckpt, "--checkpoint-every", 1,
                                      *mode]), 60, what)
            expect_failure(result, 4, ["'fc0.weight' holds inf or NaN: checkpoint step-1 is not written"], what)
            # Synchronous: refused before step 2. Asynchronous: the snapshot is checked as it is
            # copied, beside step 2, and the write fails at step 2's end, when the ranks agree.
            last = "step     2/3" if mode else "step     1/3"
            assert last in result[1] and "step     3/3" not in result[1], result[1]
            if not mode:
                assert "step     2/3" not in result[1], result[1]
            written = os.listdir(ckpt) if os.path.isdir(ckpt) else []
            assert not [n for n in written if n == "latest" or n.startswith("step-1")], f"{what}: {written}"
    print("weights that overflow after a finite step: exit 4, naming the tensor; no checkpoint written "
          "(synchronous, asynchronous, from device memory; 1 and 2 processes)")


def check_fp16_skips(plans, good, work):
    log = os.path.join(work, "fp16.jsonl")
    result = run_job(command(plans["fp16"], 1, ["--data", good, "--steps", 50, "--log", log,
                                                "--max-skipped-steps", 6]), 60, "fp16")
    expect_failure(result, 4, ["6 steps in a row skipped by the fp16 loss scale"], "fp16 skips")
    entries = strict_json_lines(log)
    assert len(entries) == 6 and all(e.get("skipped") for e in entries), entries
    assert "skipped (fp16 overflow, 6 in a row)" in result[1], result[1][-800:]
    print("fp16: 6 skipped steps logged and shown, then exit 4")


def check_unwritable_outputs(plans, good, work):
    blocked = os.path.join(work, "read-only")
    os.makedirs(blocked)
    os.chmod(blocked, stat.S_IRUSR | stat.S_IXUSR)
    a_file = os.path.join(work, "a-file")
    open(a_file, "w").close()
    root = os.geteuid() == 0  # root writes anywhere: a path under a regular file still fails
    places = {"--log": os.path.join(a_file, "x.jsonl"), "--trace": os.path.join(a_file, "t.json"),
              "--save": a_file, "--checkpoint": os.path.join(a_file, "ckpt"),
              "--tensorboard": os.path.join(a_file, "board")}
    if not root:
        places["--log"] = os.path.join(blocked, "x.jsonl")
    for flag, path in places.items():
        for layout in ("one", "dp2"):
            what = f"unwritable {flag} ({layout})"
            result = run_job(command(plans[layout], devices(layout), ["--data", good, "--steps", 3, flag, path]), 60, what)
            expect_failure(result, 2, [flag], what)
            assert "step " not in result[1], f"{what}: trained before failing:\n{result[1]}"
    # --sample is the last thing a run does: a plan that cannot do it is said before step 1.
    result = run_job(command(plans["one"], 1, ["--data", good, "--steps", 3, "--sample", 10]), 60, "--sample")
    expect_failure(result, 2, ["--sample needs a language model"], "--sample on an MLP")
    assert "step " not in result[1], result[1]
    print("unwritable outputs and --sample on an MLP: exit 2 before step 1")


def check_room_and_short_eval(plans, good, work):
    """Outputs on a 600 KB file system (tmpfs, in a mount namespace of the run's own): the MLP's
    parameters take 940 KB as float32, 470 KB as bf16, and so does a checkpoint of its SGD run."""
    gpt, plan = os.path.join(work, "gpt-short.dtm"), os.path.join(work, "gpt-short.dtp")
    run(tool("dtc"), "zoo", "gpt", "--vocab", 64, "--ctx", 16, "--layers", 1, "--heads", 2, "--embd", 16, "-o", gpt)
    run(tool("dtc"), "compile", gpt, "-o", plan, "--batch", 8)
    train, short = os.path.join(work, "train-long.bin"), os.path.join(work, "eval-short.bin")
    write_tokens(train, np.arange(4000) % 64)
    write_tokens(short, np.arange(50) % 64)  # 3 windows of 16
    result = run_job(command(plan, 1, ["--data", train, "--steps", 3, "--eval", short]), 60, "short eval")
    expect_failure(result, 2, ["--eval", "holds 3 samples, fewer than one batch of 8: nothing to evaluate"],
                   "short eval")
    assert "step " not in result[1], result[1]
    small = os.path.join(work, "small-fs")
    os.makedirs(small)

    def on_small_fs(args):
        inner = " ".join(f"'{a}'" for a in command(plans["one"], 1, args))
        return ["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=600k tmpfs '{small}' && exec {inner}"]
    cases = [(["--save", f"{small}/out"], [f"--save {small}/out needs 1.0 MB on a file system with 614 KB free"]),
             (["--save", f"{small}/out", "--save-dtype", "bf16"], None),
             (["--checkpoint", f"{small}/ck", "--checkpoint-every", 1, "--keep", 2],
              [f"--checkpoint {small}/ck needs", "(3 checkpoints of 1.1 MB: --keep 2 and the one being written)"]),
             (["--save", f"{small}/out", "--save-dtype", "bf16", "--checkpoint", f"{small}/ck"],
              [f"--save {small}/out (", f"and --checkpoint {small}/ck (1 checkpoint of 1.1 MB) need", "together"])]
    for extra, needles in cases:
        what = f"outputs on a small file system ({' '.join(map(str, extra))})"
        result = run_job(on_small_fs(["--data", good, "--steps", 3, *extra]), 60, what)
        if needles is None:
            assert result[0] == 0, f"{what}: {result[2]}"
            continue
        expect_failure(result, 2, needles, what)
        assert "step " not in result[1], f"{what}: trained before failing:\n{result[1]}"
    print("no room for --save or --checkpoint, an --eval set shorter than a batch: exit 2 before step 1")


def check_truncated_data(plans, good, work):
    rng = np.random.default_rng(2)
    tokens = os.path.join(work, "train.bin")
    gpt = os.path.join(work, "gpt.dtm")
    run(tool("dtc"), "zoo", "gpt", "--vocab", 64, "--ctx", 16, "--layers", 1, "--heads", 2, "--embd", 16,
        "--seed", 3, "-o", gpt)
    plan = os.path.join(work, "gpt-dp2.dtp")
    run(tool("dtc"), "compile", gpt, "-o", plan, "--batch", 8, "--mesh", "dp=2")
    cases = [("a token file cut short", plan, 2, tokens, lambda p: os.truncate(p, 1024 + 64)),
             ("an .npy file cut short", plans["one"], 1, os.path.join(work, "data-cut", "input.npy"),
              lambda p: os.truncate(p, 128)),
             ("an .npy file rewritten", plans["dp2"], 2, os.path.join(work, "data-rewritten", "input.npy"),
              lambda p: os.utime(p, (1, 1)))]
    for case, (what, plan_path, n, path, damage) in enumerate(cases):
        if path.endswith(".bin"):
            write_tokens(path, rng.integers(0, 64, 400000))
            data = path
        else:
            data = os.path.dirname(path)
            os.makedirs(data, exist_ok=True)
            for name in ("input.npy", "target.npy"):
                with open(os.path.join(good, name), "rb") as src, open(os.path.join(data, name), "wb") as dst:
                    dst.write(src.read())
        log = os.path.join(work, f"cut-{case}.jsonl")
        proc = start(command(plan_path, n, ["--data", data, "--steps", 1000000, "--log", log]))
        wait_until(lambda: logged_steps(log) >= 5 or proc.poll() is not None, 60, f"{what}: a few steps")
        damage(path)
        begin = time.time()
        result = finish(proc, 30, what)
        expect_failure(result, 2, [os.path.basename(path), "changed"], what)
        assert result[0] != 135 and "Bus error" not in result[2], result[2]
        strict_json_lines(log)
        print(f"{what}: exit 2 in {time.time() - begin:.2f} s")


def main():
    with tempfile.TemporaryDirectory() as work:
        plans, good, bad = make_inputs(work)
        check_nonfinite_data(plans, bad, work)
        check_huge_lr(plans, good, work)
        check_nonfinite_weights(plans, work)
        check_fp16_skips(plans, good, work)
        check_unwritable_outputs(plans, good, work)
        check_room_and_short_eval(plans, good, work)
        check_truncated_data(plans, good, work)
    print("input faults: OK")


if __name__ == "__main__":
    main()
