"""ONNX in: modules written here (not from the zoo) are exported by torch.onnx.export in training
mode, compiled by dtc and trained by dtrun, against PyTorch training the same module from the same
weights on the same batches. The initial parameters dtrun saves must be the module's, under its
state_dict names; 10 steps' losses must agree to 1e-5 relative and the final weights to the
project's bounds; partitioned runs (dp=2) must equal one device."""
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import batches, load_safetensors, read_log, run, tool, weight_error  # noqa: E402

STEPS, SEED, BATCH = 10, 5, 8
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]


def export(module, args, path, input_names, output_names, dynamic):
    module.train()
    torch.onnx.export(module, args, path, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=input_names, output_names=output_names,
                      dynamic_axes={name: {0: "batch"} for name in dynamic}, opset_version=14)


def dtc_run(onnx_path, work, name, compile_flags, data, devices=1):
    """Compiles the export, saves the initial parameters, trains STEPS steps; returns (initial,
    final parameters, losses)."""
    plan = os.path.join(work, f"{name}.dtp")
    run(tool("dtc"), "compile", onnx_path, "-o", plan, "--batch", BATCH, *compile_flags)
    launch = lambda cmd: run(*(MPIRUN + [devices] + cmd if devices > 1 else cmd))  # noqa: E731
    launch([tool("dtrun"), plan, "--steps", 0, "--save", os.path.join(work, f"{name}-init")])
    log = os.path.join(work, f"{name}.jsonl")
    launch([tool("dtrun"), plan, "--data", data, "--steps", STEPS, "--seed", SEED, "--log", log,
            "--save", os.path.join(work, f"{name}-final"), "--threads", 1])
    losses = [e["loss"] for e in read_log(log)]
    assert len(losses) == STEPS, f"{name}: {len(losses)} steps logged"
    return (load_safetensors(os.path.join(work, f"{name}-init", "model.safetensors")),
            load_safetensors(os.path.join(work, f"{name}-final", "model.safetensors")), losses)


def same_initial_weights(name, module, init):
    state = {k: v.detach().numpy() for k, v in module.state_dict().items()}
    for key, value in init.items():
        assert key in state, f"{name}: dtrun saved '{key}', which the module does not have"
        assert np.array_equal(value, state[key]), f"{name}: '{key}' is not the module's initial value"


def compare(name, losses, ref_losses, final, ref_final, weight_tol):
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
    weight_err = weight_error(final, ref_final)
    print(f"{name}: losses {losses[0]:.6f} -> {losses[-1]:.6f}; max loss rel err {loss_err:.2e}; "
          f"max weight rel err {weight_err:.2e}")
    assert loss_err <= 1e-5, f"{name}: losses differ from PyTorch by {loss_err:.2e}"
    assert weight_err <= weight_tol, f"{name}: weights differ from PyTorch by {weight_err:.2e}"


# ---- an MLP with Sigmoid and a softmax head, trained with MSE (a forward-only export) ----------

class SoftmaxMlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 32)
        self.fc2 = torch.nn.Linear(32, 5)

    def forward(self, x):
        return torch.softmax(self.fc2(torch.sigmoid(self.fc1(x))), dim=-1)


def mlp_case(work):
    torch.manual_seed(0)
    module = SoftmaxMlp()
    path = os.path.join(work, "mlp.onnx")
    export(module, (torch.randn(3, 12),), path, ["x"], ["probs"], ["x"])
    rng = np.random.default_rng(1)
    n = 64
    data = os.path.join(work, "mlp-data")
    os.makedirs(data)
    x = rng.standard_normal((n, 12)).astype(np.float32)
    target = rng.dirichlet(np.ones(5), n).astype(np.float32)
    np.save(os.path.join(data, "x.npy"), x)
    np.save(os.path.join(data, "target.npy"), target)
    flags = ["--loss", "mse", "--target", "target", "--optimizer", "adamw", "--lr", "0.01", "--eps", "1e-6"]
    init, final, losses = dtc_run(path, work, "mlp", flags, data)
    same_initial_weights("mlp", module, init)

    opt = torch.optim.AdamW(module.parameters(), lr=0.01, eps=1e-6)
    ref_losses = []
    for idx in batches(n, BATCH, SEED, STEPS):
        opt.zero_grad()
        loss = F.mse_loss(module(torch.from_numpy(x[idx])), torch.from_numpy(target[idx]))
        loss.backward()
        opt.step()
        ref_losses.append(loss.item())
    ref_final = {k: v.detach().numpy() for k, v in module.state_dict().items()}
    compare("mlp", losses, ref_losses, final, ref_final, 1e-4)

    _, final2, losses2 = dtc_run(path, work, "mlp-dp2", flags + ["--mesh", "dp=2"], data, devices=2)
    compare("mlp dp=2 against one device", losses2, losses, final2, final, 1e-5)


def main():
    with tempfile.TemporaryDirectory() as work:
        mlp_case(work)
    print("onnx parity: ok")


if __name__ == "__main__":
    main()
