"""Tensor parallelism on a GPT in Hugging Face's layout: GPT-2's module names
(transformer.h.N.attn.c_attn, ...) with transformers' Conv1D, which stores its weight [in, out]
and computes x·W + b, exported to ONNX with the loss inside. The default preset must split it as
Megatron does (columns of [in, out] are its second dimension): the same collectives per step as
`dtc zoo gpt` of the same size (inspect), and training on tp=2 equal to one device (1e-5)."""
import json
import math
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import run, tool  # noqa: E402
from test_onnx_parity import compare, dtc_run, export  # noqa: E402

V, T, C, HEADS, LAYERS = 32, 8, 16, 2, 2


class Conv1D(torch.nn.Module):
    """transformers.pytorch_utils.Conv1D: weight [in, out], y = addmm(b, x, W)."""

    def __init__(self, nf, nx):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = torch.nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        out = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return out.view(x.size()[:-1] + (self.weight.size(1),))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(C), torch.nn.LayerNorm(C)
        self.attn, self.mlp = torch.nn.Module(), torch.nn.Module()
        self.attn.c_attn, self.attn.c_proj = Conv1D(3 * C, C), Conv1D(C, C)
        self.mlp.c_fc, self.mlp.c_proj = Conv1D(4 * C, C), Conv1D(C, 4 * C)

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // HEADS))
        att = att.masked_fill(torch.tril(torch.ones(t, t)).view(1, 1, t, t) == 0, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.attn.c_proj(y)
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt2(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = torch.nn.Module()
        self.transformer.wte = torch.nn.Embedding(V, C)
        self.transformer.wpe = torch.nn.Embedding(T, C)
        self.transformer.h = torch.nn.ModuleList(Block() for _ in range(LAYERS))
        self.transformer.ln_f = torch.nn.LayerNorm(C)

    def forward(self, idx, targets):
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(0, idx.size(1), dtype=torch.long))
        for block in self.transformer.h:
            x = block(x)
        logits = self.transformer.ln_f(x) @ self.transformer.wte.weight.t()
        return F.cross_entropy(logits.view(-1, V), targets.view(-1))


def collectives(plan):
    """The collectives of the training step, by kind."""
    info = json.loads(run(tool("dtc"), "inspect", plan, "--json").stdout)
    step = next(f for f in info["functions"] if f["name"] == "train_step")
    return {k: n for k, n in step["op_counts"].items()
            if k in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")}


def main():
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "gpt2.onnx")
        example = (torch.randint(0, V, (2, T)), torch.randint(0, V, (2, T)))
        export(Gpt2(), example, path, ["idx", "targets"], ["loss"], ["idx", "targets"])
        rng = np.random.default_rng(3)
        data = os.path.join(work, "data")
        os.makedirs(data)
        tokens = rng.integers(0, V, (48, T + 1))
        np.save(os.path.join(data, "idx.npy"), tokens[:, :-1].copy())
        np.save(os.path.join(data, "targets.npy"), tokens[:, 1:].copy())
        flags = ["--optimizer", "adamw", "--lr", "0.003", "--eps", "1e-4"]
        _, final, losses = dtc_run(path, work, "one", flags, data)
        _, final_tp, losses_tp = dtc_run(path, work, "tp2", flags + ["--mesh", "tp=2"], data, devices=2)
        compare("Conv1D GPT-2 tp=2 against one device", losses_tp, losses, final_tp, final, 1e-5)
        ours = collectives(os.path.join(work, "tp2.dtp"))
        zoo, zoo_plan = os.path.join(work, "zoo.dtm"), os.path.join(work, "zoo.dtp")
        run(tool("dtc"), "zoo", "gpt", "--vocab", V, "--ctx", T, "--layers", LAYERS, "--heads", HEADS,
            "--embd", C, "-o", zoo)
        run(tool("dtc"), "compile", zoo, "-o", zoo_plan, "--batch", 8, "--mesh", "tp=2", *flags)
        theirs = collectives(zoo_plan)
        print(f"collectives per step: Conv1D export {ours}, zoo GPT {theirs}")
        assert ours == theirs, (ours, theirs)
    print("conv1d tensor parallel: ok")


if __name__ == "__main__":
    main()
