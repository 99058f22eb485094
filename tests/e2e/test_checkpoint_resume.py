"""Checkpoints and resume (dtrun --checkpoint / --resume).

1. Exact resume: a run that crashes (a rank killed by SIGKILL after step 5, its last checkpoint
   at step 4) and is started again with the same command plus --resume must be bit-identical to
   the run that never stopped: every logged loss and every byte of the final weights. On one
   device (crossing an epoch of the data), dp=2 with ZeRO-1, tp=2 (Megatron's splits), pp=2
   (1F1B), fp16 with dynamic loss scaling (the scale continues where it was), and the ConvNet
   with SGD momentum (BatchNorm's running statistics continue too).
2. Resharding: a checkpoint written under one mesh continues under another (each rank reads the
   saved boxes that overlap its own); the continuation must equal the uninterrupted
   single-device run within the partitioned-parity bounds of the other tests (losses and
   weights 1e-5, relative; bf16 runs: losses 1e-3, as test_mixed_precision.py), for six pairs
   including a 3-D grid to one device and one device to a 3-D grid, and the f32 master state of
   a bf16 run.
3. Token shards: the token file cut into three shards (a folder of them, and a glob) trains
   exactly as the file (every loss and weight bit-identical: windows are drawn over the
   concatenation, and some of them span two shards), and resumes bit-identically after a crash."""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from checkpoint_harness import (compile_plan, devices_of, dtrun, index_of, latest_step, losses,  # noqa: E402
                                same_weights, saved_tensor, weights)
from dtc_harness import read_tokens, window_offsets, weight_error, write_tokens  # noqa: E402
from test_data_parallel import make_models  # noqa: E402

STEPS, CRASH_AFTER, EVERY = 8, 5, 2
TOLERANCE = 1e-5
BF16_LOSS_TOLERANCE = 1e-3  # partitioned bf16 against single-device bf16 (test_mixed_precision.py)


def exact_resume(work, name, model, batch, flags, data, seed):
    """The uninterrupted run against crash-then-resume, same plan, same command."""
    plan = compile_plan(model, work, name, batch, flags)
    devices = devices_of(flags)
    ref_log, ref_save = (os.path.join(work, f"{name}-{s}") for s in ("ref.jsonl", "ref"))
    dtrun(plan, devices, ["--data", data, "--steps", STEPS, "--seed", seed, "--log", ref_log, "--save", ref_save])

    log, save, ckpt = (os.path.join(work, f"{name}-{s}") for s in ("run.jsonl", "run", "ckpt"))
    command = ["--data", data, "--steps", STEPS, "--seed", seed, "--log", log, "--save", save,
               "--checkpoint", ckpt, "--checkpoint-every", EVERY]
    # The last rank dies right after step 5: the job ends, step-4 is the newest checkpoint.
    crashed = dtrun(plan, devices, command, fault=f"after-step@{devices - 1}#{CRASH_AFTER}", expect_ok=False)
    assert crashed.returncode != 0, f"{name}: the fault did not end the run"
    assert latest_step(ckpt) == 4, (name, os.listdir(ckpt))
    assert not os.path.exists(os.path.join(save, "model.safetensors")), f"{name}: saved before the end"
    # The crashed run's log has steps 1..5 (flushed per step); the resumed run keeps 1..4.
    assert [s for s, _ in losses(log)] == list(range(1, CRASH_AFTER + 1)), losses(log)

    out = dtrun(plan, devices, command + ["--resume", ckpt]).stdout
    assert "resumed at step 4" in out, out
    ours, ref = losses(log), losses(ref_log)
    assert [s for s, _ in ours] == list(range(1, STEPS + 1)), ours
    assert ours == ref, f"{name}: losses differ after resume:\n{ours}\n{ref}"
    assert same_weights(weights(save), weights(ref_save)), f"{name}: final weights differ after resume"
    assert latest_step(ckpt) == STEPS
    print(f"exact resume {name} ({devices} process{'es' if devices > 1 else ''}): crashed after step "
          f"{CRASH_AFTER}, resumed from step 4: {STEPS} losses and every weight bit-identical")
    return ckpt


def check_loss_scale_continues(ckpt):
    """The fp16 run's loss scale and good-step counter are in the checkpoint, and the scale moved
    (the run starts at 2^24, where the scaled gradients overflow and the scale halves)."""
    scales = {}
    for step in (4, STEPS):
        step_dir = os.path.join(ckpt, f"step-{step}")
        scales[step] = (float(saved_tensor(step_dir, "loss_scale")), float(saved_tensor(step_dir, "loss_scale.good_steps")))
    assert scales[4][0] < 2.0 ** 24, scales
    print(f"fp16 loss scale: {scales[4]} at step 4, {scales[STEPS]} at step {STEPS} (scale, good steps)")


def reshard(work, model, data, seed, batch, optim, name, a_flags, b_flags, ref):
    """Steps 1..3 under mesh A with a checkpoint, steps 4..6 resumed under mesh B."""
    low = "--precision" in optim
    steps, at = 6, 3
    a = compile_plan(model, work, f"rs-{name}-a", batch, optim + a_flags)
    b = compile_plan(model, work, f"rs-{name}-b", batch, optim + b_flags)
    ckpt, log, save = (os.path.join(work, f"rs-{name}-{s}") for s in ("ckpt", "log.jsonl", "final"))
    dtrun(a, devices_of(a_flags), ["--data", data, "--steps", at, "--seed", seed, "--checkpoint", ckpt])
    index = index_of(os.path.join(ckpt, f"step-{at}"))
    files = len(index["files"])
    # Master weights and optimizer state stay f32 under mixed precision.
    assert all(t["dtype"] == "F32" for t in index["tensors"].values()), name
    dtrun(b, devices_of(b_flags), ["--data", data, "--steps", steps, "--resume", ckpt, "--log", log, "--save", save])
    ref_losses, ref_final = ref
    ours = dict(losses(log))
    assert sorted(ours) == list(range(at + 1, steps + 1)), ours
    loss_err = max(abs(ours[s] - ref_losses[s]) / abs(ref_losses[s]) for s in ours)
    final = weights(save)
    assert sorted(final) == sorted(ref_final), name
    weight_err = weight_error(final, ref_final)
    print(f"reshard {name}: written by {files} rank file(s), continued on {devices_of(b_flags)} process(es): "
          f"max loss rel err {loss_err:.2e}, max weight rel err {weight_err:.2e}")
    if low:
        assert loss_err <= BF16_LOSS_TOLERANCE, name
    else:
        assert loss_err <= TOLERANCE and weight_err <= TOLERANCE, name


def uninterrupted(work, model, data, seed, batch, optim, name):
    plan = compile_plan(model, work, f"rs-ref-{name}", batch, optim)
    log, save = os.path.join(work, f"rs-ref-{name}.jsonl"), os.path.join(work, f"rs-ref-{name}")
    dtrun(plan, 1, ["--data", data, "--steps", 6, "--seed", seed, "--log", log, "--save", save])
    return dict(losses(log)), weights(save)


def token_shards(work, tokens, seed, t):
    """The token file cut into three shards of a folder; asserts some step's window spans two."""
    ids = read_tokens(tokens)
    # Cut inside two windows the run draws (steps 2 and 6): both sides of each cut are trained on
    # and resume (at step 4) continues across the second.
    cuts = sorted(window_offsets(len(ids), 8, t, seed, step)[0] + t // 2 for step in (1, 5))
    folder = os.path.join(work, "shards")
    os.makedirs(folder)
    for k, part in enumerate(np.split(ids, cuts)):
        write_tokens(os.path.join(folder, f"train_{k + 1:06d}.bin"), part)
    spans = [o for step in range(STEPS) for o in window_offsets(len(ids), 8, t, seed, step)
             if any(o < c <= o + t for c in cuts)]
    assert spans, "no window spans two shards: the check would not test the boundary"
    return folder, len(spans)


def main():
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as work:
        m = make_models(work, rng)
        adamw = ["--optimizer", "adamw", "--lr", 2e-3, "--eps", 1e-4]
        # 96 samples, 32 per step: step 4 ends the second epoch's first batch.
        exact_resume(work, "mlp", m["mlp"], 32, adamw, m["data"], 3)
        exact_resume(work, "mlp-dp2-zero1", m["mlp"], 32, adamw + ["--mesh", "dp=2", "--zero", 1], m["data"], 3)
        exact_resume(work, "gpt-tp2", m["gpt"], 8, adamw + ["--mesh", "tp=2"], m["tokens"], 5)
        exact_resume(work, "gpt-pp2-1f1b", m["gpt"], 8,
                     adamw + ["--mesh", "pp=2", "--microbatches", 4, "--schedule", "1f1b"], m["tokens"], 5)
        fp16 = exact_resume(work, "mlp-fp16", m["mlp"], 32,
                            ["--optimizer", "sgd", "--lr", 0.05, "--momentum", 0.9, "--precision", "fp16",
                             "--loss-scale", 2.0 ** 24], m["data"], 3)
        check_loss_scale_continues(fp16)
        exact_resume(work, "convnet-sgd", m["convnet"], 16,
                     ["--optimizer", "sgd", "--lr", 0.02, "--momentum", 0.9], m["cdata"], 7)

        gpt, tokens, seed = m["gpt"], m["tokens"], 5
        grid = ["--mesh", "dp=2,tp=2,pp=2", "--microbatches", 2, "--zero", 1]
        ref = uninterrupted(work, gpt, tokens, seed, 8, adamw, "gpt")
        pairs = [("one-to-3d", [], grid),
                 ("3d-to-one", grid, []),
                 ("dp2-zero1-to-tp2-sp", ["--mesh", "dp=2", "--zero", 1], ["--mesh", "tp=2", "--sequence-parallel"]),
                 ("tp2-to-pp2-1f1b", ["--mesh", "tp=2"], ["--mesh", "pp=2", "--microbatches", 4]),
                 ("pp2-gpipe-to-dp2-tp2-zero1", ["--mesh", "pp=2", "--microbatches", 2, "--schedule", "gpipe"],
                  ["--mesh", "dp=2,tp=2", "--zero", 1]),
                 ("dp2-zero3-to-tp2", ["--mesh", "dp=2", "--zero", 3], ["--mesh", "tp=2"]),
                 ("one-to-dp2-tp2-zero3", [], ["--mesh", "dp=2,tp=2", "--zero", 3]),
                 ("hybrid-zero3-to-dp4-zero1", ["--mesh", "dp_replicate=2,dp=2", "--zero", 3],
                  ["--mesh", "dp=4", "--zero", 1])]
        for name, a_flags, b_flags in pairs:
            reshard(work, gpt, tokens, seed, 8, adamw, name, a_flags, b_flags, ref)
        bf16 = adamw + ["--precision", "bf16"]
        ref16 = uninterrupted(work, gpt, tokens, seed, 8, bf16, "gpt-bf16")
        reshard(work, gpt, tokens, seed, 8, bf16, "bf16-dp2-to-tp2", ["--mesh", "dp=2"], ["--mesh", "tp=2"], ref16)
        # Token shards against the one file they cut.
        folder, spanning = token_shards(work, tokens, seed, 16)
        exact_resume(work, "gpt-shards", gpt, 8, adamw, folder, seed)
        exact_resume(work, "gpt-one-file", gpt, 8, adamw, tokens, seed)
        plan = compile_plan(gpt, work, "gpt-glob", 8, adamw)
        glob_log = os.path.join(work, "gpt-glob.jsonl")
        dtrun(plan, 1, ["--data", os.path.join(folder, "train_*.bin"), "--steps", STEPS, "--seed", seed,
                        "--log", glob_log, "--save", os.path.join(work, "gpt-glob")])
        one = losses(os.path.join(work, "gpt-one-file-ref.jsonl"))
        assert losses(os.path.join(work, "gpt-shards-ref.jsonl")) == one == losses(glob_log), "shards differ"
        assert same_weights(weights(os.path.join(work, "gpt-shards-ref")), weights(os.path.join(work, "gpt-one-file-ref")))
        print(f"token shards: 3 shards (a folder, a glob) train as the one file, bit for bit; {spanning} windows "
              f"span two shards")
    print("checkpoint resume: ok")


if __name__ == "__main__":
    main()
