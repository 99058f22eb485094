"""GPT-2 124M and 350M training steps on one GPU: dtrun (--device cuda, plans compiled by
tests/gpu/prepare.sh with the CUDA defaults — attention on the fused projection through cuDNN,
GEMM epilogues, multi-tensor AdamW, CUDA graphs — and carried here) against PyTorch eager (bf16
autocast with SDPA; fp32, TF32 off) and torch.compile (bf16), same batch (124M: 8 x 1024 tokens;
350M: 4 x 1024), AdamW (fused). Prints tokens/s for each, dtrun's ratio to each peer of the same
precision (goals: bf16 >= 1.1x torch.compile on 124M and >= 1.0x on 350M, fp32 >= 1.0x eager),
the model FLOPs utilisation against the GEMM peak measured on this GPU in the same run, and each
run's kernel launches per step (dtrun: its CUDA graph's kernel nodes; PyTorch: the profiler's
kernels in one step).
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

V, T = 50304, 1024
# (layers, heads, width, batch) of each size the bench runs; L, H, C, B hold the one running.
SIZES = {"124M": (12, 12, 768, 8), "350M": (24, 16, 1024, 4)}
L, H, C, B = SIZES["124M"]
WARMUP, STEPS = 5, 20


def use_size(size):
    global L, H, C, B
    L, H, C, B = SIZES[size]


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
    """(tokens/s, CUDA kernels launched in one step)."""
    step = torch_step(mode)
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(STEPS):
        step()
    torch.cuda.synchronize()
    rate = B * T * STEPS / (time.perf_counter() - t0)
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        launches = sum(e.count for e in prof.key_averages()
                       if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA)
    except Exception as e:  # the count is a side line: the rate stands without it
        print(f"  (no kernel count for {mode}: {e})")
        launches = None
    return rate, launches


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
    """(tokens/s, kernel launches of train_step's CUDA graph or None, the attention path dtrun
    reported)."""
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
        return float("nan"), None, ""
    rates = [json.loads(line)["samples_per_s"] for line in open(log)][WARMUP:]
    launches, attention = None, ""
    for line in run.stderr.splitlines():
        if "function 'train_step' replays as a CUDA graph:" in line:
            launches = int(line.split(":")[-1].split()[0])
        if line.startswith("dtrun: attention "):
            attention = line[len("dtrun: attention "):]
    return float(np.median(rates)) * T, launches, attention


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


def run_size(size, a, peaks, precisions, variants):
    """The rows of one model size: dtrun's plans and variants, then PyTorch's runs."""
    use_size(size)
    params = 12 * L * C * C + V * C + T * C
    flops_per_token = 6 * params + 12 * L * T * C  # PaLM's count: weights and attention
    prefix = "gpt2" if size == "124M" else "gpt2-350m"
    print(f"GPT-2 {size}: {L} layers, {H} heads, width {C}, batch {B} x {T} tokens")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for precision in precisions:
            rate, launches, attention = dtrun_tokens_per_s(a.build, os.path.join(a.plans, f"{prefix}-{precision}.dtp"), work)
            rows.append((f"dtrun {precision}", rate, precision, launches))
            print(f"  measured {rows[-1][0]}: {rate:.0f} tokens/s; attention {attention}", flush=True)
        for name, plan, env in variants:
            rate, launches, _ = dtrun_tokens_per_s(a.build, os.path.join(a.plans, plan), work, env)
            rows.append((name, rate, "bf16 variant", launches))
            print(f"  measured {name}: {rate:.0f} tokens/s", flush=True)
    peers = [("pytorch eager bf16 autocast+SDPA", "bf16", "bf16"), ("torch.compile bf16", "compile", "bf16")]
    if "fp32" in precisions:
        peers.append(("pytorch eager fp32", "fp32", "fp32"))
    for name, mode, precision in peers:
        rate, launches = torch_tokens_per_s(mode)
        rows.append((name, rate, precision, launches))
        print(f"  measured {name}: {rate:.0f} tokens/s", flush=True)
    ours = {precision: rate for name, rate, precision, _ in rows if name in ("dtrun bf16", "dtrun fp32")}
    for name, rate, precision, launches in rows:
        peak = peaks["bf16" if precision == "bf16 variant" else precision]
        mfu = rate * flops_per_token / peak
        if name.startswith("dtrun"):
            ratio = f"  (vs dtrun bf16: {rate / ours['bf16']:4.2f}x)" if precision == "bf16 variant" else ""
        else:
            ratio = f"  dtrun {precision} / this: {ours[precision] / rate:5.2f}x"
        count = f"{launches:5d}" if launches is not None else "    ?"
        print(f"  {size} {name:34s} {rate:10.0f} tokens/s  MFU {100 * mfu:5.1f}%  launches/step {count}{ratio}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    parser.add_argument("--plans", required=True,
                        help="the folder with gpt2-bf16.dtp, gpt2-fp32.dtp and gpt2-350m-bf16.dtp")
    parser.add_argument("--torch-profile", type=int, default=0, metavar="ROWS",
                        help="only print PyTorch eager bf16's step by CUDA kernel (ROWS rows)")
    parser.add_argument("--sizes", default="124M,350M", help="the model sizes to run")
    a = parser.parse_args()
    if a.torch_profile:
        torch_profile(a.torch_profile)
        return
    torch.backends.cuda.matmul.allow_tf32 = False  # dtrun's fp32 GEMMs are exact fp32
    peaks = {"fp32": gemm_peak(torch.float32), "bf16": gemm_peak(torch.bfloat16)}
    print(f"GPU: {torch.cuda.get_device_name()}; GEMM peak fp32 {peaks['fp32'] / 1e12:.1f} TFLOP/s, "
          f"bf16 {peaks['bf16'] / 1e12:.1f} TFLOP/s (8192^3, measured now)")
    # Variants of GPT-2 124M's bf16 step, to see what each choice buys on this GPU (shown, not the
    # ratios' reference): attention unfused; dtc's own attention kernels instead of cuDNN's;
    # cuDNN's deterministic backward; no CUDA graphs; no cuBLASLt epilogues.
    variants = (("dtrun bf16, attention unfused", "gpt2-bf16-unfused-attention.dtp", {}),
                ("dtrun bf16, dtc's attention kernels", "gpt2-bf16.dtp", {"DTC_CUDA_ATTENTION": "gemm"}),
                ("dtrun bf16, cuDNN deterministic", "gpt2-bf16.dtp", {"DTC_CUDNN_DETERMINISTIC": "1"}),
                ("dtrun bf16, no CUDA graphs", "gpt2-bf16.dtp", {"DTC_CUDA_GRAPHS": "0"}),
                ("dtrun bf16, no cuBLASLt epilogues", "gpt2-bf16.dtp", {"DTC_CUDA_LT_EPILOGUES": "0"}))
    for size in a.sizes.split(","):
        if size == "124M":
            run_size(size, a, peaks, ("bf16", "fp32"), variants)
        else:
            run_size(size, a, peaks, ("bf16",), ())


if __name__ == "__main__":
    main()
