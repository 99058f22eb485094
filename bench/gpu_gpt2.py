"""GPT-2 124M training step on one GPU: dtrun (--device cuda, plans compiled by
tests/gpu/prepare.sh with the CUDA defaults — flash attention, GEMM epilogues, CUDA graphs —
and carried here) against PyTorch eager (bf16 autocast with SDPA; fp32) and torch.compile
(bf16), same batch (8 x 1024 tokens), AdamW (fused). Prints tokens/s for each, dtrun's ratio to
each peer of the same precision (goal: >= 1.0x eager now, >= torch.compile next), and the model
FLOPs utilisation against the GEMM peak measured on this GPU in the same run.
Usage: bench/gpu_gpt2.sh [BUILD_DIR] (on the GPU machine; see tests/gpu/run.sh)."""
import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

V, T, L, H, C, B = 50304, 1024, 12, 12, 768, 8
WARMUP, STEPS = 5, 20


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (z.view(b, t, H, C // H).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, C)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.h = nn.ModuleList([Block() for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, V).float(), targets.view(-1))


def torch_step(mode):
    """One training step of the PyTorch model, as a function: eager fp32 or bf16 autocast, or
    torch.compile'd bf16."""
    torch.manual_seed(0)
    model = Gpt().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, fused=True)
    step_model = torch.compile(model) if mode == "compile" else model
    idx = torch.randint(0, V, (B, T), device="cuda")
    tgt = torch.randint(0, V, (B, T), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        if mode == "fp32":
            loss = step_model(idx, tgt)
        else:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = step_model(idx, tgt)
        loss.backward()
        opt.step()
    return step


def torch_tokens_per_s(mode):
    step = torch_step(mode)
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(STEPS):
        step()
    torch.cuda.synchronize()
    return B * T * STEPS / (time.perf_counter() - t0)


def torch_profile(rows):
    """PyTorch eager bf16's step by CUDA kernel, to set beside dtrun --profile-summary."""
    step = torch_step("bf16")
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    print("PyTorch eager bf16, 3 steps, by CUDA kernel:")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=rows, max_name_column_width=60))


def dtrun_tokens_per_s(build, plan, work, env=None):
    tokens = os.path.join(work, "tokens.bin")
    header = np.zeros(256, dtype=np.int32)
    header[:3] = [20240520, 1, 200000]
    with open(tokens, "wb") as f:
        f.write(header.tobytes())
        f.write(np.random.default_rng(0).integers(0, 50257, 200000).astype(np.uint16).tobytes())
    log = os.path.join(work, "log.jsonl")
    run = subprocess.run([os.path.join(build, "tools", "dtrun", "dtrun"), plan, "--data", tokens, "--device", "cuda",
                          "--steps", str(WARMUP + STEPS), "--log", log], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    if run.returncode != 0:  # one plan's failure still leaves the other rows' numbers
        print(f"  dtrun {os.path.basename(plan)} {env or ''} failed (exit {run.returncode}): {run.stderr[-2000:]}")
        return float("nan")
    rates = [json.loads(line)["samples_per_s"] for line in open(log)][WARMUP:]
    return float(np.median(rates)) * T


def gemm_peak(dtype):
    a = torch.randn(8192, 8192, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ a
    torch.cuda.synchronize()
    return 10 * 2 * 8192**3 / (time.perf_counter() - t0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    parser.add_argument("--plans", required=True, help="the folder with gpt2-bf16.dtp and gpt2-fp32.dtp")
    parser.add_argument("--torch-profile", type=int, default=0, metavar="ROWS",
                        help="only print PyTorch eager bf16's step by CUDA kernel (ROWS rows)")
    a = parser.parse_args()
    if a.torch_profile:
        torch_profile(a.torch_profile)
        return
    torch.backends.cuda.matmul.allow_tf32 = False  # dtrun's fp32 GEMMs are exact fp32
    params = 12 * L * C * C + V * C + T * C
    flops_per_token = 6 * params + 12 * L * T * C  # PaLM's count: weights and attention
    peaks = {"fp32": gemm_peak(torch.float32), "bf16": gemm_peak(torch.bfloat16)}
    print(f"GPU: {torch.cuda.get_device_name()}; GEMM peak fp32 {peaks['fp32'] / 1e12:.1f} TFLOP/s, "
          f"bf16 {peaks['bf16'] / 1e12:.1f} TFLOP/s (8192^3, measured now)")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for precision in ("bf16", "fp32"):
            plan = os.path.join(a.plans, f"gpt2-{precision}.dtp")
            rows.append((f"dtrun {precision}", dtrun_tokens_per_s(a.build, plan, work), precision))
            print(f"  measured {rows[-1][0]}: {rows[-1][1]:.0f} tokens/s", flush=True)
        # Variants of the bf16 step, to see what each choice buys on this GPU (shown, not the
        # ratios' reference): attention unfused; the flash kernels instead of the GEMM path for
        # fused attention; no CUDA graphs; no cuBLASLt epilogues.
        variants = (("dtrun bf16, attention unfused", "gpt2-bf16-unfused-attention.dtp", {}),
                    ("dtrun bf16, flash-kernel attention", "gpt2-bf16.dtp", {"DTC_CUDA_ATTENTION": "flash"}),
                    ("dtrun bf16, no CUDA graphs", "gpt2-bf16.dtp", {"DTC_CUDA_GRAPHS": "0"}),
                    ("dtrun bf16, no cuBLASLt epilogues", "gpt2-bf16.dtp", {"DTC_CUDA_LT_EPILOGUES": "0"}))
        for name, plan, env in variants:
            rows.append((name, dtrun_tokens_per_s(a.build, os.path.join(a.plans, plan), work, env), "bf16 variant"))
            print(f"  measured {name}: {rows[-1][1]:.0f} tokens/s", flush=True)
    for name, mode, precision in (("pytorch eager bf16 autocast+SDPA", "bf16", "bf16"),
                                  ("torch.compile bf16", "compile", "bf16"),
                                  ("pytorch eager fp32", "fp32", "fp32")):
        rows.append((name, torch_tokens_per_s(mode), precision))
        print(f"  measured {name}: {rows[-1][1]:.0f} tokens/s", flush=True)
    ours = {precision: rate for name, rate, precision in rows if name in ("dtrun bf16", "dtrun fp32")}
    for name, rate, precision in rows:
        peak = peaks["bf16" if precision == "bf16 variant" else precision]
        mfu = rate * flops_per_token / peak
        if name.startswith("dtrun"):
            ratio = f"  (vs dtrun bf16: {rate / ours['bf16']:4.2f}x)" if precision == "bf16 variant" else ""
        else:
            ratio = f"  dtrun {precision} / this: {ours[precision] / rate:5.2f}x"
        print(f"  {name:34s} {rate:10.0f} tokens/s  MFU {100 * mfu:5.1f}%{ratio}")


if __name__ == "__main__":
    main()
