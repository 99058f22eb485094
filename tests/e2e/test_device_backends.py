"""The device path of the runtime without a GPU: `dtrun --device cpu-staged` runs the CPU kernels
behind the device interface (separate memory, inputs uploaded, loss and outputs downloaded,
state initialised and saved through host copies), so everything a GPU backend relies on in the
executor and trainer is exercised here. Same kernels in the same order: the results must be
bit-identical to `--device cpu`, on one process and on a dp x pp mesh.

`--device cuda` on a machine without a GPU (or without the plugin) must say so in one line."""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import run, tool  # noqa: E402
from test_data_parallel import MPIRUN, make_models  # noqa: E402


def train(plan, data, save, device, procs=1, extra=()):
    cmd = [tool("dtrun"), plan, "--data", data, "--steps", 4, "--seed", 2, "--threads", 1,
           "--save", save, "--device", device, *extra]
    return run(*(MPIRUN + [procs] + cmd if procs > 1 else cmd)).stdout


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def check_staged(work, m):
    cases = [("mlp", m["mlp"], m["data"], ["--batch", 16, "--optimizer", "adamw"], 1, ("--eval", m["data"])),
             ("gpt", m["gpt"], m["tokens"], ["--batch", 8, "--optimizer", "adamw"], 1, ("--eval", m["tokens"])),
             ("gpt-dp2-pp2", m["gpt"], m["tokens"],
              ["--batch", 8, "--mesh", "dp=2,pp=2", "--microbatches", 2], 4, ())]
    for name, model, data, flags, procs, extra in cases:
        plan = os.path.join(work, f"{name}.dtp")
        run(tool("dtc"), "compile", model, "-o", plan, *flags)
        outs = {}
        for device in ("cpu", "cpu-staged"):
            save = os.path.join(work, f"{name}-{device}")
            # Drop the samples/s column: timing differs, everything else must not.
            outs[device] = [line.split(" | ")[:2] for line in train(plan, data, save, device, procs, extra)
                            .splitlines() if line.startswith(("step", "eval"))]
        assert outs["cpu"] == outs["cpu-staged"], (name, outs)
        assert same_bytes(os.path.join(work, f"{name}-cpu", "model.safetensors"),
                          os.path.join(work, f"{name}-cpu-staged", "model.safetensors")), name
        print(f"{name}: --device cpu-staged equals --device cpu ({len(outs['cpu'])} log lines, saved weights identical)")


def check_cuda_refusal(work, m):
    """Asked for explicitly, or by a plan compiled with --device cuda."""
    plan, cuda_plan = os.path.join(work, "mlp.dtp"), os.path.join(work, "mlp-cuda.dtp")
    run(tool("dtc"), "compile", m["mlp"], "-o", cuda_plan, "--batch", 16, "--device", "cuda")
    assert "device: cuda" in run(tool("dtc"), "inspect", cuda_plan).stdout
    for cmd in ([plan, "--device", "cuda"], [cuda_plan]):
        proc = subprocess.run([tool("dtrun")] + cmd + ["--data", m["data"], "--steps", "1"],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            print("--device cuda: a GPU is present (the refusal is checked on machines without one)")
            return
        message = proc.stderr.strip()
        assert proc.returncode == 2 and len(message.splitlines()) == 1, message
        assert message.startswith("dtrun: error: --device cuda: ") and (
            "no CUDA device" in message or "cannot load the CUDA backend" in message), message
    print(f"--device cuda without a GPU: {message}")


def main():
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as work:
        m = make_models(work, rng)
        check_staged(work, m)
        check_cuda_refusal(work, m)
    print("device backends: ok")


if __name__ == "__main__":
    main()
