"""Mixed precision (`dtc compile --precision bf16|fp16`) against PyTorch on the CPU: the zoo
MLP, the same initial weights and batches, SGD-momentum. dtc runs every matmul (forward and
backward) on bf16/fp16 operands with f32 accumulation and a rounded result (the weight
gradients kept in f32, unrounded), everything else in f32 with f32 master weights.

1. Against PyTorch doing the same roundings (a custom autograd function; torch 1.13 has no CPU
   fp16 matmul): losses to 1e-5, weights to a tenth of the type's unit roundoff — only the
   order of f32 sums differs, with the odd rounding tie flipped.
2. Against torch.autocast(bf16), what users run: autocast and dtc differ in where results
are rounded (PyTorch rounds the fused bias add's output, computes the bias gradient in bf16
and rounds the weight gradient, dtc rounds the product and keeps the bias add, its gradient and
the weight gradient in f32), so the two runs
agree to the low precision's noise, not to fp32's. The checks: losses within 1e-3; final
weights no further from PyTorch's low-precision run than 3x the distance between PyTorch's
own low-precision and fp32 runs (the noise the precision itself brings); and dtc's run
measurably away from its fp32 run (the casts happen)."""
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import batches, dtc_train, read_log, run, tool, weight_error, write_tokens  # noqa: E402
from test_data_parallel import MPIRUN  # noqa: E402
from test_mlp_parity import BATCH, DATA_SEED, N, SIZES, STEPS, Mlp  # noqa: E402

# With the same roundings, a product within f32 noise of a rounding tie may still round the
# other way (sgemm and torch sum in different orders), and a flipped ReLU or rounding moves a
# whole sample's gradient: the weights are held to a fraction of the distance the precision
# itself puts between PyTorch's low-precision and fp32 runs (fp16, with 8x finer rounding, flips
# ties far more often: PyTorch against itself with another summation order differs by 1e-3).
EXACT_LOSS_TOLERANCE = {"bf16": 1e-5, "fp16": 1e-4}
EXACT_WEIGHT_TOLERANCE = {"bf16": 0.02, "fp16": 1.5}
GROWTH_INTERVAL = 2000
LOSS_TOLERANCE = 1e-3
NOISE_FACTOR = 3


class RoundedMatmul(torch.autograd.Function):
    """x · wᵀ as dtc computes it under --precision: operands rounded to the low type, the
    product accumulated in f32 and rounded; backward the same on the rounded gradient, but the
    weight gradient is summed in f32 and kept so (for the f32 master weight)."""

    @staticmethod
    def forward(ctx, x, w, low):
        xr, wr = x.to(low).to(x.dtype), w.to(low).to(w.dtype)
        ctx.save_for_backward(xr, wr)
        ctx.low = low
        return (xr @ wr.t()).to(low).to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        xr, wr = ctx.saved_tensors
        g = dy.to(ctx.low).to(dy.dtype)
        return (g @ wr).to(ctx.low).to(dy.dtype), g.t() @ xr, None


def forward(model, x, mode):
    if mode == "autocast":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(x).float()
    n = len(SIZES) - 1
    for i in range(n):
        layer = getattr(model, f"fc{i}")
        x = (x @ layer.weight.t() if mode == "fp32" else RoundedMatmul.apply(x, layer.weight, mode)) + layer.bias
        if i + 1 < n:
            x = F.relu(x)
    return x


def torch_run(init, x, y, mode, scale=65536.0, sums=torch.float32):
    """mode: "fp32", "autocast" (torch.autocast bf16), or a torch dtype (dtc's rounding points;
    float16 with GradScaler's dynamic loss scaling, written out as torch.cuda.amp.GradScaler
    computes it: the CPU has no GradScaler in torch 1.13). `sums`: the dtype between the
    roundings (float64: the same roundings with other sums)."""
    model = Mlp().to(sums)
    model.load_state_dict({k: torch.from_numpy(v.copy()).to(sums) for k, v in init.items()})
    x = x.astype(np.float64) if sums == torch.float64 else x
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses, scales, good = [], [], 0
    for idx in batches(len(x), BATCH, DATA_SEED, STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(forward(model, torch.from_numpy(x[idx]), mode), torch.from_numpy(y[idx]))
        losses.append(loss.item())
        if mode is not torch.float16:
            loss.backward()
            opt.step()
            continue
        (loss * scale).backward()
        grads = [p.grad for p in model.parameters()]
        scales.append(scale)
        if any(not torch.isfinite(g).all() for g in grads):
            scale, good = scale * 0.5, 0  # skip the step
            continue
        inv = torch.tensor(scale, dtype=torch.float64).reciprocal().float()
        for g in grads:
            g.mul_(inv)
        opt.step()
        good += 1
        if good == GROWTH_INTERVAL:
            scale, good = scale * 2.0, 0
    return losses, {k: v.detach().double().numpy() for k, v in model.state_dict().items()}, scales


def compare(name, ours, ref):
    losses, final = ours
    ref_losses, ref_final = ref[:2]
    return (max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses)), weight_error(final, ref_final))


def check_loss_scale_skips(work, model, data, init, x, y, sgd):
    """Starting at 2^24 the scaled fp16 gradients overflow: the steps are skipped (parameters,
    momentum kept), the scale halves until they fit, then training proceeds, as GradScaler."""
    _, final, losses, _ = dtc_train(model, work, "fp16-big-scale", BATCH,
                                    sgd + ["--precision", "fp16", "--loss-scale", 2.0**24], data, STEPS, DATA_SEED)
    ref_losses, ref_final, scales = torch_run(init, x, y, torch.float16, scale=2.0**24)
    skipped = sum(1 for a, b in zip(scales, scales[1:]) if b < a)
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
    print(f"fp16 from scale 2^24: PyTorch skipped {skipped} step(s) (scales {scales}); dtc losses "
          f"{losses[0]:.6f} -> {losses[-1]:.6f}, max rel err {loss_err:.2e}, weights "
          f"{weight_error(final, ref_final):.2e}")
    assert skipped >= 2, scales
    # dtc skips the same steps (otherwise the losses after them would differ by a whole update).
    assert loss_err <= EXACT_LOSS_TOLERANCE["fp16"], (losses, ref_losses)
    assert weight_error(final, ref_final) <= 1e-3, "the skipped steps differ"


def check_partitioned(work, rng):
    """Low precision composes with the partitioners: GPT-mini in bf16 on dp2 x tp2 (Megatron +
    vocabulary parallel; a row-parallel bf16 product's partial sums are reduced in f32), on a
    2-stage pipeline and under ZeRO-3 on dp2 x pp2, in fp16 on dp2 x tp2 (also from a scale that
    overflows: every rank skips the same steps), and in fp16 with loss scaling on a 2-stage
    pipeline (the overflow counts of both stages meet, the decision goes back), train as the
    single-device plan of the same precision does, to that precision."""
    model, tokens = os.path.join(work, "gpt.dtm"), os.path.join(work, "train.bin")
    run(tool("dtc"), "zoo", "gpt", "--vocab", 64, "--ctx", 16, "--layers", 2, "--heads", 4, "--embd", 32,
        "--seed", 11, "-o", model)
    write_tokens(tokens, ((np.arange(3000) * 7 + rng.integers(0, 3, 3000)) % 64).astype(np.int64))
    results = {}
    fused = ["--fused-attention", "--fuse-epilogues"]  # the CUDA defaults, fused after partitioning
    configs = (("single", "bf16", [], 1), ("dp2-tp2", "bf16", ["--mesh", "dp=2,tp=2"], 4),
               ("dp2-tp2-sp", "bf16", ["--mesh", "dp=2,tp=2", "--sequence-parallel"], 4),
               ("pp2", "bf16", ["--mesh", "pp=2", "--microbatches", 2], 2),
               ("single", "fp16", [], 1), ("pp2", "fp16", ["--mesh", "pp=2", "--microbatches", 2], 2),
               ("dp2-tp2", "fp16", ["--mesh", "dp=2,tp=2"], 4),
               # From 2^24 the first steps overflow: every rank must skip them together.
               ("single-big", "fp16", ["--loss-scale", 2.0**24], 1),
               ("dp2-tp2-big", "fp16", ["--mesh", "dp=2,tp=2", "--loss-scale", 2.0**24], 4),
               ("dp2-zero3", "fp16", ["--mesh", "dp=2", "--zero", 3], 2),
               ("dp2-zero3", "bf16", ["--mesh", "dp=2", "--zero", 3], 2),
               # each micro-batch's forward and backward gather and cast their own 16-bit weights
               ("dp2-pp2-zero3", "bf16", ["--mesh", "dp=2,pp=2", "--microbatches", 2, "--zero", 3], 4),
               ("single-fused", "bf16", fused, 1), ("dp2-tp2-fused", "bf16", ["--mesh", "dp=2,tp=2", *fused], 4))
    for name, precision, mesh, procs in configs:
        plan = os.path.join(work, f"gpt-{name}-{precision}.dtp")
        log = os.path.join(work, f"gpt-{name}-{precision}.jsonl")
        run(tool("dtc"), "compile", model, "-o", plan, "--batch", 8, "--optimizer", "sgd", "--lr", 0.05,
            "--precision", precision, *mesh)
        cmd = [tool("dtrun"), plan, "--data", tokens, "--steps", 6, "--seed", 1, "--threads", 1, "--log", log,
               "--eval", tokens]
        run(*(MPIRUN + [procs] + cmd if procs > 1 else cmd))
        results[name, precision] = [e["loss"] for e in read_log(log)]
    for name, precision, _, _ in configs:
        if name.startswith("single"):
            continue
        reference = ("single-fused" if name.endswith("-fused")
                     else "single-big" if name.endswith("-big") else "single")
        ours, single = results[name, precision], results[reference, precision]
        err = max(abs(a - b) / abs(b) for a, b in zip(ours, single))
        print(f"gpt {precision} {name}: losses {ours[0]:.5f} -> {ours[-1]:.5f}, "
              f"max rel err vs single device {err:.2e}")
        assert err <= LOSS_TOLERANCE, (name, precision, ours, single)


def main():
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "data")
        os.makedirs(data)
        x = rng.standard_normal((N, SIZES[0])).astype(np.float32)
        y = rng.integers(0, SIZES[-1], N).astype(np.int64)
        np.save(os.path.join(data, "input.npy"), x)
        np.save(os.path.join(data, "target.npy"), y)
        model = os.path.join(work, "mlp.dtm")
        run(tool("dtc"), "zoo", "mlp", "--input", SIZES[0], "--hidden", "256,128", "--classes", SIZES[-1],
            "--seed", 5, "-o", model)
        sgd = ["--optimizer", "sgd", "--lr", 0.05, "--momentum", 0.9]
        init, fp32_final, fp32_losses, _ = dtc_train(model, work, "fp32", BATCH, sgd, data, STEPS, DATA_SEED)
        torch_fp32 = torch_run(init, x, y, "fp32")[:2]
        for precision, low in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
            _, final, losses, _ = dtc_train(model, work, precision, BATCH, sgd + ["--precision", precision],
                                            data, STEPS, DATA_SEED)
            ours = (losses, final)
            # The same rounding points in PyTorch: only f32 summation order differs.
            reference = torch_run(init, x, y, low)
            loss_err, weight_err = compare(precision, ours, reference)
            # Sums in another order flip the odd rounding tie (which sgemm kernel the CPU picks
            # decides dtc's order): PyTorch's own distance between f32 and f64 sums around the
            # same roundings bounds what such flips do.
            loss_ties, weight_ties = compare(precision, reference[:2], torch_run(init, x, y, low, sums=torch.float64))
            from_fp32 = weight_error(final, {k: v.astype(np.float64) for k, v in fp32_final.items()})
            noise = weight_error(reference[1], torch_fp32[1])
            print(f"{precision}: losses {losses[0]:.6f} -> {losses[-1]:.6f}; vs PyTorch with the same "
                  f"roundings: loss {loss_err:.2e}, weights {weight_err:.2e} (PyTorch {precision} vs fp32: "
                  f"{noise:.2e}); vs dtc fp32: weights {from_fp32:.2e}; PyTorch f32 vs f64 sums: loss "
                  f"{loss_ties:.2e}, weights {weight_ties:.2e}")
            assert loss_err <= max(EXACT_LOSS_TOLERANCE[precision], 2 * loss_ties), (precision, loss_err)
            assert weight_err <= max(EXACT_WEIGHT_TOLERANCE[precision] * noise, 2 * weight_ties), (precision, weight_err)
            assert losses[-1] < losses[0], precision
            if precision == "fp16":
                check_loss_scale_skips(work, model, data, init, x, y, sgd)
            if precision == "bf16":
                autocast = torch_run(init, x, y, "autocast")
                loss_err, weight_err = compare(precision, ours, autocast)
                noise = weight_error(autocast[1], torch_fp32[1])
                print(f"bf16 vs torch.autocast(bf16): loss {loss_err:.2e}, weights {weight_err:.2e} "
                      f"(autocast vs fp32: {noise:.2e})")
                assert loss_err <= LOSS_TOLERANCE, (losses, autocast[0])
                assert weight_err <= NOISE_FACTOR * noise, (weight_err, noise)
        check_partitioned(work, rng)
    print("mixed precision: ok")


if __name__ == "__main__":
    main()
