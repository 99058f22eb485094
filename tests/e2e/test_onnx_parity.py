"""ONNX in: modules written here (not from the zoo) are exported by torch.onnx.export in training
mode, compiled by dtc and trained by dtrun, against PyTorch training the same module from the same
weights on the same batches. The initial parameters dtrun saves must be the module's, under its
state_dict names; 10 steps' losses must agree to 1e-5 relative and the final weights to the
project's bounds (an MLP also through a running sum, stepped slices, Tile, a broadcast product
and a clamp); partitioned runs (dp=2; the GPT also accumulated, pp=2, tp=2 and resumed on
another layout) must equal one device. The GPT trains with dropout: PyTorch is given dtc's masks."""
import math
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import (batches, dropout_key, dropout_scale, load_safetensors, read_log, run,  # noqa: E402
                         tool, weight_error)

STEPS, SEED, BATCH = 10, 5, 8
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]


def export(module, args, path, input_names, output_names, dynamic):
    module.train()
    torch.onnx.export(module, args, path, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=input_names, output_names=output_names,
                      dynamic_axes={name: {0: "batch"} for name in dynamic}, opset_version=14)


def dtc_run(onnx_path, work, name, compile_flags, data, devices=1, batch=BATCH):
    """Compiles the export (`batch` samples per micro-batch), saves the initial parameters, trains
    STEPS steps; returns (initial, final parameters, losses)."""
    plan = os.path.join(work, f"{name}.dtp")
    run(tool("dtc"), "compile", onnx_path, "-o", plan, "--batch", batch, *compile_flags)
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


def torch_reference(module, opt, n, loss_of, before_step=lambda step: None):
    """PyTorch training `module` STEPS steps on dtrun's batches; `loss_of(rows)` is one batch's
    loss. Returns (losses, final state)."""
    losses = []
    for step, rows in enumerate(batches(n, BATCH, SEED, STEPS)):
        before_step(step)
        opt.zero_grad()
        loss = loss_of(rows)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().numpy() for k, v in module.state_dict().items()}


def compare(name, losses, ref_losses, final, ref_final, weight_tol):
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
    # The tensors dtrun saves: an export keeps one name of a tied weight, and folds constant
    # buffers (masks).
    weight_err = weight_error(final, {k: v for k, v in ref_final.items() if k in final})
    print(f"{name}: losses {losses[0]:.6f} -> {losses[-1]:.6f}; max loss rel err {loss_err:.2e}; "
          f"max weight rel err {weight_err:.2e}")
    assert loss_err <= 1e-5, f"{name}: losses differ from PyTorch by {loss_err:.2e}"
    assert weight_err <= weight_tol, f"{name}: weights differ from PyTorch by {weight_err:.2e}"


# ---- an MLP with Sigmoid and a softmax head, trained with MSE (a forward-only export); slices,
# gathers, concatenations, a triangle and masks on its activations, a parameter expanded ----------

class SoftmaxMlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 32)
        self.fc2 = torch.nn.Linear(38, 5)
        self.shift = torch.nn.Parameter(0.1 * torch.randn(1, 7))
        self.register_buffer("flip", torch.arange(28) % 3 == 0)
        self.register_buffer("fill", torch.arange(28) % 5 == 1)

    def forward(self, x):
        h = torch.sigmoid(self.fc1(x))
        h = torch.cat([h[:, 20:], h[:, 2:18]], dim=1)  # Slice and Concat on data: [N, 28]
        # Trilu on data, Expand of a parameter; Where with constant masks, both branches computed
        # and a constant fill
        h = torch.triu(h.view(-1, 4, 7), diagonal=1).reshape(-1, 28) + self.shift.expand(4, 7).reshape(28)
        h = torch.where(self.flip, -h, h).masked_fill(self.fill, 0.25)
        # Gathers with constant indices: the last of 4 groups, and columns 0, 2, 3
        h = torch.cat([h, h.view(-1, 4, 7)[:, -1], h[:, [0, 2, 3]]], dim=1)
        return torch.softmax(self.fc2(h), dim=-1)


class SoftmaxMlpWithLoss(SoftmaxMlp):
    """The same MLP with its MSE spelled out inside the export (Sub, Pow, ReduceMean)."""

    def forward(self, x, target):
        return ((super().forward(x) - target) ** 2).mean()


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
    flags = ["--loss", "mse", "--target", "target", "--optimizer", "adamw", "--lr", "0.002", "--eps", "1e-6"]
    init, final, losses = dtc_run(path, work, "mlp", flags, data)
    same_initial_weights("mlp", module, init)

    opt = torch.optim.AdamW(module.parameters(), lr=0.002, eps=1e-6)
    ref_losses, ref_final = torch_reference(
        module, opt, n, lambda rows: F.mse_loss(module(torch.from_numpy(x[rows])), torch.from_numpy(target[rows])))
    compare("mlp", losses, ref_losses, final, ref_final, 1e-4)

    _, final2, losses2 = dtc_run(path, work, "mlp-dp2", flags + ["--mesh", "dp=2"], data, devices=2)
    compare("mlp dp=2 against one device", losses2, losses, final2, final, 1e-5)

    # The loss inside the export, the step's 8 rows as 2 accumulated micro-batches of 4: each
    # micro-batch's mean counts half, as on the whole batch.
    torch.manual_seed(0)
    with_loss = os.path.join(work, "mlp-loss.onnx")
    export(SoftmaxMlpWithLoss(), (torch.randn(3, 12), torch.rand(3, 5)), with_loss, ["x", "target"], ["loss"],
           ["x", "target"])
    _, final3, losses3 = dtc_run(with_loss, work, "mlp-loss-acc2", flags[4:] + ["--accumulate", "2"], data,
                                 batch=BATCH // 2)
    compare("mlp with its loss exported, 2 accumulated micro-batches, against one device", losses3, losses,
            final3, final, 1e-5)


# ---- ops on activations exports of other models write: a running sum, slices with steps,
# a product whose batch dimensions broadcast, Tile, Softplus, a clamp to the float's lowest value

class ScanMlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 16)
        self.fc2 = torch.nn.Linear(16, 5)
        self.mix = torch.nn.Parameter(0.3 * torch.randn(1, 4, 4))

    def forward(self, x):
        h = torch.cumsum(torch.tanh(self.fc1(x)), dim=1)  # CumSum, differentiable
        h = torch.cat([h[:, ::2], h[:, 1::2]], dim=1)      # steps of 2 from 0 and from 1
        h = (h.view(-1, 4, 4) @ self.mix).reshape(-1, 16)   # [N, 4, 4] · [1, 4, 4]
        h = h.repeat(1, 2)[:, 3:19]                         # Tile, then a slice across the copies
        h = F.softplus(4 * h) - 1                           # Softplus
        h = torch.max(h, torch.tensor(torch.finfo(torch.float32).min))
        return torch.softmax(self.fc2(h), dim=-1)


def scan_case(work):
    torch.manual_seed(0)
    module = ScanMlp()
    path = os.path.join(work, "scan.onnx")
    export(module, (torch.randn(3, 12),), path, ["x"], ["probs"], ["x"])
    rng = np.random.default_rng(3)
    n = 64
    data = os.path.join(work, "scan-data")
    os.makedirs(data)
    x = rng.standard_normal((n, 12)).astype(np.float32)
    target = rng.dirichlet(np.ones(5), n).astype(np.float32)
    np.save(os.path.join(data, "x.npy"), x)
    np.save(os.path.join(data, "target.npy"), target)
    flags = ["--loss", "mse", "--target", "target", "--optimizer", "adamw", "--lr", "0.002", "--eps", "1e-6"]
    init, final, losses = dtc_run(path, work, "scan", flags, data)
    same_initial_weights("scan", module, init)
    opt = torch.optim.AdamW(module.parameters(), lr=0.002, eps=1e-6)
    ref_losses, ref_final = torch_reference(
        module, opt, n, lambda rows: F.mse_loss(module(torch.from_numpy(x[rows])), torch.from_numpy(target[rows])))
    compare("cumsum, stepped slices, broadcast matmul, tile, softplus, clamp", losses, ref_losses, final, ref_final, 1e-4)


# ---- a GPT: pre-LN blocks, causal attention, tanh GELU, dropout, tied head, the loss inside the
# export -------------------------------------------------------------------------------------------

class Drop(torch.nn.Module):
    """nn.Dropout for the export; for the reference run, dtrun's masks (runtime/ops/dropout_math.h),
    which PyTorch's generator cannot draw: each call takes the next Dropout node's key, in the
    order the export wrote them, and the step's (seed, step) pair."""
    masks = None  # DtrunMasks while the reference trains

    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if Drop.masks is None:
            return F.dropout(x, self.p, self.training)
        return x * torch.from_numpy(Drop.masks.next(tuple(x.shape), self.p))


class DtrunMasks:
    def __init__(self, onnx_path, seed):
        import onnx
        graph = onnx.load(onnx_path).graph
        self.keys = [dropout_key(n.output[0]) for n in graph.node if n.op_type == "Dropout"]
        self.seed, self.step, self.calls = seed, 0, 0

    def start(self, step):
        self.step, self.calls = step, 0

    def next(self, shape, p):
        key = self.keys[self.calls]
        self.calls += 1
        return dropout_scale(self.seed, self.step, key, shape, p)


class Block(torch.nn.Module):
    def __init__(self, c, heads, t):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(c)
        self.c_attn = torch.nn.Linear(c, 3 * c)
        self.c_proj = torch.nn.Linear(c, c)
        self.ln_2 = torch.nn.LayerNorm(c)
        self.c_fc = torch.nn.Linear(c, 4 * c)
        self.mlp_proj = torch.nn.Linear(4 * c, c)
        self.heads = heads
        self.register_buffer("bias", torch.tril(torch.ones(t, t)).view(1, 1, t, t))
        self.attn_drop, self.resid_drop, self.mlp_drop = Drop(0.1), Drop(0.1), Drop(0.1)

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = (self.attn_drop(F.softmax(att, dim=-1)) @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.resid_drop(self.c_proj(y))
        return x + self.mlp_drop(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))


class Gpt(torch.nn.Module):
    def __init__(self, vocab=32, t=8, c=16, heads=2, layers=2):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, c)
        self.wpe = torch.nn.Embedding(t, c)
        self.drop = Drop(0.1)
        self.h = torch.nn.ModuleList(Block(c, heads, t) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(c)
        self.lm_head = torch.nn.Linear(c, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        for m in self.modules():  # GPT-2's initialisation
            if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
                torch.nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, torch.nn.Linear) and m.bias is not None:
                torch.nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        t = idx.size(1)
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(0, t, dtype=torch.long)))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def gpt_case(work):
    torch.manual_seed(0)
    module = Gpt()
    path = os.path.join(work, "gpt.onnx")
    example = (torch.randint(0, 32, (2, 8)), torch.randint(0, 32, (2, 8)))
    export(module, example, path, ["idx", "targets"], ["loss"], ["idx", "targets"])
    rng = np.random.default_rng(2)
    n = 48
    data = os.path.join(work, "gpt-data")
    os.makedirs(data)
    tokens = rng.integers(0, 32, (n, 9))
    idx, targets = tokens[:, :-1].copy(), tokens[:, 1:].copy()
    np.save(os.path.join(data, "idx.npy"), idx)
    np.save(os.path.join(data, "targets.npy"), targets)
    # AdamW's eps 1e-4, as the GPT parity test: smaller ones amplify fp32 rounding in both runs.
    flags = ["--optimizer", "adamw", "--lr", "0.003", "--eps", "1e-4"]
    init, final, losses = dtc_run(path, work, "gpt", flags, data)
    same_initial_weights("gpt", module, init)
    plan_ops = run(tool("dtc"), "inspect", os.path.join(work, "gpt.dtp")).stdout
    for fused in ("layer_norm", "gelu", "causal_softmax", "linear", "embedding", "dropout"):
        assert fused + "=" in plan_ops, f"gpt: the export's {fused} was not fused"

    opt = torch.optim.AdamW(module.parameters(), lr=0.003, eps=1e-4)
    Drop.masks = DtrunMasks(path, SEED)
    assert len(Drop.masks.keys) == 7, f"gpt: the export holds {len(Drop.masks.keys)} Dropout nodes"
    ref_losses, ref_final = torch_reference(
        module, opt, n, lambda rows: module(torch.from_numpy(idx[rows]), torch.from_numpy(targets[rows])),
        before_step=Drop.masks.start)
    Drop.masks = None
    compare("gpt", losses, ref_losses, final, ref_final, 1e-4)
    # Back into the module (the README's way): only the tied head's second name and the folded
    # mask buffers are not in the file.
    fresh = Gpt()
    result = fresh.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in final.items()}, strict=False)
    assert not result.unexpected_keys, result.unexpected_keys
    assert set(result.missing_keys) == {"lm_head.weight", "h.0.bias", "h.1.bias"}, result.missing_keys
    assert torch.equal(fresh.lm_head.weight, torch.from_numpy(final["wte.weight"]))

    _, final2, losses2 = dtc_run(path, work, "gpt-dp2", flags + ["--mesh", "dp=2"], data, devices=2)
    compare("gpt dp=2 against one device", losses2, losses, final2, final, 1e-5)
    # The step's 8 rows as 2 accumulated micro-batches of 4, each split over 2 ranks: dropout
    # places every block by its rows in the step.
    _, final5, losses5 = dtc_run(path, work, "gpt-dp2-acc2", flags + ["--mesh", "dp=2", "--accumulate", "2"],
                                 data, devices=2, batch=BATCH // 2)
    compare("gpt dp=2 with 2 accumulated micro-batches against one device", losses5, losses, final5, final, 1e-5)
    _, final3, losses3 = dtc_run(path, work, "gpt-pp2", flags + ["--mesh", "pp=2", "--microbatches", "2"],
                                 data, devices=2)
    compare("gpt pp=2 against one device", losses3, losses, final3, final, 1e-5)
    # Megatron's splits found by the block's shape (the names are not nanoGPT's), vocabulary
    # parallel cross-entropy included.
    _, final4, losses4 = dtc_run(path, work, "gpt-tp2", flags + ["--mesh", "tp=2"], data, devices=2)
    compare("gpt tp=2 against one device", losses4, losses, final4, final, 1e-5)
    resumed_on_another_layout(path, work, flags, data, losses, final)


def resumed_on_another_layout(path, work, flags, data, losses, final):
    """Steps 1..5 on dp=2 with a checkpoint, 6..10 resumed on tp=2: dropout draws the masks of
    the uninterrupted one-device run."""
    plans = {}
    for name, mesh in (("dp2", "dp=2"), ("tp2", "tp=2")):
        plans[name] = os.path.join(work, f"gpt-resume-{name}.dtp")
        run(tool("dtc"), "compile", path, "-o", plans[name], "--batch", BATCH, *flags, "--mesh", mesh)
    ckpt, log, save = (os.path.join(work, f"gpt-resume-{s}") for s in ("ckpt", "log.jsonl", "final"))
    run(*MPIRUN, 2, tool("dtrun"), plans["dp2"], "--data", data, "--steps", STEPS // 2, "--seed", SEED,
        "--checkpoint", ckpt, "--threads", 1)
    run(*MPIRUN, 2, tool("dtrun"), plans["tp2"], "--data", data, "--steps", STEPS, "--resume", ckpt,
        "--log", log, "--save", save, "--threads", 1)
    resumed = [e["loss"] for e in read_log(log)]
    assert len(resumed) == STEPS - STEPS // 2, f"gpt resume: {len(resumed)} steps logged"
    compare("gpt dp=2, resumed on tp=2, against one device", resumed, losses[STEPS // 2:],
            load_safetensors(os.path.join(save, "model.safetensors")), final, 1e-5)


# ---- a ResNet-style CNN: BatchNorm with running statistics, a skip connection ----------------

class ResNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 6, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(6)
        self.conv2 = torch.nn.Conv2d(6, 6, 3, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(6)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(6, 4)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(y + self.bn2(self.conv2(y)))
        y = F.adaptive_avg_pool2d(F.avg_pool2d(self.pool(y), 2), 1).flatten(1)
        return self.fc(y)


def cnn_case(work):
    torch.manual_seed(0)
    module = ResNet()
    path = os.path.join(work, "cnn.onnx")
    export(module, (torch.randn(2, 1, 8, 8),), path, ["x"], ["logits"], ["x"])
    rng = np.random.default_rng(3)
    n = 40
    data = os.path.join(work, "cnn-data")
    os.makedirs(data)
    x = rng.standard_normal((n, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 4, n)
    np.save(os.path.join(data, "x.npy"), x)
    np.save(os.path.join(data, "labels.npy"), y)
    flags = ["--loss", "cross-entropy", "--target", "labels", "--optimizer", "sgd", "--lr", "0.05",
             "--momentum", "0.9"]
    init, final, losses = dtc_run(path, work, "cnn", flags, data)
    same_initial_weights("cnn", module, init)
    assert "bn1.running_mean" in init, "cnn: the running statistics are not saved as buffers"

    opt = torch.optim.SGD(module.parameters(), lr=0.05, momentum=0.9)
    ref_losses, ref_final = torch_reference(
        module, opt, n, lambda rows: F.cross_entropy(module(torch.from_numpy(x[rows])), torch.from_numpy(y[rows])))
    compare("cnn", losses, ref_losses, final, ref_final, 1e-4)

    _, final2, losses2 = dtc_run(path, work, "cnn-dp2", flags + ["--mesh", "dp=2"], data, devices=2)
    compare("cnn dp=2 against one device", losses2, losses, final2, final, 1e-5)


# ---- a small language model trained on padded sequences: targets -100 where there is no token,
# F.cross_entropy's ignore_index, as Hugging Face's recipes pad ----------------------------------

class TinyLm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(16, 12)
        self.fc = torch.nn.Linear(12, 12)
        self.head = torch.nn.Linear(12, 16)

    def forward(self, idx, targets):
        logits = self.head(torch.tanh(self.fc(self.wte(idx))))
        return F.cross_entropy(logits.view(-1, 16), targets.view(-1), ignore_index=-100)


def padded_tokens(rng, n, t):
    """Token ids and targets [n, t] with padding (-100) of every length from none to all but one
    position, so that ranks and micro-batches hold different numbers of positions that count."""
    idx = rng.integers(0, 16, (n, t))
    targets = rng.integers(0, 16, (n, t))
    for row in range(n):
        targets[row, t - row % t:] = -100
    return idx, targets


def padded_lm_case(work):
    torch.manual_seed(0)
    module = TinyLm()
    path = os.path.join(work, "lm.onnx")
    export(module, (torch.zeros(2, 6, dtype=torch.long), torch.zeros(2, 6, dtype=torch.long)), path,
           ["idx", "targets"], ["loss"], ["idx", "targets"])
    n, t = 32, 6
    data = os.path.join(work, "lm-data")
    os.makedirs(data)
    idx, targets = padded_tokens(np.random.default_rng(4), n, t)
    np.save(os.path.join(data, "idx.npy"), idx)
    np.save(os.path.join(data, "targets.npy"), targets)
    flags = ["--optimizer", "adamw", "--lr", "0.01", "--eps", "1e-6"]
    init, final, losses = dtc_run(path, work, "lm", flags, data)
    same_initial_weights("lm", module, init)
    opt = torch.optim.AdamW(module.parameters(), lr=0.01, eps=1e-6)
    ref_losses, ref_final = torch_reference(
        module, opt, n, lambda rows: module(torch.from_numpy(idx[rows]), torch.from_numpy(targets[rows])))
    compare("padded lm (ignore_index -100)", losses, ref_losses, final, ref_final, 1e-4)
    # The mean is over the step's positions that count, whichever rank or micro-batch holds them.
    for name, extra, devices, batch in (("dp2", ["--mesh", "dp=2"], 2, BATCH),
                                        ("acc2", ["--accumulate", "2"], 1, BATCH // 2),
                                        ("dp2-acc2", ["--mesh", "dp=2", "--accumulate", "2"], 2, BATCH // 2),
                                        ("pp2", ["--mesh", "pp=2", "--microbatches", "2"], 2, BATCH),
                                        # the vocabulary split: the loss in pieces skips them too
                                        ("tp2-vocab", ["--mesh", "tp=2", "--vocab-parallel", "--shard",
                                                       "head.weight=tp,-", "--shard", "head.bias=tp"], 2,
                                         BATCH)):
        _, final2, losses2 = dtc_run(path, work, f"lm-{name}", flags + extra, data, devices=devices, batch=batch)
        compare(f"padded lm {name} against one device", losses2, losses, final2, final, 1e-5)


# ---- the same language model with class weights (a buffer) and a per-token loss weighted by the
# data (reduction="none"), padding included -------------------------------------------------------

class WeightedLm(TinyLm):
    def __init__(self):
        super().__init__()
        self.register_buffer("class_weight", torch.linspace(0.25, 2.0, 16))

    def forward(self, idx, targets, token_weight):
        logits = self.head(torch.tanh(self.fc(self.wte(idx)))).view(-1, 16)
        weighted = F.cross_entropy(logits, targets.view(-1), weight=self.class_weight, ignore_index=-100)
        per_token = F.cross_entropy(logits, targets.view(-1), ignore_index=-100, reduction="none")
        return weighted + (per_token.view_as(token_weight) * token_weight).mean()


def weighted_lm_case(work):
    torch.manual_seed(0)
    module = WeightedLm()
    path = os.path.join(work, "weighted-lm.onnx")
    zeros = torch.zeros(2, 6, dtype=torch.long)
    export(module, (zeros, zeros, torch.ones(2, 6)), path, ["idx", "targets", "token_weight"], ["loss"],
           ["idx", "targets", "token_weight"])
    rng = np.random.default_rng(5)
    n, t = 32, 6
    data = os.path.join(work, "weighted-lm-data")
    os.makedirs(data)
    idx, targets = padded_tokens(rng, n, t)
    token_weight = rng.uniform(0, 2, (n, t)).astype(np.float32)
    for name, value in (("idx", idx), ("targets", targets), ("token_weight", token_weight)):
        np.save(os.path.join(data, f"{name}.npy"), value)
    flags = ["--optimizer", "adamw", "--lr", "0.01", "--eps", "1e-6"]
    init, final, losses = dtc_run(path, work, "wlm", flags, data)
    same_initial_weights("weighted lm", module, init)
    opt = torch.optim.AdamW(module.parameters(), lr=0.01, eps=1e-6)
    ref_losses, ref_final = torch_reference(
        module, opt, n, lambda rows: module(*(torch.from_numpy(a[rows]) for a in (idx, targets, token_weight))))
    compare("lm with class weights and a per-token loss", losses, ref_losses, final, ref_final, 1e-4)
    # The weighted mean divides by the step's weights, whichever rank or micro-batch holds them.
    for name, extra, devices, batch in (("dp2", ["--mesh", "dp=2"], 2, BATCH),
                                        ("dp2-acc2", ["--mesh", "dp=2", "--accumulate", "2"], 2, BATCH // 2),
                                        ("pp2", ["--mesh", "pp=2", "--microbatches", "2"], 2, BATCH)):
        _, final2, losses2 = dtc_run(path, work, f"wlm-{name}", flags + extra, data, devices=devices, batch=batch)
        compare(f"weighted lm {name} against one device", losses2, losses, final2, final, 1e-5)


def main():
    with tempfile.TemporaryDirectory() as work:
        padded_lm_case(work)
        weighted_lm_case(work)
        mlp_case(work)
        scan_case(work)
        gpt_case(work)
        cnn_case(work)
    print("onnx parity: ok")


if __name__ == "__main__":
    main()
