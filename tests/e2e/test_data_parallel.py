"""Data-parallel parity: a plan compiled with `--mesh dp=N` (and ZeRO stages 1 to 3, and gradient
accumulation) and run on N MPI processes must train exactly as the single-device plan on the
same global batches: losses and final weights within 1e-5 (relative; max |diff| / max |w| per
tensor). What differs is only the order of floating-point sums (each device sums its slice,
then the all-reduce sums the devices; accumulation sums micro-batches).

BatchNorm: dtc computes batch statistics over the global batch (PyTorch's SyncBatchNorm), so
the ConvNet matches its single-device run too; plain PyTorch DDP would use per-device
statistics instead."""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import subprocess  # noqa: E402

from dtc_harness import batches, load_safetensors, read_log, run, tool, weight_error, write_tokens  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]
TOLERANCE = 1e-5


def train(model, work, name, batch, flags, devices, data, steps, seed, extra=()):
    plan = os.path.join(work, f"{name}.dtp")
    run(tool("dtc"), "compile", model, "-o", plan, "--batch", batch, *flags)
    log, save = os.path.join(work, f"{name}.jsonl"), os.path.join(work, f"{name}-final")
    cmd = [tool("dtrun"), plan, "--data", data, "--steps", steps, "--seed", seed, "--log", log,
           "--save", save, "--threads", 1, *extra]
    out = run(*(MPIRUN + [devices] + cmd if devices > 1 else cmd)).stdout
    entries = read_log(log)
    assert [e["step"] for e in entries] == list(range(1, steps + 1)), f"{name}: bad log"
    # Only rank 0 prints: one header line, one line per step, maybe one eval line.
    assert sum(line.startswith("plan ") for line in out.splitlines()) == 1, f"{name}: {out}"
    evals = [line for line in out.splitlines() if line.startswith("eval:")]
    return ([e["loss"] for e in entries], load_safetensors(os.path.join(save, "model.safetensors")),
            evals[0] if evals else None)


def compare(model_name, model, work, batch, optim, data, steps, seed, configs, extra=()):
    ref_losses, ref_final, ref_eval = train(model, work, f"{model_name}-single", batch, optim, 1,
                                            data, steps, seed, extra)
    assert all(np.isfinite(ref_losses)), f"{model_name}: {ref_losses}"
    for config in configs:
        # (name, flags, devices[, micro-batch size]): with --accumulate K the micro-batch is
        # batch/K, and the step must equal the single-device step on the whole batch.
        name, flags, devices = config[:3]
        micro = config[3] if len(config) > 3 else batch
        losses, final, evaluation = train(model, work, f"{model_name}-{name}", micro, optim + flags,
                                          devices, data, steps, seed, extra)
        loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
        worst = max(ref_final, key=lambda k: weight_error({k: final[k]}, {k: ref_final[k]}))
        weight_err = weight_error(final, ref_final)
        print(f"{model_name} {name}: max loss rel err {loss_err:.2e}, max weight rel err "
              f"{weight_err:.2e} ({worst})" + (f"; {evaluation}" if evaluation else ""))
        assert sorted(final) == sorted(ref_final), f"{model_name} {name}: parameter names differ"
        assert loss_err <= TOLERANCE, f"{model_name} {name}: losses {losses} vs {ref_losses}"
        assert weight_err <= TOLERANCE, f"{model_name} {name}: weights differ by {weight_err}"
        if ref_eval:
            ours = float(evaluation.split("loss ")[1].split()[0])
            theirs = float(ref_eval.split("loss ")[1].split()[0])
            assert abs(ours - theirs) <= TOLERANCE * abs(theirs), f"{evaluation} vs {ref_eval}"
            assert evaluation.split("|")[1:] == ref_eval.split("|")[1:], "accuracy differs"


DP = [("dp1", ["--mesh", "dp=1"], 1), ("dp2", ["--mesh", "dp=2"], 2), ("dp4", ["--mesh", "dp=4"], 4),
      ("dp2-zero1", ["--mesh", "dp=2", "--zero", 1], 2), ("dp4-zero1", ["--mesh", "dp=4", "--zero", 1], 4),
      ("dp2-bucket0", ["--mesh", "dp=2", "--bucket-mb", 0], 2),
      ("dp4-zero2", ["--mesh", "dp=4", "--zero", 2], 4), ("dp2-zero3", ["--mesh", "dp=2", "--zero", 3], 2),
      ("dp4-zero3", ["--mesh", "dp=4", "--zero", 3], 4),
      # Hybrid sharding (FSDP's HYBRID_SHARD): shards over dp, replicas over dp_replicate.
      ("hybrid-2x2-zero3", ["--mesh", "dp_replicate=2,dp=2", "--zero", 3], 4)]


def accumulation(batch):
    """Gradient accumulation, alone and with data parallelism and ZeRO."""
    return [("acc4", ["--accumulate", 4], 1, batch // 4),
            ("dp2-acc2", ["--mesh", "dp=2", "--accumulate", 2], 2, batch // 2),
            ("dp2-zero1-acc4", ["--mesh", "dp=2", "--zero", 1, "--accumulate", 4], 2, batch // 4),
            ("dp2-zero2-acc4", ["--mesh", "dp=2", "--zero", 2, "--accumulate", 4], 2, batch // 4),
            ("dp2-zero3-acc2", ["--mesh", "dp=2", "--zero", 3, "--accumulate", 2], 2, batch // 2)]


def check_failing_rank(work):
    """A rank that fails while the other waits in a collective must end the job, not hang it:
    labels out of range only in rank 1's half of the third step's batch."""
    rng = np.random.default_rng(5)
    data = os.path.join(work, "faulty")
    os.makedirs(data)
    x = rng.standard_normal((64, 784)).astype(np.float32)
    y = rng.integers(0, 10, 64).astype(np.int64)
    third = batches(64, 16, 3, 3)[2]
    y[third[8:]] = 99
    np.save(os.path.join(data, "input.npy"), x)
    np.save(os.path.join(data, "target.npy"), y)
    run(tool("dtc"), "zoo", "mlp", "-o", os.path.join(work, "f.dtm"))
    plan = os.path.join(work, "f.dtp")
    run(tool("dtc"), "compile", os.path.join(work, "f.dtm"), "-o", plan, "--batch", 16, "--mesh", "dp=2")
    proc = subprocess.run(MPIRUN + ["2", tool("dtrun"), plan, "--data", data, "--steps", "5", "--seed", "3",
                                    "--threads", "1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0, "a failing rank must fail the job"
    assert "dtrun: error: rank 1: " in proc.stderr and "label" in proc.stderr, proc.stderr
    steps = [line for line in proc.stdout.splitlines() if line.startswith("step")]
    assert len(steps) == 2, proc.stdout  # steps 1 and 2 ran; step 3 failed on rank 1
    print(f"failing rank: job ended with exit {proc.returncode} after {len(steps)} steps: "
          f"{[line for line in proc.stderr.splitlines() if 'rank 1' in line][0]}")


def check_trace(work, data):
    """dtrun --trace: one row per rank (named with its mesh coordinates), one box per kernel
    call of every step, the gradient all-reduce on both rows."""
    import json
    plan = os.path.join(work, "mlp-dp2.dtp")  # compiled by compare() above
    trace = os.path.join(work, "trace.json")
    run(*(MPIRUN + ["2", tool("dtrun"), plan, "--data", data, "--steps", 3, "--threads", 1,
                    "--trace", trace]))
    events = json.load(open(trace))["traceEvents"]
    names = sorted(e["args"]["name"] for e in events if e["ph"] == "M")
    assert names == ["rank 0 (dp=0)", "rank 1 (dp=1)"], names
    boxes = [e for e in events if e["ph"] == "X"]
    steps = json.loads(run(tool("dtc"), "inspect", plan, "--json").stdout)
    per_step = {f["name"]: len(f["steps"]) for f in steps["functions"]}["train_step"]
    for rank in (0, 1):
        mine = [e for e in boxes if e["pid"] == rank]
        assert len(mine) == 3 * per_step, (rank, len(mine), per_step)
        assert sum(e["name"] == "all_reduce" for e in mine) == 3, rank
        assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in mine)
    print(f"trace: {len(boxes)} kernel calls on 2 ranks, {per_step} per step")


def make_models(work, rng):
    """The three zoo models and data for them (both parallelism tests use these): MLP on 96
    random samples, GPT-mini on a noisy token cycle, ConvNet on 64 random images."""
    m = {"data": os.path.join(work, "data"), "cdata": os.path.join(work, "cdata"),
         "tokens": os.path.join(work, "train.bin"), "mlp": os.path.join(work, "mlp.dtm"),
         "gpt": os.path.join(work, "gpt.dtm"), "convnet": os.path.join(work, "convnet.dtm")}
    os.makedirs(m["data"])
    np.save(os.path.join(m["data"], "input.npy"), rng.standard_normal((96, 784)).astype(np.float32))
    np.save(os.path.join(m["data"], "target.npy"), rng.integers(0, 10, 96).astype(np.int64))
    run(tool("dtc"), "zoo", "mlp", "--seed", 5, "-o", m["mlp"])
    write_tokens(m["tokens"], ((np.arange(3000) * 7 + rng.integers(0, 3, 3000)) % 64).astype(np.int64))
    run(tool("dtc"), "zoo", "gpt", "--vocab", 64, "--ctx", 16, "--layers", 2, "--heads", 4,
        "--embd", 32, "--seed", 11, "-o", m["gpt"])
    os.makedirs(m["cdata"])
    np.save(os.path.join(m["cdata"], "input.npy"), rng.random((64, 784), dtype=np.float32))
    np.save(os.path.join(m["cdata"], "target.npy"), rng.integers(0, 10, 64).astype(np.int64))
    run(tool("dtc"), "zoo", "convnet", "--seed", 2, "-o", m["convnet"])
    return m


def main():
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as work:
        m = make_models(work, rng)
        data, cdata = m["data"], m["cdata"]
        compare("mlp", m["mlp"], work, 32, ["--optimizer", "sgd", "--lr", 0.05, "--momentum", 0.9,
                                            "--weight-decay", 1e-3], data, 8, 3, DP + accumulation(32),
                ("--eval", data))
        compare("mlp-adamw", m["mlp"], work, 32, ["--optimizer", "adamw", "--lr", 2e-3, "--eps", 1e-4],
                data, 8, 3, DP[1:4])
        # Plain SGD has no state to shard: ZeRO-2/3 place the update on the shard themselves.
        compare("mlp-plain-sgd", m["mlp"], work, 32, ["--optimizer", "sgd", "--lr", 0.05], data, 4, 3,
                [DP[6], DP[7]], ("--eval", data))
        compare("gpt", m["gpt"], work, 8, ["--optimizer", "adamw", "--lr", 3e-3, "--eps", 1e-4],
                m["tokens"], 6, 5, DP[:4] + DP[6:] + accumulation(8) +
                [("hybrid-2x2-zero2-acc2", ["--mesh", "dp_replicate=2,dp=2", "--zero", 2, "--accumulate", 2], 4, 4)])
        compare("convnet", m["convnet"], work, 16, ["--optimizer", "sgd", "--lr", 0.02, "--momentum", 0.9],
                cdata, 8, 7, DP[1:4] + DP[7:8], ("--eval", cdata))
        check_trace(work, data)
        check_failing_rank(work)
    print("data parallel parity: ok")


if __name__ == "__main__":
    main()
