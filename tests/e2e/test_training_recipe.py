"""The training recipe against PyTorch, and partitioned against the single-device plan.

1. nanoGPT's recipe on the GPT (`dtc zoo gpt`): torch.optim.AdamW with two parameter groups
   (weight decay on matrices and embeddings, none on biases and LayerNorm weights: dtc's
   --no-decay '*.bias' --no-decay '*ln_*'), linear warmup then cosine decay to a floor, and
   torch.nn.utils.clip_grad_norm_ at a bound the gradients exceed in most steps. 20 steps: loss
   and gradient norm within 1e-5 relative, the learning rate dtrun logs exactly Python's.
2. Hugging Face's linear schedule (get_linear_schedule_with_warmup, through LambdaLR) with
   SGD-momentum on an MLP: the same bounds, the learning rate exactly LambdaLR's.
3. The GPT recipe partitioned (dp=2 with ZeRO-1, tp=2 with sequence parallelism, pp=2 1F1B,
   dp=2 x tp=2 x pp=2, bf16 on dp=2) against the single-device plan of the same precision:
   losses, norms and final weights within 1e-5, learning rates equal; in bf16, as the
   mixed-precision tests hold partitioned bf16 runs, losses within 1e-3 (and norms within 1e-2:
   a bf16 rounding tie that another summation order breaks the other way moves a gradient by
   a bf16 unit). As in the data-parallel
   tests, AdamW's eps is 1e-4 there: with 1e-8 its division by sqrt(v) + eps turns the last-bit
   differences of other summation orders on near-zero gradients into 1e-4 weight differences
   (the losses and norms agree to 1e-6 either way).
4. Periodic evaluation: --eval-every and --eval-batches log {"step", "val_loss"} as the
   evaluation at the end does.
5. Sampling as nanoGPT's sample.py: a seed repeats its draw, another seed draws otherwise, and
   top-k 1 is the greedy continuation (temperature 0)."""
import json
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import (batches, load_safetensors, read_log, run, tool, weight_error,  # noqa: E402
                         window_offsets, windows, write_tokens)
import test_gpt_parity as gpt  # noqa: E402
import test_mlp_parity as mlp  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]
STEPS, SEED = 20, 5
LR, MIN_LR, WARMUP, DECAY, CLIP = 3e-3, 3e-4, 4, 16, 0.3
GPT_RECIPE = ["--optimizer", "adamw", "--lr", LR, "--weight-decay", 0.1, "--no-decay", "*.bias",
              "--no-decay", "*ln_*", "--lr-schedule", "cosine", "--warmup-steps", WARMUP,
              "--decay-steps", DECAY, "--min-lr", MIN_LR, "--clip-grad-norm", CLIP]


def cosine_lr(s):
    """The schedule as the recipe writes it, s the 0-based update."""
    if s < WARMUP:
        return LR * (s + 1) / WARMUP
    if s > DECAY:
        return MIN_LR
    ratio = (s - WARMUP) / (DECAY - WARMUP)
    return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (LR - MIN_LR)


def dtrun(plan, work, name, data, devices=1, extra=()):
    """Trains `plan` for STEPS steps; returns (logged steps, final parameters, evaluations, stdout)."""
    log, save = os.path.join(work, f"{name}.jsonl"), os.path.join(work, f"{name}-final")
    cmd = [tool("dtrun"), plan, "--data", data, "--steps", STEPS, "--seed", SEED, "--log", log,
           "--save", save, "--threads", 1 if devices > 1 else 2, *extra]
    out = run(*(MPIRUN + [devices] + cmd if devices > 1 else cmd)).stdout
    steps = read_log(log)
    assert [e["step"] for e in steps] == list(range(1, STEPS + 1)), f"{name}: bad log"
    return steps, load_safetensors(os.path.join(save, "model.safetensors")), read_log(log, evaluations=True), out


def compile_plan(model, work, name, batch, flags):
    plan = os.path.join(work, f"{name}.dtp")
    run(tool("dtc"), "compile", model, "-o", plan, "--batch", batch, *flags)
    return plan


def relative(xs, ys):
    return max(abs(a - b) / abs(b) for a, b in zip(xs, ys))


def gpt_recipe(work, tokens, data, model):
    plan = compile_plan(model, work, "gpt-recipe", gpt.B, GPT_RECIPE)
    run(tool("dtrun"), plan, "--steps", 0, "--save", os.path.join(work, "gpt-init"))
    init = load_safetensors(os.path.join(work, "gpt-init", "model.safetensors"))
    steps, final, _, _ = dtrun(plan, work, "gpt-recipe", data)

    torch_model = gpt.Gpt()
    torch_model.load_state_dict({k: torch.from_numpy(v.copy()).float() for k, v in init.items()})
    params = [p for p in torch_model.parameters()]  # the tied embedding once
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    names = {id(p): n for n, p in torch_model.named_parameters()}
    assert all("bias" in names[id(p)] or "ln_" in names[id(p)] for p in no_decay)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR)
    losses, norms, lrs = [], [], []
    for s in range(STEPS):
        lr = cosine_lr(s)
        for group in opt.param_groups:
            group["lr"] = lr
        offsets = window_offsets(len(tokens), gpt.B, gpt.T, SEED, s)
        idx, tgt = map(torch.from_numpy, windows(tokens, offsets, gpt.T))
        opt.zero_grad()
        loss = torch_model(idx, tgt)
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(params, CLIP).item())
        opt.step()
        losses.append(loss.item())
        lrs.append(lr)
    ref_final = {k: v.detach().double().numpy() for k, v in torch_model.state_dict().items()}

    loss_err = relative([e["loss"] for e in steps], losses)
    norm_err = relative([e["grad_norm"] for e in steps], norms)
    clipped = sum(n > CLIP for n in norms)
    print(f"gpt recipe: losses {losses[0]:.6f} -> {losses[-1]:.6f}; clipped in {clipped}/{STEPS} steps; "
          f"max loss rel err {loss_err:.3e}, max grad-norm rel err {norm_err:.3e}; "
          f"weights {weight_error(final, ref_final):.3e}")
    assert clipped >= STEPS // 2, f"clipping was active in {clipped} steps only: {norms}"
    assert [e["lr"] for e in steps] == lrs, f"learning rates differ: {[e['lr'] for e in steps]} vs {lrs}"
    assert loss_err <= 1e-5, f"loss mismatch {[e['loss'] for e in steps]} vs {losses}"
    assert norm_err <= 1e-5, f"grad norm mismatch {[e['grad_norm'] for e in steps]} vs {norms}"
    assert losses[-1] < losses[0], "the loss did not fall"
    # One multi-tensor update per parameter group (two groups here, updated after the clipping
    # norm) computes every element as the per-tensor updates: the same bits.
    fused_plan = compile_plan(model, work, "gpt-recipe-multi-tensor", gpt.B, GPT_RECIPE + ["--multi-tensor"])
    assert inspect_ops(fused_plan).get("multi_tensor_adamw") == 2, inspect_ops(fused_plan)
    fused_steps, fused_final, _, _ = dtrun(fused_plan, work, "gpt-recipe-multi-tensor", data)
    same = lambda log: [(e["loss"], e["grad_norm"]) for e in log]
    assert same(fused_steps) == same(steps) and all(np.array_equal(fused_final[k], final[k]) for k in final), \
        "the multi-tensor optimizer changed the results"
    print("gpt recipe: bit-identical with --multi-tensor (2 multi-tensor updates)")


def inspect_ops(plan):
    """The train_step's kernel counts, from dtc inspect --json."""
    info = json.loads(run(tool("dtc"), "inspect", plan, "--json").stdout)
    step = next(f for f in info["functions"] if f["name"] == "train_step")
    return step["op_counts"]


def mlp_linear_schedule(work):
    rng = np.random.default_rng(0)
    data = os.path.join(work, "mlp-data")
    os.makedirs(data)
    x = rng.standard_normal((mlp.N, mlp.SIZES[0])).astype(np.float32)
    y = rng.integers(0, mlp.SIZES[-1], mlp.N).astype(np.int64)
    np.save(os.path.join(data, "input.npy"), x)
    np.save(os.path.join(data, "target.npy"), y)
    model = os.path.join(work, "mlp.dtm")
    run(tool("dtc"), "zoo", "mlp", "--input", mlp.SIZES[0], "--hidden", "256,128", "--classes", mlp.SIZES[-1],
        "--seed", 5, "-o", model)
    warmup, decay, lr = 5, 25, 0.05
    plan = compile_plan(model, work, "mlp-linear", mlp.BATCH,
                        ["--optimizer", "sgd", "--lr", lr, "--momentum", 0.9, "--weight-decay", 1e-3,
                         "--lr-schedule", "linear", "--warmup-steps", warmup, "--decay-steps", decay,
                         "--log-grad-norm"])
    run(tool("dtrun"), plan, "--steps", 0, "--save", os.path.join(work, "mlp-init"))
    init = load_safetensors(os.path.join(work, "mlp-init", "model.safetensors"))
    steps, _, _, _ = dtrun(plan, work, "mlp-linear", data)

    torch_model = mlp.Mlp()
    torch_model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in init.items()})
    opt = torch.optim.SGD(torch_model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-3)

    def linear_with_warmup(step):  # transformers.get_linear_schedule_with_warmup
        if step < warmup:
            return float(step) / float(max(1, warmup))
        return max(0.0, float(decay - step) / float(max(1, decay - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, linear_with_warmup)
    losses, norms, lrs = [], [], []
    for idx in batches(len(x), mlp.BATCH, SEED, STEPS):
        lrs.append(scheduler.get_last_lr()[0])
        opt.zero_grad()
        loss = F.cross_entropy(torch_model(torch.from_numpy(x[idx])), torch.from_numpy(y[idx]))
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(torch_model.parameters(), float("inf")).item())
        opt.step()
        scheduler.step()
        losses.append(loss.item())
    loss_err = relative([e["loss"] for e in steps], losses)
    norm_err = relative([e["grad_norm"] for e in steps], norms)
    print(f"mlp linear schedule: losses {losses[0]:.6f} -> {losses[-1]:.6f}; max loss rel err {loss_err:.3e}, "
          f"max grad-norm rel err {norm_err:.3e}")
    assert [e["lr"] for e in steps] == lrs, f"learning rates differ: {[e['lr'] for e in steps]} vs {lrs}"
    assert loss_err <= 1e-5, f"loss mismatch {[e['loss'] for e in steps]} vs {losses}"
    assert norm_err <= 1e-5, f"grad norm mismatch {[e['grad_norm'] for e in steps]} vs {norms}"


def partitioned(work, data, model):
    recipe = GPT_RECIPE + ["--eps", 1e-4]
    ref_plan = compile_plan(model, work, "gpt-eps", gpt.B, recipe)
    ref_steps, ref_final, _, _ = dtrun(ref_plan, work, "gpt-eps", data)
    bf16_plan = compile_plan(model, work, "gpt-bf16", gpt.B, recipe + ["--precision", "bf16"])
    bf16_steps, bf16_final, _, _ = dtrun(bf16_plan, work, "gpt-bf16", data)
    layouts = [
        ("dp2-zero1", 2, ["--mesh", "dp=2", "--zero", 1], ref_steps, ref_final, (1e-5, 1e-5, 1e-5)),
        ("tp2-sp", 2, ["--mesh", "tp=2", "--sequence-parallel"], ref_steps, ref_final, (1e-5, 1e-5, 1e-5)),
        ("pp2-1f1b", 2, ["--mesh", "pp=2", "--microbatches", 2], ref_steps, ref_final, (1e-5, 1e-5, 1e-5)),
        ("dp2-tp2-pp2", 8, ["--mesh", "dp=2,tp=2,pp=2", "--microbatches", 2], ref_steps, ref_final,
         (1e-5, 1e-5, 1e-5)),
        # each stage's program updates its own parameter groups in multi-tensor calls
        ("tp2-pp2-multi-tensor", 4, ["--mesh", "tp=2,pp=2", "--microbatches", 2, "--multi-tensor"],
         ref_steps, ref_final, (1e-5, 1e-5, 1e-5)),
        ("bf16-dp2", 2, ["--mesh", "dp=2", "--precision", "bf16"], bf16_steps, bf16_final, (1e-3, 1e-2, None)),
    ]
    for name, devices, flags, want_steps, want_final, (loss_tol, norm_tol, weight_tol) in layouts:
        plan = compile_plan(model, work, name, gpt.B, recipe + flags)
        steps, final, _, _ = dtrun(plan, work, name, data, devices)
        loss_err = relative([e["loss"] for e in steps], [e["loss"] for e in want_steps])
        norm_err = relative([e["grad_norm"] for e in steps], [e["grad_norm"] for e in want_steps])
        w_err = weight_error(final, want_final)
        print(f"{name}: max loss rel err {loss_err:.3e}, grad norm {norm_err:.3e}, weights {w_err:.3e}")
        assert [e["lr"] for e in steps] == [e["lr"] for e in want_steps], f"{name}: learning rates differ"
        assert loss_err <= loss_tol and norm_err <= norm_tol, f"{name}: differs from one device"
        assert weight_tol is None or w_err <= weight_tol, f"{name}: weights differ from one device"


def periodic_evaluation(work, data, model):
    plan = compile_plan(model, work, "gpt-eval", gpt.B, GPT_RECIPE)
    _, _, evaluations, out = dtrun(plan, work, "gpt-eval", data, extra=("--eval", data, "--eval-every", 8,
                                                                     "--eval-batches", 3))
    assert [e["step"] for e in evaluations] == [8, 16, 20], evaluations
    lines = [line for line in out.splitlines() if ": eval: loss" in line or line.startswith("eval: loss")]
    assert len(lines) == 3 and all("first 3 batches" in line for line in lines), out
    assert all(np.isfinite(e["val_loss"]) for e in evaluations)
    # The progress line: learning rate, norm, tokens/s, MFU and the time left.
    step_line = next(line for line in out.splitlines() if line.startswith("step    20/20"))
    for part in ("| lr ", "| norm ", "tokens/s", "| MFU ", "left"):
        assert part in step_line, step_line
    # The peak it divides by is named once: the fastest of the run's contractions as they ran.
    peak = [line for line in out.splitlines() if line.startswith("MFU: model FLOPs over ")]
    assert len(peak) == 1 and "fastest contraction in steps 1-2" in peak[0], out
    assert "raised as later steps run faster" in peak[0], out
    mfu = [float(m) for m in re.findall(r"\| MFU ([0-9.]+)%", out)]
    assert len(mfu) == 20 and all(0 < u < 100 for u in mfu), mfu
    print(f"periodic evaluation: {[(e['step'], round(e['val_loss'], 4)) for e in evaluations]}")


def sampling(work):
    model, plan = os.path.join(work, "bytes.dtm"), os.path.join(work, "bytes.dtp")
    run(tool("dtc"), "zoo", "gpt", "--vocab", 256, "--ctx", 16, "--layers", 1, "--heads", 2, "--embd", 32,
        "--seed", 3, "-o", model)
    run(tool("dtc"), "compile", model, "-o", plan, "--batch", 2)

    def sample(*flags):  # an untrained model's bytes are no UTF-8
        args = [str(a) for a in (tool("dtrun"), plan, "--sample", 40, "--prompt", "Hello", *flags)]
        out = subprocess.run(args, check=True, capture_output=True).stdout
        return out[out.index(b"sample: Hello"):]

    drawn = sample("--seed", 3)
    assert sample("--seed", 3) == drawn, "a seed must repeat its draw"
    assert sample("--seed", 4) != drawn, "another seed drew the same 40 bytes"
    greedy = sample("--temperature", 0)
    assert sample("--top-k", 1, "--seed", 9) == greedy, "top-k 1 must be the greedy continuation"
    assert greedy != drawn
    print("sampling: seeds repeat, top-k 1 is greedy")


def main():
    torch.set_num_threads(2)
    rng = np.random.default_rng(1)
    tokens = ((np.arange(4000) * 7 + rng.integers(0, 3, 4000)) % gpt.V).astype(np.int64)
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "train.bin")
        write_tokens(data, tokens)
        model = os.path.join(work, "gpt.dtm")
        run(tool("dtc"), "zoo", "gpt", "--vocab", gpt.V, "--ctx", gpt.T, "--layers", gpt.L, "--heads", gpt.H,
            "--embd", gpt.C, "--seed", gpt.SEED, "-o", model)
        gpt_recipe(work, tokens, data, model)
        mlp_linear_schedule(work)
        partitioned(work, data, model)
        periodic_evaluation(work, data, model)
        sampling(work)
    print("training recipe: ok")


if __name__ == "__main__":
    main()
