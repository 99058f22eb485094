"""MLP parity with PyTorch: the same initial weights (saved by dtrun), the same batches (dtrun's
sampler reproduced), 10 steps of SGD-momentum and of AdamW. Losses must agree to 1e-5
relative, final weights to 1e-4 (max |diff| / max |w| per tensor).

AdamW divides by sqrt(v) + eps, so elements whose gradients are near zero amplify fp32
rounding: with eps=1e-8 PyTorch's own fp32 run differs from its fp64 run by ~3e-4 here. The
1e-4 check therefore uses eps=1e-6 (fp32 noise ~2e-5); a second AdamW run with torch's default
eps is held to twice PyTorch's own fp32-vs-fp64 distance, measured in the same test."""
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import dtc_train, run, tool, torch_train_classifier, weight_error  # noqa: E402

N, BATCH, STEPS, SEED, DATA_SEED = 100, 32, 10, 7, 3
SIZES = [784, 256, 128, 10]


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        for i in range(len(SIZES) - 1):
            setattr(self, f"fc{i}", torch.nn.Linear(SIZES[i], SIZES[i + 1]))

    def forward(self, x):
        n = len(SIZES) - 1
        for i in range(n):
            x = getattr(self, f"fc{i}")(x)
            if i + 1 < n:
                x = F.relu(x)
        return x


def torch_run(init, x, y, make_optimizer, dtype=torch.float32):
    model = Mlp().to(dtype)
    model.load_state_dict({k: torch.from_numpy(v.copy()).to(dtype) for k, v in init.items()})
    opt = make_optimizer(model.parameters())
    losses = torch_train_classifier(model, opt, x, y, BATCH, DATA_SEED, STEPS, dtype)
    return losses, {k: v.detach().to(torch.float64).numpy() for k, v in model.state_dict().items()}



def check(name, compile_flags, make_optimizer, work, data, weight_tol=1e-4):
    init, final, losses, _ = dtc_train(os.path.join(work, "mlp.dtm"), work, name, BATCH, compile_flags,
                                       data, STEPS, DATA_SEED)
    x = np.load(os.path.join(data, "input.npy"))
    y = np.load(os.path.join(data, "target.npy"))
    ref_losses, ref_final = torch_run(init, x, y, make_optimizer)
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
    weight_err = weight_error(final, ref_final)
    _, fp64_final = torch_run(init, x, y, make_optimizer, torch.float64)
    torch_noise = weight_error(ref_final, fp64_final)
    if weight_tol is None:
        weight_tol = 2 * torch_noise
    print(f"{name}: losses {losses[0]:.6f} -> {losses[-1]:.6f}; max loss rel err {loss_err:.3e}; "
          f"max weight rel err {weight_err:.3e} (tolerance {weight_tol:.1e}; torch fp32 vs fp64: "
          f"{torch_noise:.3e})")
    assert sorted(final) == sorted(ref_final), f"parameter names differ: {sorted(final)}"
    assert loss_err <= 1e-5, f"{name}: loss mismatch {losses} vs {ref_losses}"
    assert weight_err <= weight_tol, f"{name}: weight mismatch {weight_err}"
    assert losses[-1] < losses[0], f"{name}: loss did not fall"


def main():
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "data")
        os.makedirs(data)
        np.save(os.path.join(data, "input.npy"), rng.standard_normal((N, SIZES[0])).astype(np.float32))
        np.save(os.path.join(data, "target.npy"), rng.integers(0, SIZES[-1], N).astype(np.int64))
        run(tool("dtc"), "zoo", "mlp", "--input", SIZES[0], "--hidden", "256,128", "--classes", SIZES[-1],
            "--seed", 5, "-o", os.path.join(work, "mlp.dtm"))
        check("sgd", ["--optimizer", "sgd", "--lr", 0.05, "--momentum", 0.9, "--weight-decay", 1e-3],
              lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-3), work, data)
        check("adamw", ["--optimizer", "adamw", "--lr", 2e-3, "--beta1", 0.85, "--beta2", 0.99,
                        "--eps", 1e-6, "--weight-decay", 0.05],
              lambda p: torch.optim.AdamW(p, lr=2e-3, betas=(0.85, 0.99), eps=1e-6, weight_decay=0.05),
              work, data)
        check("adamw-default-eps", ["--optimizer", "adamw", "--lr", 1e-3],
              lambda p: torch.optim.AdamW(p, lr=1e-3), work, data, weight_tol=None)
    print("mlp parity: ok")


if __name__ == "__main__":
    main()
