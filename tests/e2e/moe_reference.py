"""A mixture-of-experts GPT in PyTorch: nanoGPT's GPT (nanogpt_model.py) whose MLPs become
GShard/Switch mixture-of-experts layers, written independently of dtc's kernels (each token's
chosen experts computed on its own row, no dispatch buffer) but with the same routing rules:

- a softmax (or sigmoid) router (gate.weight [E, C]) and the top-k experts of each token, their weights the
  k scores, renormalised to sum to 1 when `normalize`;
- a capacity of ceil(factor · T · k / E) per expert and sequence (at most T), slots handed out
  in GShard's priority order (every token's first choice in token order, then every second
  choice...), choices past the capacity dropped (the token keeps only its residual for them);
- Switch's load-balancing loss E · Σᵢ fᵢ·Pᵢ (f the fraction of choices of expert i over the
  batch, P its mean score) and the z-loss mean(logsumexp(logits)²), each layer's added to the
  cross-entropy with its weight.

The experts' weights are stacked [E, in, out] under the names `dtc zoo gpt --experts` gives
them (transformer.h.0.mlp.experts.c_fc.weight ...)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import nanogpt_model as nanogpt


def capacity(tokens, experts, k, factor):
    return max(1, min(tokens, math.ceil(factor * tokens * k / experts)))


class StackedLinear(nn.Module):
    def __init__(self, experts, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(experts, n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(experts, n_out))


class Experts(nn.Module):
    def __init__(self, experts, c):
        super().__init__()
        self.c_fc = StackedLinear(experts, c, 4 * c)
        self.c_proj = StackedLinear(experts, 4 * c, c)

    def forward(self, x, e):
        """x [N, C] through expert e[n] of each row."""
        h = torch.bmm(x.unsqueeze(1), self.c_fc.weight[e]).squeeze(1) + self.c_fc.bias[e]
        h = F.gelu(h, approximate="tanh")
        return torch.bmm(h.unsqueeze(1), self.c_proj.weight[e]).squeeze(1) + self.c_proj.bias[e]


def route(scores, k, cap, normalize):
    """Top-k choices of scores [B, T, E] and whether each is kept: (expert, weight, kept), all
    [B, T, k]."""
    b, t, e = scores.shape
    top, expert = scores.topk(k, dim=-1)
    weight = top / top.sum(-1, keepdim=True) if normalize else top
    # Slots in priority order: choice j over all tokens before choice j + 1.
    onehot = F.one_hot(expert, e).permute(0, 2, 1, 3).reshape(b, k * t, e)
    position = ((onehot.cumsum(1) - 1) * onehot).sum(-1).reshape(b, k, t).permute(0, 2, 1)
    return expert, weight, position < cap


class MoE(nn.Module):
    def __init__(self, c, experts, k, factor, normalize, score="softmax"):
        super().__init__()
        self.score = score
        self.gate = nn.Linear(c, experts, bias=False)
        self.experts = Experts(experts, c)
        self.k, self.factor, self.normalize, self.n = k, factor, normalize, experts
        self.dropped = 0

    def forward(self, x):
        b, t, c = x.shape
        logits = self.gate(x)
        scores = F.softmax(logits, dim=-1) if self.score == "softmax" else torch.sigmoid(logits)
        expert, weight, kept = route(scores, self.k, capacity(t, self.n, self.k, self.factor),
                                     self.normalize)
        self.dropped += int((~kept).sum())
        rows = x.unsqueeze(2).expand(b, t, self.k, c).reshape(-1, c)
        out = self.experts(rows, expert.reshape(-1)).reshape(b, t, self.k, c)
        y = (out * (weight * kept).unsqueeze(-1)).sum(2)
        f = F.one_hot(expert, self.n).sum(2).float().mean((0, 1))
        aux = self.n * (f * scores.mean((0, 1))).sum()
        z = torch.logsumexp(logits, -1).pow(2).mean()
        return y, aux, z


class Block(nanogpt.Block):
    def __init__(self, config, moe):
        super().__init__(config)
        if moe:
            self.mlp = MoE(config.n_embd, *moe)
        self.losses = []

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        if isinstance(self.mlp, MoE):
            y, aux, z = self.mlp(self.ln_2(x))
            self.losses.append((aux, z))
            return x + y
        return x + self.mlp(self.ln_2(x))


class MoeGPT(nanogpt.GPT):
    """`moe` = (experts, k, capacity factor, normalize[, score]) for blocks 0, every, 2·every ..."""

    def __init__(self, config, moe, every, aux_weight, z_weight):
        super().__init__(config)
        self.transformer.h = nn.ModuleList(
            [Block(config, moe if i % every == 0 else None) for i in range(config.n_layer)])
        self.aux_weight, self.z_weight = aux_weight, z_weight

    def forward(self, idx, targets=None):
        for block in self.transformer.h:
            block.losses = []
        logits, loss = super().forward(idx, targets)
        for block in self.transformer.h:
            for aux, z in block.losses:
                loss = loss + self.aux_weight * aux + self.z_weight * z
        return logits, loss

    def dropped(self):
        return sum(b.mlp.dropped for b in self.transformer.h if isinstance(b.mlp, MoE))
