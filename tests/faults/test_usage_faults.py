"""What a new user gets wrong, tried as they would: each gives a one-line error (exit 2) within
seconds, or the right behaviour, and loses nothing.

- --threads out of range (40000, 0, -1): an error naming the range, no output folder left behind;
- an exception nothing handles (a fault point that throws): one line, exit 1, the empty folders
  the run made removed, a folder that holds files kept;
- a fresh run with --checkpoint DIR where DIR holds checkpoints: an error naming the newest step
  and the ways on; the old step unchanged; --resume DIR continues it;
- --data without --steps: an error, not a silent run of no steps;
- a FIFO as input.npy: an error at once (not a wait for a writer);
- the run's header says the step's batch and its micro-batches; one process has no "largest rank";
- an ONNX export in evaluation mode (PyTorch's default): compiling it is an error saying how to
  export for training; --eval-export accepts the folded form knowingly;
- an ONNX classifier (cross-entropy on its logits) with --eval: loss and accuracy, as the zoo's;
- a float buffer on an ONNX export's loss path: the compile says what it trains, --buffer keeps it."""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_harness import command, expect_failure, run, run_job, tool, write_mlp_data  # noqa: E402


def tree(path):
    """Every file under `path` with its bytes."""
    out = {}
    for root, _, files in os.walk(path):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                out[os.path.relpath(os.path.join(root, name), path)] = f.read()
    return out


def make_inputs(work):
    data = os.path.join(work, "data")
    write_mlp_data(data, 64, seed=3)
    model, plan = os.path.join(work, "mlp.dtm"), os.path.join(work, "mlp.dtp")
    run(tool("dtc"), "zoo", "mlp", "--seed", 2, "-o", model)
    run(tool("dtc"), "compile", model, "-o", plan, "--batch", 16)
    return plan, data


def timed(cmd, what, bound=30):
    begin = time.time()
    result = run_job(cmd, bound, what)
    return result, time.time() - begin


def check_threads(plan, data, work):
    for value in (40000, 0, -1):
        what = f"--threads {value}"
        save, ckpt = os.path.join(work, f"t{value}-save"), os.path.join(work, f"t{value}-ckpt")
        cmd = [tool("dtrun"), plan, "--data", data, "--steps", 2, "--threads", value, "--save", save,
               "--checkpoint", ckpt]
        result, seconds = timed([str(a) for a in cmd], what)
        expect_failure(result, 2, ["--threads must be in [1, "], what)
        assert not os.path.exists(save) and not os.path.exists(ckpt), f"{what}: left folders behind"
        print(f"{what}: exit 2 in {seconds:.2f} s: {result[2].strip()}")


def check_last_resort(plan, data, work):
    what = "an exception nothing handles"
    save, log = os.path.join(work, "throw-save"), os.path.join(work, "throw.jsonl")
    kept = os.path.join(work, "throw-kept")
    os.makedirs(kept)
    with open(os.path.join(kept, "notes.txt"), "w") as f:
        f.write("mine\n")
    env = dict(os.environ, DTC_FAULT="after-step:throw")
    cmd = command(plan, 1, ["--data", data, "--steps", 3, "--save", save, "--log", log,
                            "--checkpoint", os.path.join(kept, "ckpt")])
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1, f"{what}: exit {proc.returncode}\n{proc.stderr}"
    assert lines == ["dtrun: error: internal: fault point after-step"], f"{what}: {lines}"
    assert not os.path.exists(save), f"{what}: the empty --save folder was left behind"
    assert not os.path.exists(os.path.join(kept, "ckpt")), f"{what}: the empty checkpoint folder"
    assert tree(kept) == {"notes.txt": b"mine\n"}, f"{what}: a folder with files was touched"
    print(f"{what}: exit 1: {lines[0]}")


def check_checkpoint_overwrite(plan, data, work):
    what = "--checkpoint DIR holding checkpoints, without --resume"
    ckpt = os.path.join(work, "ckpt")
    run(*command(plan, 1, ["--data", data, "--steps", 2, "--checkpoint", ckpt]))
    before = tree(ckpt)
    result, seconds = timed(command(plan, 1, ["--data", data, "--steps", 4, "--checkpoint", ckpt]), what)
    expect_failure(result, 2, [f"--checkpoint {ckpt} holds an earlier run's checkpoints", "step-2",
                               f"--resume {ckpt}", "new folder"], what)
    assert tree(ckpt) == before, f"{what}: the earlier checkpoints changed"
    print(f"{what}: exit 2 in {seconds:.2f} s; the earlier run's files unchanged")
    run(*command(plan, 1, ["--data", data, "--steps", 4, "--checkpoint", ckpt, "--resume", ckpt]))
    assert os.path.isdir(os.path.join(ckpt, "step-4")), "--resume DIR did not continue the run"


def check_no_steps(plan, data, work):
    what = "--data without --steps"
    result, seconds = timed(command(plan, 1, ["--data", data]), what)
    expect_failure(result, 2, ["--data needs --steps N"], what)
    print(f"{what}: exit 2 in {seconds:.2f} s")


def check_fifo(plan, data, work):
    what = "a FIFO as input.npy"
    fifo_data = os.path.join(work, "fifo-data")
    os.makedirs(fifo_data)
    os.link(os.path.join(data, "target.npy"), os.path.join(fifo_data, "target.npy"))
    os.mkfifo(os.path.join(fifo_data, "input.npy"))
    result, seconds = timed(command(plan, 1, ["--data", fifo_data, "--steps", 2]), what, bound=10)
    expect_failure(result, 2, ["input.npy is not a regular file but a FIFO"], what)
    print(f"{what}: exit 2 in {seconds:.2f} s")


def check_eval_export(work):
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                           nn.Linear(4 * 6 * 6, 10))
    x = torch.randn(2, 1, 8, 8)
    folded, unfolded = os.path.join(work, "eval.onnx"), os.path.join(work, "eval-unfolded.onnx")
    module.eval()
    torch.onnx.export(module, (x,), folded, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}}, opset_version=14)
    # Without a convolution before it, BatchNorm stays, normalising with its running statistics.
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 10))
    mlp.eval()
    torch.onnx.export(mlp, (x,), unfolded, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}}, opset_version=14)
    flags = ["--batch", 4, "--loss", "cross-entropy", "--target", "target"]
    what = "an ONNX export in evaluation mode"
    plan = os.path.join(work, "eval.dtp")
    result, _ = timed([str(a) for a in [tool("dtc"), "compile", folded, "-o", plan, *flags]], what)
    assert result[0] == 2, f"{what}: exit {result[0]}\n{result[2]}"
    assert "training=torch.onnx.TrainingMode.TRAINING" in result[2] and "onnx::" in result[2], result[2]
    assert "--eval-export" in result[2] and len(result[2].strip().splitlines()) == 1, result[2]
    assert not os.path.exists(plan), f"{what}: a plan was written"
    print(f"{what}: exit 2: {result[2].strip()}")
    result, _ = timed([str(a) for a in [tool("dtc"), "compile", unfolded, "-o", plan, *flags]], what)
    assert result[0] == 2 and "running statistics" in result[2], result[2]
    print(f"{what}, BatchNorm kept: exit 2: {result[2].strip()}")
    run(tool("dtc"), "compile", folded, "-o", plan, *flags, "--eval-export")
    assert os.path.exists(plan), "--eval-export: no plan"


def check_onnx_accuracy(work):
    """A classifier exported forward-only, its loss added by --loss cross-entropy, and one that
    returns its logits beside F.cross_entropy: --eval prints accuracy for both, as for the zoo's,
    and it is the share of argmax hits PyTorch counts on the same weights."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(784, 32), nn.ReLU(), nn.Linear(32, 10))
    x = torch.randn(2, 784)
    forward_only = os.path.join(work, "classifier.onnx")
    torch.onnx.export(net, (x,), forward_only, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}}, opset_version=14,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)

    class WithLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, input, target):
            logits = self.net(input)
            return logits, F.cross_entropy(logits, target)

    with_loss = os.path.join(work, "classifier-loss.onnx")
    torch.onnx.export(WithLoss(), (x, torch.zeros(2, dtype=torch.long)), with_loss,
                      input_names=["input", "target"], output_names=["logits", "loss"],
                      dynamic_axes={"input": {0: "batch"}, "target": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=14, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    data = os.path.join(work, "eval-data")
    inputs, labels = write_mlp_data(data, 64, seed=7)
    with torch.no_grad():
        hits = int((net(torch.from_numpy(inputs)).argmax(1).numpy() == labels).sum())
    for name, path, flags in (("forward-only, --loss cross-entropy", forward_only,
                               ["--loss", "cross-entropy", "--target", "target"]),
                              ("logits and F.cross_entropy", with_loss, ["--loss", "loss"])):
        plan = os.path.join(work, "classifier.dtp")
        run(tool("dtc"), "compile", path, "-o", plan, "--batch", 16, *flags)
        out = subprocess.run([tool("dtrun"), plan, "--steps", "0", "--eval", data, "--threads", "1"],
                             capture_output=True, text=True, check=True).stdout
        line = [l for l in out.splitlines() if "accuracy" in l]
        assert line and f"({hits}/64)" in line[0], f"ONNX {name}: {out}"
        print(f"ONNX classifier ({name}) --eval: {line[0].strip()}")


def check_onnx_buffer(work):
    """A float buffer the loss depends on (nn.Module.register_buffer): ONNX does not mark it, so the
    compile says what it will train; --buffer keeps it (saved, unchanged by training), and a glob
    that names nothing is an error."""
    import torch
    import torch.nn as nn
    from dtc_harness import load_safetensors

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(784, 10)
            self.register_buffer("temperature", torch.full((10,), 2.0))

        def forward(self, input):
            return self.fc(input) / self.temperature

    torch.manual_seed(0)
    path = os.path.join(work, "scaled.onnx")
    torch.onnx.export(Scaled(), (torch.randn(2, 784),), path, input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "batch"}}, opset_version=14,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    flags = ["--batch", 16, "--loss", "cross-entropy", "--target", "target", "--optimizer", "adamw", "--lr", 0.1]
    plan = os.path.join(work, "scaled.dtp")
    out = run(tool("dtc"), "compile", path, "-o", plan, *flags).stdout
    assert "trains 3 tensors (7860 values)" in out and "buffers" not in out, out
    print(f"ONNX buffer, as exported: {out.strip()}")
    out = run(tool("dtc"), "compile", path, "-o", plan, *flags, "--buffer", "temp*").stdout
    assert "trains 2 tensors (7850 values); keeps as buffers (not trained): temperature" in out, out
    print(f"ONNX buffer, --buffer 'temp*': {out.strip()}")
    data = os.path.join(work, "eval-data")  # check_onnx_accuracy's
    save = os.path.join(work, "scaled-save")
    run(*command(plan, 1, ["--data", data, "--steps", 3, "--save", save]))
    saved = load_safetensors(os.path.join(save, "model.safetensors"))
    assert np.array_equal(saved["temperature"], np.full(10, 2.0, np.float32)), saved["temperature"]
    result, _ = timed([str(a) for a in [tool("dtc"), "compile", path, "-o", plan, *flags, "--buffer", "nothing*"]],
                      "--buffer naming nothing")
    assert result[0] == 2 and "--buffer 'nothing*' names no float initializer" in result[2], result[2]


def check_run_header(data, work):
    """The header gives the step's batch and its micro-batches; one process has no "largest rank"."""
    model, plan = os.path.join(work, "mlp.dtm"), os.path.join(work, "accumulated.dtp")
    run(tool("dtc"), "compile", model, "-o", plan, "--batch", 16, "--microbatches", 4)
    out = run(*command(plan, 1, ["--data", data, "--steps", 1])).stdout
    header = [line for line in out.splitlines() if line.startswith("plan ")][0]
    assert ": batch 16 (4 micro-batches of 4)," in header, header
    assert "largest rank" not in out, out
    print(f"run header: {header.split(';')[0]}")


def main():
    with tempfile.TemporaryDirectory() as work:
        plan, data = make_inputs(work)
        check_threads(plan, data, work)
        check_last_resort(plan, data, work)
        check_checkpoint_overwrite(plan, data, work)
        check_no_steps(plan, data, work)
        check_fifo(plan, data, work)
        check_run_header(data, work)
        check_eval_export(work)
        check_onnx_accuracy(work)
        check_onnx_buffer(work)
    print("usage faults: OK")


if __name__ == "__main__":
    main()
