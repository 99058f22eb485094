"""Context parallelism: a GPT with a context of 512 tokens, its sequences split over a `cp` mesh
axis, must train exactly as the single-device plan: 10 AdamW steps, losses and final weights
within 1e-5 relative (test_data_parallel.py's check), on every layout: cp=2, cp=4 and dp=2 x cp=2
load-balanced (2·cp chunks, rank i holding i and 2·cp−1−i), cp=2 with contiguous positions, and
cp=2 composed with tensor parallelism (Megatron's, with and without sequence parallelism), a
2-stage pipeline (1F1B and zero-bubble ZB-V), ZeRO-1 and ZeRO-3 over dp, and full
recomputation; in bf16 on cp=2 and dp=2 x cp=2 to the bound of partitioned bf16 plans; a Llama (rotary tables, grouped-query attention) on
cp=2, cp=4, cp=2 x tp=2 and cp=2 x tp=2 with sequence parallelism (all-gather, and ring with full
recomputation), its sequence-parallel plan holding every norm on T/(cp·tp) positions; the same GPT reading .npy arrays instead of a token file; and a
checkpoint written on cp=2 resuming on cp=4 and on one device. Each rank reads only its
positions of every window (the data loader), holds T/cp of every activation, and reaches the
other ranks' keys as the layout's attention method says."""
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import load_safetensors, read_log, read_tokens, run, tool, weight_error, write_tokens  # noqa: E402
from test_data_parallel import MPIRUN, TOLERANCE, compare, train  # noqa: E402
from test_mixed_precision import LOSS_TOLERANCE  # noqa: E402

V, T, L, H, C = 64, 512, 2, 4, 32
B, STEPS, SEED = 4, 10, 1
OPTIM = ["--optimizer", "adamw", "--lr", 3e-3, "--eps", 1e-4, "--weight-decay", 0.1,
         "--fused-attention"]


def layouts():
    gather = ["--cp-attention", "all-gather"]
    return [("cp2", ["--mesh", "cp=2", *gather], 2),
            ("cp4", ["--mesh", "cp=4", *gather], 4),
            ("dp2-cp2", ["--mesh", "dp=2,cp=2", *gather], 4),
            ("cp2-contiguous", ["--mesh", "cp=2", *gather, "--no-cp-load-balance"], 2),
            # Composed: Megatron's tensor parallelism (with sequence parallelism), a pipeline,
            # ZeRO over dp, full recomputation.
            ("cp2-tp2", ["--mesh", "cp=2,tp=2", *gather], 4),
            ("cp2-tp2-sp", ["--mesh", "cp=2,tp=2", *gather, "--sequence-parallel"], 4),
            ("cp2-pp2", ["--mesh", "cp=2,pp=2", *gather, "--microbatches", 2], 4),
            ("cp2-pp2-zb-v", ["--mesh", "cp=2,pp=2", *gather, "--microbatches", 2, "--schedule", "zb-v"], 4),
            ("dp2-cp2-zero1", ["--mesh", "dp=2,cp=2", *gather, "--zero", 1], 4),
            ("dp2-cp2-zero3", ["--mesh", "dp=2,cp=2", *gather, "--zero", 3], 4),
            ("cp2-recompute", ["--mesh", "cp=2", *gather, "--recompute", "full"], 2)]


def check_resharded_resume(model, work, data):
    """Nothing in a checkpoint depends on cp: one written on cp=2 with contiguous positions (the
    position table split over cp) after 5 steps resumes to step 10 on cp=4 load-balanced (the table
    whole) and on one device, and steps 6-10 and the final weights equal the uninterrupted
    one-device run's."""
    ref_losses, ref_final, _ = train(model, work, "ckpt-whole", B, OPTIM, 1, data, STEPS, SEED)
    plans = {}
    for name, mesh in (("one", []), ("cp2", ["--mesh", "cp=2", "--no-cp-load-balance"]),
                       ("cp4", ["--mesh", "cp=4"])):
        plans[name] = os.path.join(work, f"ckpt-{name}.dtp")
        run(tool("dtc"), "compile", model, "-o", plans[name], "--batch", B, *OPTIM, *mesh)
    checkpoint = os.path.join(work, "ckpt-cp2")
    common = ["--data", data, "--seed", SEED, "--threads", 1]
    run(*MPIRUN, 2, tool("dtrun"), plans["cp2"], *common, "--steps", STEPS // 2, "--checkpoint",
        checkpoint)
    for name, launch in (("cp4", [*MPIRUN, 4]), ("one", [])):
        log, save = os.path.join(work, f"resumed-{name}.jsonl"), os.path.join(work, f"resumed-{name}")
        run(*launch, tool("dtrun"), plans[name], *common, "--steps", STEPS, "--resume", checkpoint,
            "--log", log, "--save", save)
        losses = [e["loss"] for e in read_log(log)]
        assert len(losses) == STEPS - STEPS // 2, f"{name}: resumed steps {losses}"
        loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses[STEPS // 2:]))
        weight_err = weight_error(load_safetensors(os.path.join(save, "model.safetensors")), ref_final)
        print(f"checkpoint cp2 -> {name}: max loss rel err {loss_err:.2e}, max weight rel err "
              f"{weight_err:.2e}")
        assert loss_err <= TOLERANCE and weight_err <= TOLERANCE, f"resumed on {name}: {losses}"


def check_bf16(model, work, data, layouts=(("cp2", ["--mesh", "cp=2"], 2),
                                           ("dp2-cp2", ["--mesh", "dp=2,cp=2"], 4))):
    """bf16 (mixed precision) on each of `layouts` (name, flags, processes) against the
    single-device bf16 plan, to test_mixed_precision.py's bound for partitioned bf16 plans
    (summation order differs, and with it the odd bf16 rounding)."""
    losses = {}
    for name, flags, devices in (("single", [], 1), *layouts):
        losses[name] = train(model, work, f"bf16-{name}", B, OPTIM + ["--precision", "bf16", *flags],
                             devices, data, STEPS, SEED)[0]
    for name, _, _ in layouts:
        err = max(abs(a - b) / abs(b) for a, b in zip(losses[name], losses["single"]))
        print(f"gpt-ctx512 bf16 {name}: max loss rel err vs single device {err:.2e}")
        assert err <= LOSS_TOLERANCE, (name, losses[name], losses["single"])


def check_sequence_parallel_plan(llama, work):
    """Sequence parallelism composes with context parallelism on RMSNorm blocks as on
    LayerNorm's: on cp=2 x tp=2 with ring attention, full recomputation and bf16, every norm runs
    on T/(cp·tp) positions (the residual stream split over both axes), and no weight is gathered
    whole over tp (each linear keeps its split, recomputed or not); the loss reads the logits as
    each rank holds them, [B, T/cp, V/tp] (no rank gathers a whole sequence's logits)."""
    plan = os.path.join(work, "llama-cp2-tp2-sp-plan.dtp")
    run(tool("dtc"), "compile", llama, "-o", plan, "--batch", B, *OPTIM, "--mesh", "cp=2,tp=2",
        "--sequence-parallel", "--cp-attention", "ring", "--recompute", "full", "--precision", "bf16")
    steps = next(f for f in json.loads(run(tool("dtc"), "inspect", plan, "--json").stdout)["functions"]
                 if f["name"] == "train_step")["steps"]
    norms = {tuple(s["outputs"][0]["shape"]) for s in steps if "rms_norm" in s["op"]}
    assert norms and all(shape[1] == T // 4 for shape in norms), norms
    gathered = [(s["loc"], s["outputs"][0]["shape"]) for s in steps
                if s["op"] == "all_gather" and len(s["outputs"][0]["shape"]) == 2
                and s["outputs"][0]["dtype"] != "i64"]  # the token ids are gathered for the loss
    assert not gathered, f"weights gathered whole: {gathered}"
    logits = {tuple(s["outputs"][0]["shape"]) for s in steps if s["op"] == "cross_entropy_parts_grad"}
    assert logits == {(B, T // 2, V // 2)}, logits
    print(f"llama cp2-tp2-sp ring: every norm on {T // 4} of {T} positions, no weight gathered, "
          f"logits read as {logits.pop()}")


def main():
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt.dtm")
        run(tool("dtc"), "zoo", "gpt", "--vocab", V, "--ctx", T, "--layers", L, "--heads", H,
            "--embd", C, "--seed", 3, "-o", model)
        data = os.path.join(work, "tokens.bin")
        write_tokens(data, np.random.default_rng(0).integers(0, V, 20000).astype(np.int32))
        compare("gpt-ctx512", model, work, B, OPTIM, data, STEPS, SEED, layouts())
        check_bf16(model, work, data)
        check_resharded_resume(model, work, data)
        llama = os.path.join(work, "llama.dtm")
        run(tool("dtc"), "zoo", "llama", "--vocab", V, "--ctx", T, "--layers", L, "--heads", H,
            "--kv-heads", 2, "--embd", C, "--seed", 3, "-o", llama)
        ring_sp = ["--mesh", "cp=2,tp=2", "--cp-attention", "ring", "--sequence-parallel"]
        compare("llama-ctx512", llama, work, B, OPTIM, data, STEPS, SEED,
                [layouts()[0], layouts()[1], layouts()[4], layouts()[5],
                 ("cp2-tp2-sp-ring-recompute", [*ring_sp, "--recompute", "full"], 4)])
        check_sequence_parallel_plan(llama, work)
        # The loader's other source: whole windows as .npy rows, each rank reading its positions.
        arrays = os.path.join(work, "arrays")
        os.makedirs(arrays)
        tokens = read_tokens(data)
        starts = np.arange(0, 32 * T, T)
        np.save(os.path.join(arrays, "idx.npy"), np.stack([tokens[s:s + T] for s in starts]).astype(np.int64))
        np.save(os.path.join(arrays, "targets.npy"),
                np.stack([tokens[s + 1:s + T + 1] for s in starts]).astype(np.int64))
        compare("gpt-npy", model, work, B, OPTIM, arrays, STEPS, SEED, layouts()[:1])
    print("context parallel: OK")


if __name__ == "__main__":
    main()
