"""FP8 training's numerics (--precision fp8) on the CPU's exact emulation, against a NumPy
reference with ml_dtypes' float8 types: one linear layer in each form a model brings one (Linear
on [4, 8, 32] with w [16, 32]; MatMul on [4, 32] with w [16, 32] transposed, as nn.Linear exports,
and with w [32, 16], as GPT-2's Conv1D), an MSE loss, one SGD step of lr 1, so the saved
parameters give both gradients (g = p_before - p_after).

The reference follows the plan's path as documented (runtime/exec/fp8_contracts.h): x and w
rounded to bf16 (mixed precision), each quantized per tensor to e4m3fn (amax, scale = 448 / amax
in double rounded to f32, x·scale in f32 clamped and rounded); y = (qx · qwᵀ) · sx · sw rounded to
bf16; the loss's gradient rounded to bf16 and quantized to e5m2; dx = (qdy · qw) · sdy · sw in
bf16, dw = (qdyᵀ · qx) · sdy · sx in f32. Ours must equal it within f32 sums' differences (dw to
1e-5 of its largest entry, dx to one bf16 rounding of it, 2^-8), and be ten times further from the
plain bf16 step's gradients than from it: the FP8 path is what ran, not bf16.

Then a zoo Llama (2 layers, width 128) trained 300 AdamW steps on real text (the fortunes corpus,
bytes) in FP8 ends within 1.5% of the bf16 run's loss (the mean of the last 20 steps), and under
full recomputation its first 10 losses are the same, bit for bit.

Delayed scaling (--fp8-scaling delayed, Transformer Engine's recipe): four SGD steps of two of
the layers against the same reference with each scale taken from an amax history of 2 steps
(scale 1 before any), the step's amaxes pushed after it."""
import json
import os
import statistics
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import epoch_permutation, load_safetensors, read_log, run, tool  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SCHEMA = os.path.join(ROOT, "frontends", "model", "model.fbs")
B, T, K, N, SEED = 4, 8, 32, 16, 3
E4M3, E5M2, BF16 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.bfloat16


def bf16(a):
    return np.asarray(a, np.float32).astype(BF16).astype(np.float32)


def quantize(v, fmt, amax=None):
    """Per-tensor scaling on `amax` (the tensor's own when None: dynamic scaling)."""
    fmax = 448.0 if fmt is E4M3 else 57344.0
    amax = float(np.abs(v).max()) if amax is None else amax
    scale = np.float32(fmax / max(amax, 1e-12))
    scaled = (v.astype(np.float32) * scale).astype(np.float32)
    q = np.clip(scaled, -fmax, fmax).astype(fmt).astype(np.float64)
    return q, np.float32(1.0) / scale


def reference(x, w, target, fp8, layout, amaxes=None):
    """The loss and the gradients of x and w; `layout` "nk": y = x · wᵀ (w [N, K]), "kn": y = x · w.
    `amaxes` ("x", "w", "dy"): the amaxes the scales use (delayed scaling), each tensor's own
    when None; `seen`, the amaxes the tensors have, is filled in."""
    amaxes = amaxes or {}
    seen = {}
    k = x.shape[-1]
    xb, wb = bf16(x).reshape(-1, k), bf16(w)
    wk = wb.T if layout == "nk" else wb  # [K, N]
    if fp8:
        qx, sx = quantize(xb, E4M3, amaxes.get("x"))
        qw, sw = quantize(wb, E4M3, amaxes.get("w"))
        seen.update(x=float(np.abs(xb).max()), w=float(np.abs(wb).max()))
        qwk = qw.T if layout == "nk" else qw
        y = bf16((qx @ qwk) * np.float32(sx * sw))
    else:
        y = bf16(xb.astype(np.float64) @ wk)
    diff = y.astype(np.float32) - target.reshape(y.shape)
    loss = float(np.mean(diff.astype(np.float64) ** 2))
    dy = bf16(np.float32(2.0 / diff.size) * diff)
    if fp8:
        qdy, sdy = quantize(dy, E5M2, amaxes.get("dy"))
        seen["dy"] = float(np.abs(dy).max())
        dx = bf16((qdy @ qwk.T) * np.float32(sdy * sw))
        dwk = (qx.T @ qdy) * np.float32(sdy * sx)
    else:
        dx = bf16(dy.astype(np.float64) @ wk.T)
        dwk = xb.astype(np.float64).T @ dy
    return loss, dx.reshape(x.shape), dwk.T if layout == "nk" else dwk, seen


# name: x's shape, w's shape, the node, w's layout.
CASES = {
    "Linear on [B, T, K]": ([B, T, K], [N, K], ("Linear", []), "nk"),
    "MatMul, w [N, K] transposed": ([B, K], [N, K], ("MatMul", [{"name": "transpose_b", "kind": "int", "i": 1}]),
                                    "nk"),
    "MatMul, w [K, N]": ([B, K], [K, N], ("MatMul", []), "kn"),
}


def write_model(d, x, w, target, node):
    """One layer `node` of trainable x and w, an MSE loss against the data input `target`."""
    np.save(os.path.join(d, "target.npy"), target[np.argsort(epoch_permutation(B, SEED, 0))])
    op, attrs = node
    model = {"version": 1, "graph": {
        "inputs": [{"name": "target", "dtype": "f32", "shape": [-1] + list(target.shape[1:])}],
        "initializers": [{"info": {"name": k, "shape": list(v.shape)}, "float_data": v.ravel().tolist(),
                          "trainable": True} for k, v in (("x", x), ("w", w))],
        "nodes": [{"name": "proj", "op_type": op, "inputs": ["x", "w"], "outputs": ["out"], "attributes": attrs},
                  {"name": "mse", "op_type": "MSELoss", "inputs": ["out", "target"], "outputs": ["loss"]}],
        "outputs": ["loss"], "loss": "loss"}}
    with open(os.path.join(d, "m.json"), "w") as f:
        json.dump(model, f)
    run("flatc", "-b", "-o", d, SCHEMA, os.path.join(d, "m.json"))
    return os.path.join(d, "m.dtm")


def check(name, x_shape, w_shape, node, layout, rng):
    x = rng.uniform(-2, 2, x_shape).astype(np.float32)
    w = rng.uniform(-0.5, 0.5, w_shape).astype(np.float32)
    target = rng.standard_normal(x_shape[:-1] + [N]).astype(np.float32)
    with tempfile.TemporaryDirectory() as d:
        model = write_model(d, x, w, target, node)
        run(tool("dtc"), "compile", model, "-o", os.path.join(d, "m.dtp"), "--batch", B,
            "--optimizer", "sgd", "--lr", 1, "--precision", "fp8", "--fp8-skip", "")
        run(tool("dtrun"), os.path.join(d, "m.dtp"), "--data", d, "--steps", 1, "--seed", SEED, "--log",
            os.path.join(d, "log.jsonl"), "--save", d)
        final = load_safetensors(os.path.join(d, "model.safetensors"))
        ours_loss = read_log(os.path.join(d, "log.jsonl"))[0]["loss"]
    ours = {"x": x - final["x"], "w": w - final["w"]}
    loss8, dx8, dw8, _ = reference(x, w, target, True, layout)
    loss16, dx16, dw16, _ = reference(x, w, target, False, layout)
    tolerance = {"dx": 2.0 ** -8, "dw": 1e-5}
    for grad, got, want8, want16 in (("dx", ours["x"], dx8, dx16), ("dw", ours["w"], dw8, dw16)):
        scale = np.abs(want8).max()
        err8 = np.abs(got - want8).max() / scale
        err16 = np.abs(got - want16).max() / scale
        print(f"{name}: {grad} rel err against the FP8 reference {err8:.2e}, against bf16's {err16:.2e}")
        assert err8 <= tolerance[grad], f"{name}: {grad} {err8}"
        assert err16 >= 10 * max(err8, 1e-7), f"{name}: {grad} no closer to FP8 than to bf16"
    loss_err = abs(ours_loss - loss8) / loss8
    print(f"{name}: loss {ours_loss:.7f} vs reference {loss8:.7f} (bf16's {loss16:.7f}), rel err {loss_err:.2e}")
    assert loss_err <= 1e-6, f"{name}: loss {loss_err}"


def delayed_reference(x, w, targets, layout, steps, lr, history, delayed=True):
    """`steps` SGD steps in FP8 with Transformer Engine's delayed scaling: each scale from the
    largest amax of the last `history` steps (the format's largest value, scale 1, before any),
    this step's amaxes pushed after; dynamic scaling when not `delayed`. Losses, final x and w."""
    fmax = {"x": 448.0, "w": 448.0, "dy": 57344.0}
    hist = {k: np.zeros(history, np.float32) for k in fmax}
    losses = []
    for step in range(steps):
        used = {k: float(h.max()) if h.max() > 0 else fmax[k] for k, h in hist.items()}
        loss, dx, dw, seen = reference(x, w, targets[step], True, layout, used if delayed else None)
        losses.append(loss)
        hist = {k: np.concatenate([np.float32([seen[k]]), h[:-1]]) for k, h in hist.items()}
        x = (x - np.float32(lr) * dx.astype(np.float32)).astype(np.float32)
        w = (w - np.float32(lr) * dw.astype(np.float32)).astype(np.float32)
    return losses, x, w


def check_delayed(name, x_shape, w_shape, node, layout, rng, steps=4, lr=0.1, history=2):
    """--fp8-scaling delayed over `steps` SGD steps against delayed_reference: the losses of the
    same roundings (within f32 sums' differences, 1e-6) and ten times closer to it than to
    dynamic scaling's; the parameters' updates within one bf16 rounding of x's gradient (2^-8 of
    the largest)."""
    x = rng.uniform(-2, 2, x_shape).astype(np.float32)
    w = rng.uniform(-0.5, 0.5, w_shape).astype(np.float32)
    target = rng.standard_normal(x_shape[:-1] + [N]).astype(np.float32)
    with tempfile.TemporaryDirectory() as d:
        model = write_model(d, x, w, target, node)
        run(tool("dtc"), "compile", model, "-o", os.path.join(d, "m.dtp"), "--batch", B, "--optimizer", "sgd",
            "--lr", lr, "--precision", "fp8", "--fp8-skip", "", "--fp8-scaling", "delayed",
            "--fp8-amax-history", history)
        run(tool("dtrun"), os.path.join(d, "m.dtp"), "--data", d, "--steps", steps, "--seed", SEED, "--log",
            os.path.join(d, "log.jsonl"), "--save", d)
        final = load_safetensors(os.path.join(d, "model.safetensors"))
        ours = [e["loss"] for e in read_log(os.path.join(d, "log.jsonl"))]
    # Each step is an epoch of the B samples, in the loader's order.
    saved = target[np.argsort(epoch_permutation(B, SEED, 0))]
    targets = [saved[epoch_permutation(B, SEED, e)] for e in range(steps)]
    want, want_x, want_w = delayed_reference(x, w, targets, layout, steps, lr, history)
    dynamic = delayed_reference(x, w, targets, layout, steps, lr, history, delayed=False)[0]
    err = max(abs(a - b) / b for a, b in zip(ours, want))
    err_dynamic = max(abs(a - b) / b for a, b in zip(ours, dynamic))
    weight_err = max(np.abs(final[k] - v).max() / np.abs(start - v).max()
                     for k, v, start in (("x", want_x, x), ("w", want_w, w)))
    print(f"{name}, delayed scaling, {steps} steps, history {history}: loss rel err {err:.2e} against the "
          f"reference ({err_dynamic:.2e} against dynamic scaling's), updates {weight_err:.2e}")
    assert err <= 1e-6 and weight_err <= 2.0 ** -8, (ours, want, weight_err)
    assert err_dynamic >= 10 * max(err, 1e-7), "no closer to delayed scaling than to dynamic"


def main():
    rng = np.random.default_rng(0)
    for name, (x_shape, w_shape, node, layout) in CASES.items():
        check(name, x_shape, w_shape, node, layout, rng)
    for name in ("Linear on [B, T, K]", "MatMul, w [K, N]"):
        check_delayed(name, *CASES[name], rng)
    train_llama()
    print("fp8 numerics: ok")


def train_llama():
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "text_to_tokens.py"), d], check=True,
                       stdout=subprocess.DEVNULL)
        model = os.path.join(d, "llama.dtm")
        run(tool("dtc"), "zoo", "llama", "--vocab", 256, "--ctx", 64, "--layers", 2, "--heads", 4, "--embd", 128,
            "--ffn", 352, "-o", model)
        last = {}
        for precision in ("bf16", "fp8"):
            plan, log = os.path.join(d, f"{precision}.dtp"), os.path.join(d, f"{precision}.jsonl")
            run(tool("dtc"), "compile", model, "-o", plan, "--batch", 8, "--precision", precision,
                "--optimizer", "adamw", "--lr", "1e-3")
            run(tool("dtrun"), plan, "--data", os.path.join(d, "train.bin"), "--steps", 300, "--log", log)
            last[precision] = statistics.mean(r["loss"] for r in read_log(log)[-20:])
        # Full recomputation computes the same FP8 forward again: the same losses, bit for bit.
        plan, log = os.path.join(d, "full.dtp"), os.path.join(d, "full.jsonl")
        run(tool("dtc"), "compile", model, "-o", plan, "--batch", 8, "--precision", "fp8", "--optimizer", "adamw",
            "--lr", "1e-3", "--recompute", "full")
        run(tool("dtrun"), plan, "--data", os.path.join(d, "train.bin"), "--steps", 10, "--log", log)
        full = [r["loss"] for r in read_log(log)]
        kept = [r["loss"] for r in read_log(os.path.join(d, "fp8.jsonl"))[:10]]
        print(f"Llama in FP8 under full recomputation: 10 losses {'equal' if full == kept else 'differ'}")
        assert full == kept, (full, kept)
    rel = (last["fp8"] - last["bf16"]) / last["bf16"]
    print(f"Llama, 300 steps: loss bf16 {last['bf16']:.4f}, fp8 {last['fp8']:.4f} ({100 * rel:+.2f}%)")
    assert abs(rel) <= 0.015, rel


if __name__ == "__main__":
    main()
