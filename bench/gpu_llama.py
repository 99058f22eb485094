"""Llama 3.2 1B and 3B training steps on one GPU: dtrun (--device cuda, plans compiled by
tests/gpu/prepare.sh with the CUDA defaults: grouped-query attention through cuDNN, bf16 storage
of the norms, SwiGLU and rotary, multi-tensor AdamW, CUDA graphs; carried in gpu-carry/) against
a PyTorch Llama of the same shapes written here (RMSNorm in f32 as transformers' LlamaRMSNorm,
rotary embeddings, SDPA with enable_gqa, SwiGLU, the head tied to the embedding), bf16 autocast,
AdamW, in eager mode (fused AdamW) and under torch.compile (the model and the optimizer's step
compiled; default mode and "max-autotune-no-cudagraphs"). Every contender runs in interleaved
rounds (bench/gpu_rounds.py): the median tokens/s over the rounds and its spread, MFU by model
FLOPs (6 per parameter of the GEMMs, the tied head counted once, plus attention's 12·L·T·C per
token, PaLM's count and dtc's for a plan), kernel launches per step, peak memory.
Goals (docs/gpu.md): dtrun >= 1.1x torch.compile and >= 1.3x eager at context 4096.

Usage: bench/gpu_llama.sh [BUILD_DIR] [--models 1B,3B] [--contexts 2048,4096,8192] [--rounds 3]
[--peers eager,compile,compile-max-autotune] (on the GPU machine; see tests/gpu/run.sh). One process per contender and round:
  python3 bench/gpu_llama.py --peer eager|compile|compile-max-autotune --model 1B --context 4096
prints that round's measurement as one JSON line."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_rounds  # noqa: E402

V = 128256
# (layers, width, query heads, key/value heads, FFN) of Llama 3.2's sizes.
MODELS = {"1B": (16, 2048, 32, 8, 8192), "3B": (28, 3072, 24, 8, 8192)}
# Sequences per step at each context: 16,384 tokens a step for 1B, 8,192 for 3B (what fits an
# 80 GB GPU beside the optimizer state at context 8192).
BATCH = {"1B": {2048: 8, 4096: 4, 8192: 2}, "3B": {2048: 4, 4096: 2, 8192: 1}}
ROPE_THETA, RMS_EPS = 500000.0, 1e-5
WARMUP, STEPS, MIN_SECONDS = 5, 20, 10.0


def gemm_params(model):
    layers, c, h, kv, ffn = MODELS[model]
    d = c // h
    per_layer = c * (h * d) + 2 * c * (kv * d) + (h * d) * c + 3 * c * ffn
    return layers * per_layer + V * c  # the tied head's GEMM once


def flops_per_token(model, context):
    layers, c, _, _, _ = MODELS[model]
    return 6 * gemm_params(model) + 12 * layers * context * c


def build_torch_model(model, context, device="cuda"):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    layers, c, h, kv, ffn = MODELS[model]
    d = c // h

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(c))

        def forward(self, x):
            dtype = x.dtype
            x = x.float()
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS)
            return self.weight * x.to(dtype)

    inv = 1.0 / (ROPE_THETA ** (torch.arange(0, d, 2).float() / d))
    angles = torch.outer(torch.arange(context).float(), inv)
    angles = torch.cat([angles, angles], dim=-1)
    cos, sin = angles.cos().to(device), angles.sin().to(device)

    def rotate(x):  # [B, H, T, D]
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return x * cos.to(x.dtype) + torch.cat([-x2, x1], dim=-1) * sin.to(x.dtype)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm, self.post_attention_layernorm = RMSNorm(), RMSNorm()
            self.q_proj = nn.Linear(c, h * d, bias=False)
            self.k_proj = nn.Linear(c, kv * d, bias=False)
            self.v_proj = nn.Linear(c, kv * d, bias=False)
            self.o_proj = nn.Linear(h * d, c, bias=False)
            self.gate_proj = nn.Linear(c, ffn, bias=False)
            self.up_proj = nn.Linear(c, ffn, bias=False)
            self.down_proj = nn.Linear(ffn, c, bias=False)

        def forward(self, x):
            b, t, _ = x.shape
            n = self.input_layernorm(x)
            q = self.q_proj(n).view(b, t, h, d).transpose(1, 2)
            k = self.k_proj(n).view(b, t, kv, d).transpose(1, 2)
            v = self.v_proj(n).view(b, t, kv, d).transpose(1, 2)
            y = F.scaled_dot_product_attention(rotate(q), rotate(k), v, is_causal=True, enable_gqa=True)
            x = x + self.o_proj(y.transpose(1, 2).reshape(b, t, h * d))
            n = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(n)) * self.up_proj(n))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(V, c)
            self.layers = nn.ModuleList([Block() for _ in range(layers)])
            self.norm = RMSNorm()

        def forward(self, idx, targets):
            x = self.embed_tokens(idx)
            for layer in self.layers:
                x = layer(x)
            logits = self.norm(x) @ self.embed_tokens.weight.t()
            return F.cross_entropy(logits.view(-1, V).float(), targets.view(-1))

    return Llama()


def torch_peer(mode, model, context):
    """One round of a PyTorch contender: build, warm up, time; the measurement as a dict."""
    import torch
    torch.manual_seed(0)
    batch = BATCH[model][context]
    net = build_torch_model(model, context).cuda()
    idx = torch.randint(0, V, (batch, context), device="cuda")
    tgt = torch.randint(0, V, (batch, context), device="cuda")
    step = gpu_rounds.torch_training_step(net, mode, 3e-4, idx, tgt)
    return gpu_rounds.torch_measure(step, batch * context, WARMUP, STEPS, MIN_SECONDS)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--peer", choices=("eager", "compile", "compile-max-autotune"))
    parser.add_argument("--model", default="1B", choices=sorted(MODELS))
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--build", help="the CUDA build (tools/dtrun/dtrun)")
    parser.add_argument("--plans", help="gpu-carry/, with llama-{1b,3b}-{2048,4096,8192}.dtp and llama3-tokens.bin")
    parser.add_argument("--models", default="1B,3B")
    parser.add_argument("--contexts", default="2048,4096,8192")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--precision", default="bf16",
                        help="dtrun's, comma-separated: bf16 (llama-SIZE-CONTEXT.dtp), fp8 (…-fp8.dtp), "
                             "fp8-delayed (…-fp8-delayed.dtp, delayed scaling)")
    parser.add_argument("--peers", default="eager,compile,compile-max-autotune",
                        help="the PyTorch contenders: eager, torch.compile's modes")
    a = parser.parse_args()
    if a.peer:
        print(json.dumps(torch_peer(a.peer, a.model, a.context)))
        return
    if not a.build or not a.plans:
        parser.error("--build and --plans are needed (or --peer for one PyTorch round)")
    import torch
    peak = gpu_rounds.gemm_peak()
    print(f"GPU: {torch.cuda.get_device_name()}; bf16 GEMM peak {peak / 1e12:.1f} TFLOP/s (8192^3, measured now); "
          f"PyTorch {torch.__version__}")
    tokens = os.path.join(a.plans, "llama3-tokens.bin")
    me = os.path.abspath(__file__)
    for model in a.models.split(","):
        for context in (int(c) for c in a.contexts.split(",")):
            batch = BATCH[model][context]
            contenders = []
            for precision in a.precision.split(","):
                suffix = "" if precision == "bf16" else f"-{precision}"
                plan = os.path.join(a.plans, f"llama-{model.lower()}-{context}{suffix}.dtp")
                contenders.append((f"dtrun {precision}", gpu_rounds.dtrun_measure(
                    a.build, plan, tokens, WARMUP, STEPS, tokens_per_sample=context)))
            for peer in filter(None, a.peers.split(",")):
                argv = [sys.executable, me, "--peer", peer, "--model", model, "--context", str(context)]
                contenders.append((f"pytorch {peer} bf16", lambda _r, argv=argv: gpu_rounds.run_process(argv)))
            print(f"Llama 3.2 {model}, context {context}, batch {batch}: {a.rounds} interleaved rounds", flush=True)
            results = gpu_rounds.run_rounds(contenders, a.rounds)
            gpu_rounds.print_table(f"Llama 3.2 {model}, {batch} x {context} tokens a step", results,
                                   contenders[0][0], [n for n, _ in contenders[1:]],
                                   flops_per_token(model, context), peak)


if __name__ == "__main__":
    main()
