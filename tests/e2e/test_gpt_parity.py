"""GPT parity with PyTorch: `dtc zoo gpt` (2 layers, small dims) against a nanoGPT-style
PyTorch model with the same initial weights (saved by dtrun), the same token windows (dtrun's
sampler reproduced) and 10 AdamW steps. Losses must agree to 1e-5 relative, final weights to
1e-4 (max |diff| / max |w| per tensor).

Under --precision bf16 with fused attention, PyTorch does the same roundings (custom autograd
functions below: contractions and attention on bf16-rounded operands, f32 math, results and
incoming gradients rounded), so only f32 summation order differs, and with it the odd bf16
rounding tie.

As in test_mlp_parity.py, AdamW's division by sqrt(v) + eps amplifies fp32 rounding of
near-zero gradients (zero-initialised biases here): PyTorch's own fp32 and fp64 runs differ by
~5e-4 with eps=1e-6. The 1e-4 check uses eps=1e-4; a run with torch's default eps is held to
twice PyTorch's own fp32-vs-fp64 distance, measured in the same test."""
import math
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import dtc_train, run, tool, weight_error, window_offsets, windows, write_tokens  # noqa: E402

V, T, L, H, C = 64, 16, 2, 4, 32
B, STEPS, SEED, DATA_SEED = 4, 10, 11, 5


def rounded(x, low):
    return x.to(low).to(x.dtype)


class RoundedLinear(torch.autograd.Function):
    """x · wᵀ on operands rounded to `low`, accumulated in f32 and rounded (dtc's linear under
    --precision); backward the same on the rounded gradient, but the weight gradient is summed
    in f32 and kept so (for the f32 master weight). With fused epilogues
    (--fuse-epilogues) the product feeding a bias add is not rounded (round_y=False), nor the
    input gradient feeding a GELU gradient (round_dx=False)."""

    @staticmethod
    def forward(ctx, x, w, low, round_y=True, round_dx=True):
        xr, wr = rounded(x, low), rounded(w, low)
        ctx.save_for_backward(xr, wr)
        ctx.low, ctx.round_dx = low, round_dx
        y = xr @ wr.t()
        return rounded(y, low) if round_y else y

    @staticmethod
    def backward(ctx, dy):
        xr, wr = ctx.saved_tensors
        g = rounded(dy, ctx.low)
        dw = g.reshape(-1, g.shape[-1]).t() @ xr.reshape(-1, xr.shape[-1])
        dx = g @ wr
        return rounded(dx, ctx.low) if ctx.round_dx else dx, dw, None, None, None


class RoundedAttention(torch.autograd.Function):
    """Causal attention as dtc's fused kernel under --precision: q, k, v rounded, softmax and
    both products in f32, the output rounded; backward on the rounded gradient, dq, dk, dv
    rounded."""

    @staticmethod
    def forward(ctx, q, k, v, low):
        q, k, v = (rounded(z, low) for z in (q, k, v))
        ctx.save_for_backward(q, k, v)
        ctx.low = low
        return rounded(causal_attention(q, k, v), low)

    @staticmethod
    def backward(ctx, dout):
        with torch.enable_grad():
            q, k, v = (z.detach().requires_grad_() for z in ctx.saved_tensors)
            grads = torch.autograd.grad(causal_attention(q, k, v), (q, k, v), rounded(dout, ctx.low))
        return (*(rounded(g, ctx.low) for g in grads), None)


def causal_attention(q, k, v):
    t = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    att = att.masked_fill(torch.tril(torch.ones(t, t, dtype=torch.bool)).logical_not(), float("-inf"))
    return F.softmax(att, dim=-1) @ v


class RoundedBiasGrad(torch.autograd.Function):
    """y + bias whose bias gradient sums the incoming gradient rounded to `low`: with fused
    epilogues dtc sums it beside the weight gradient's GEMM, from the 16-bit dy that GEMM reads
    (as cuBLASLt's bias-gradient epilogue, and torch.autocast's bf16 bias)."""

    @staticmethod
    def forward(ctx, y, bias, low):
        ctx.low = low
        return y + bias

    @staticmethod
    def backward(ctx, dy):
        return dy, rounded(dy, ctx.low).reshape(-1, dy.shape[-1]).sum(0), None


class RoundedInputGelu(torch.autograd.Function):
    """tanh GELU whose gradient is taken at its input rounded to `low`: with fused epilogues dtc
    stores GELU's input in the 16-bit type, as torch.autocast does, and the backward reads that."""

    @staticmethod
    def forward(ctx, pre, low):
        ctx.save_for_backward(rounded(pre, low))
        return F.gelu(pre, approximate="tanh")

    @staticmethod
    def backward(ctx, dy):
        (pre,) = ctx.saved_tensors
        with torch.enable_grad():
            at = pre.detach().requires_grad_()
            (dx,) = torch.autograd.grad(F.gelu(at, approximate="tanh"), at, dy)
        return dx, None


def linear(layer, x, low, fused=False, before_gelu=False):
    if low is None:
        return layer(x)
    y = RoundedLinear.apply(x, layer.weight, low, not fused, not (fused and before_gelu))
    return RoundedBiasGrad.apply(y, layer.bias, low) if fused else y + layer.bias


class Block(nn.Module):
    def __init__(self, low=None, fused=False):
        super().__init__()
        self.low, self.fused = low, fused
        self.ln_1 = nn.LayerNorm(C)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(C, 3 * C)
        self.attn.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(C, 4 * C)
        self.mlp.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        b, t, _ = x.shape
        low, fused = self.low, self.fused
        q, k, v = linear(self.attn.c_attn, self.ln_1(x), low, fused).split(C, dim=2)
        q, k, v = (z.view(b, t, H, C // H).transpose(1, 2) for z in (q, k, v))
        y = causal_attention(q, k, v) if low is None else RoundedAttention.apply(q, k, v, low)
        y = y.transpose(1, 2).contiguous().view(b, t, C)
        x = x + linear(self.attn.c_proj, y, low, fused)
        pre = linear(self.mlp.c_fc, self.ln_2(x), low, fused)
        h = RoundedInputGelu.apply(pre, low) if low is not None and fused else F.gelu(pre, approximate="tanh")
        return x + linear(self.mlp.c_proj, h, low, fused, before_gelu=True)


class Gpt(nn.Module):
    def __init__(self, low=None, fused=False):
        super().__init__()
        self.low = low
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(V, C)
        self.transformer.wpe = nn.Embedding(T, C)
        self.transformer.h = nn.ModuleList([Block(low, fused) for _ in range(L)])
        self.transformer.ln_f = nn.LayerNorm(C)
        # Tied as nanoGPT ties them: state_dict lists the one tensor under both names.
        self.lm_head = nn.Linear(C, V, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx, targets):
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(idx.shape[1]))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        wte = self.transformer.wte.weight
        logits = x @ wte.t() if self.low is None else RoundedLinear.apply(x, wte, self.low)  # tied LM head
        return F.cross_entropy(logits.view(-1, V), targets.view(-1))


def torch_run(init, tokens, make_optimizer, dtype=torch.float32, low=None, fused=False):
    model = Gpt(low, fused).to(dtype)
    model.load_state_dict({k: torch.from_numpy(v.copy()).to(dtype) for k, v in init.items()})
    opt = make_optimizer(model.parameters())
    losses = []
    for step in range(STEPS):
        idx, tgt = map(torch.from_numpy, windows(tokens, window_offsets(len(tokens), B, T, DATA_SEED, step), T))
        opt.zero_grad()
        loss = model(idx, tgt)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().to(torch.float64).numpy() for k, v in model.state_dict().items()}



def check(name, eps, weight_tol, tokens, work, data, model, extra=()):
    init, final, losses, _ = dtc_train(model, work, name, B, ["--optimizer", "adamw", "--lr", 3e-3, "--eps", eps,
                                                             "--weight-decay", 0.1, *extra], data, STEPS, DATA_SEED)

    make = lambda p: torch.optim.AdamW(p, lr=3e-3, eps=eps, weight_decay=0.1)
    ref_losses, ref_final = torch_run(init, tokens, make)
    _, fp64_final = torch_run(init, tokens, make, torch.float64)
    assert sorted(final) == sorted(ref_final), f"names differ: {sorted(set(final) ^ set(ref_final))}"
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
    weight_err = weight_error(final, ref_final)
    noise = weight_error(ref_final, fp64_final)
    tol = weight_tol if weight_tol is not None else 2 * noise
    print(f"{name}: losses {losses[0]:.6f} -> {losses[-1]:.6f}; max loss rel err {loss_err:.3e}; "
          f"max weight rel err {weight_err:.3e} (tolerance {tol:.1e}; torch fp32 vs fp64: {noise:.3e})")
    assert loss_err <= 1e-5, f"{name}: loss mismatch {losses} vs {ref_losses}"
    assert weight_err <= tol, f"{name}: weight mismatch {weight_err}"
    assert losses[-1] < losses[0], f"{name}: loss did not fall"
    return losses, final


def check_low_precision(name, low, tokens, work, data, model, extra):
    """dtc under --precision against PyTorch doing the same roundings. Where two f32 sums in
    different orders straddle a bf16 rounding boundary, the results differ by a whole bf16 unit,
    and AdamW carries that on: the bound is twice the distance between PyTorch's own rounded runs
    with f32 and with f64 sums (the same roundings, another summation), and well inside the
    distance the precision puts between PyTorch's rounded and fp32 runs."""
    init, final, losses, _ = dtc_train(model, work, name, B, ["--optimizer", "adamw", "--lr", 3e-3, "--eps", 1e-4,
                                                             "--weight-decay", 0.1, *extra], data, STEPS, DATA_SEED)
    make = lambda p: torch.optim.AdamW(p, lr=3e-3, eps=1e-4, weight_decay=0.1)
    fused = "--fuse-epilogues" in extra
    ref_losses, ref_final = torch_run(init, tokens, make, low=low, fused=fused)
    fp32_losses, fp32_final = torch_run(init, tokens, make)
    f64_losses, f64_final = torch_run(init, tokens, make, torch.float64, low=low, fused=fused)
    rel = lambda xs, ys: max(abs(a - b) / abs(b) for a, b in zip(xs, ys))
    loss_err, loss_noise = rel(losses, ref_losses), rel(ref_losses, fp32_losses)
    weight_err, weight_noise = weight_error(final, ref_final), weight_error(ref_final, fp32_final)
    loss_ties, weight_ties = rel(ref_losses, f64_losses), weight_error(ref_final, f64_final)
    print(f"{name}: losses {losses[0]:.6f} -> {losses[-1]:.6f}; vs PyTorch with the same roundings: max loss "
          f"rel err {loss_err:.3e}, max weight rel err {weight_err:.3e}; the precision's own noise (PyTorch rounded "
          f"vs fp32): losses {loss_noise:.3e}, weights {weight_noise:.3e}; ties (PyTorch rounded, f32 vs f64 sums): "
          f"{loss_ties:.3e}, {weight_ties:.3e}")
    assert loss_err <= 2 * loss_ties + 1e-6, f"{name}: loss mismatch {losses} vs {ref_losses}"
    assert weight_err <= 2 * weight_ties, f"{name}: weight mismatch {weight_err}"
    assert weight_err <= weight_noise / 3, f"{name}: the run is as far from PyTorch's as from fp32"
    assert losses[-1] < losses[0], f"{name}: loss did not fall"
    # dtc-fold-casts (layout ops on 16-bit data, round trips cancelled) is exact: the same bits.
    _, unfolded, unfolded_losses, _ = dtc_train(model, work, name + "-unfolded", B, [
        "--optimizer", "adamw", "--lr", 3e-3, "--eps", 1e-4, "--weight-decay", 0.1, *extra, "--no-fold-casts"],
        data, STEPS, DATA_SEED)
    assert unfolded_losses == losses and all(np.array_equal(unfolded[k], final[k]) for k in final), \
        f"{name}: folding the casts changed the results"
    print(f"{name}: bit-identical with --no-fold-casts")
    # Multi-tensor kernels (one cast for every parameter's 16-bit copy, one AdamW update for
    # every parameter) compute each element as the per-tensor kernels: the same bits.
    _, multi, multi_losses, _ = dtc_train(model, work, name + "-multi-tensor", B, [
        "--optimizer", "adamw", "--lr", 3e-3, "--eps", 1e-4, "--weight-decay", 0.1, *extra, "--multi-tensor"],
        data, STEPS, DATA_SEED)
    assert multi_losses == losses and all(np.array_equal(multi[k], final[k]) for k in final), \
        f"{name}: the multi-tensor kernels changed the results"
    print(f"{name}: bit-identical with --multi-tensor")


def main():
    torch.set_num_threads(2)
    rng = np.random.default_rng(1)
    # Tokens with structure (a noisy cycle), so the loss has something to learn.
    tokens = ((np.arange(4000) * 7 + rng.integers(0, 3, 4000)) % V).astype(np.int64)
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "train.bin")
        write_tokens(data, tokens)
        model = os.path.join(work, "gpt.dtm")
        run(tool("dtc"), "zoo", "gpt", "--vocab", V, "--ctx", T, "--layers", L, "--heads", H,
            "--embd", C, "--seed", SEED, "-o", model)
        unfused = check("adamw", 1e-4, 1e-4, tokens, work, data, model)
        check("adamw-eps1e-8", 1e-8, None, tokens, work, data, model)
        # Flash-style attention (one op, the [T, T] probabilities recomputed in backward), on q, k
        # and v where the fused projection wrote them: the unpacked attention's bits (the layout
        # folds are off with --no-fold-casts).
        packed = check("adamw-fused-attention", 1e-4, 1e-4, tokens, work, data, model, ["--fused-attention"])
        _, unpacked, unpacked_losses, _ = dtc_train(model, work, "adamw-fused-attention-unpacked", B, [
            "--optimizer", "adamw", "--lr", 3e-3, "--eps", 1e-4, "--weight-decay", 0.1, "--fused-attention",
            "--no-fold-casts"], data, STEPS, DATA_SEED)
        assert unpacked_losses == packed[0] and all(np.array_equal(unpacked[k], packed[1][k]) for k in unpacked), \
            "attention on the fused projection changed the results"
        print("adamw-fused-attention: bit-identical to attention on unpacked heads")
        # bf16 contractions and bf16 flash attention against PyTorch doing the same roundings.
        check_low_precision("adamw-bf16-fused-attention", torch.bfloat16, tokens, work, data, model,
                            ["--fused-attention", "--precision", "bf16"])
        # GEMM epilogues (bias, tanh GELU, GELU gradient): in f32 the very same arithmetic as the
        # unfused ops on the CPU, so the same bits; in bf16 the product before a bias add or a
        # GELU gradient is no longer rounded, as in PyTorch with the same placement.
        fused = check("adamw-fused-epilogues", 1e-4, 1e-4, tokens, work, data, model, ["--fuse-epilogues"])
        assert fused[0] == unfused[0] and all(np.array_equal(fused[1][k], unfused[1][k]) for k in fused[1]), \
            "fused epilogues changed f32 results"
        print("adamw-fused-epilogues: bit-identical to the unfused plan")
        check_low_precision("adamw-bf16-fused-epilogues", torch.bfloat16, tokens, work, data, model,
                            ["--fused-attention", "--fuse-epilogues", "--precision", "bf16"])
    print("gpt parity: ok")


if __name__ == "__main__":
    main()
