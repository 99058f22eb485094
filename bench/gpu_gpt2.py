"""GPT-2 124M and 350M training steps on one GPU: dtrun (--device cuda, plans compiled by
tests/gpu/prepare.sh with the CUDA defaults — attention on the fused projection through cuDNN,
GEMM epilogues, multi-tensor AdamW, CUDA graphs — and carried here) against PyTorch eager (bf16
autocast with SDPA and fused AdamW; fp32, TF32 off) and torch.compile (bf16; the model and the
optimizer's step compiled, in the default mode and in "max-autotune-no-cudagraphs"), same batch
(124M: 8 x 1024 tokens; 350M: 4 x 1024). Every contender runs in interleaved rounds
(bench/gpu_rounds.py): the median tokens/s over the rounds and its spread, dtrun's ratio to each
peer of the same precision (goals: bf16 >= 1.1x torch.compile and >= 470k tokens/s on 124M,
>= 1.0x on 350M, fp32 >= 1.0x eager), the model FLOPs utilisation against the GEMM peak measured
on this GPU in the same run, each contender's kernel launches per step (dtrun: its CUDA graph's
kernel nodes; PyTorch: the profiler's kernels in one step) and peak memory.
Usage: bench/gpu_gpt2.sh [BUILD_DIR] [--sizes 124M,350M] [--rounds 3] [--variants] (on the GPU
machine; see tests/gpu/run.sh). One process per contender and round:
  python3 bench/gpu_gpt2.py --peer bf16|fp32|compile|compile-max-autotune --size 124M"""
import argparse
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_rounds  # noqa: E402

V, T = 50304, 1024
# (layers, heads, width, batch) of each size the bench runs; L, H, C, B hold the one running.
SIZES = {"124M": (12, 12, 768, 8), "350M": (24, 16, 1024, 4)}
L, H, C, B = SIZES["124M"]
WARMUP, STEPS, MIN_SECONDS = 5, 20, 10.0


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
    """One training step of the PyTorch model, as a function: eager fp32 or bf16 autocast (fused
    AdamW), or bf16 under torch.compile, the optimizer's step compiled too."""
    torch.manual_seed(0)
    model = Gpt().cuda()
    idx = torch.randint(0, V, (B, T), device="cuda")
    tgt = torch.randint(0, V, (B, T), device="cuda")
    return gpu_rounds.torch_training_step(model, mode, 6e-4, idx, tgt)


def torch_peer(mode):
    """One round of a PyTorch contender: the measurement as a dict."""
    return gpu_rounds.torch_measure(torch_step(mode), B * T, WARMUP, STEPS, MIN_SECONDS)


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


def run_size(size, a, peaks, precisions, variants, tokens):
    """One model size's contenders (dtrun's plans and variants, PyTorch's runs) in interleaved
    rounds, then the table per precision."""
    use_size(size)
    params = 12 * L * C * C + V * C + T * C
    flops_per_token = 6 * params + 12 * L * T * C  # PaLM's count: weights and attention
    prefix = "gpt2" if size == "124M" else "gpt2-350m"
    print(f"GPT-2 {size}: {L} layers, {H} heads, width {C}, batch {B} x {T} tokens; {a.rounds} interleaved rounds")
    me = os.path.abspath(__file__)

    def peer(mode):
        argv = [sys.executable, me, "--peer", mode, "--size", size]
        return lambda _round: gpu_rounds.run_process(argv)

    for precision in precisions:
        plan = os.path.join(a.plans, f"{prefix}-{precision}.dtp")
        contenders = [(f"dtrun {precision}", gpu_rounds.dtrun_measure(a.build, plan, tokens, WARMUP, STEPS,
                                                                      tokens_per_sample=T))]
        if precision == "fp8":
            # FP8's measure is dtc's own bf16 step (the same plan but for the linear layers' GEMMs).
            contenders.append(("dtrun bf16", gpu_rounds.dtrun_measure(
                a.build, os.path.join(a.plans, f"{prefix}-bf16.dtp"), tokens, WARMUP, STEPS, tokens_per_sample=T)))
            peers = []
        elif precision == "bf16":
            for name, plan_name, env in variants:
                contenders.append((name, gpu_rounds.dtrun_measure(a.build, os.path.join(a.plans, plan_name), tokens,
                                                                  WARMUP, STEPS, env, tokens_per_sample=T)))
            peers = [("pytorch eager bf16 autocast+SDPA", "bf16"), ("torch.compile bf16", "compile"),
                     ("torch.compile bf16 max-autotune-no-cudagraphs", "compile-max-autotune")]
        else:
            peers = [("pytorch eager fp32", "fp32")]
        shown = ["dtrun bf16"] if precision == "fp8" else []
        peers = [(name, mode) for name, mode in peers if mode in a.peers.split(",")]
        contenders += [(name, peer(mode)) for name, mode in peers]
        results = gpu_rounds.run_rounds(contenders, a.rounds)
        gpu_rounds.print_table(f"GPT-2 {size} {precision}, {B} x {T} tokens a step", results, f"dtrun {precision}",
                               shown + [name for name, _ in peers], flops_per_token,
                               peaks["bf16" if precision == "fp8" else precision])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build")
    parser.add_argument("--plans", help="the folder with gpt2-bf16.dtp, gpt2-fp32.dtp and gpt2-350m-bf16.dtp")
    parser.add_argument("--torch-profile", type=int, default=0, metavar="ROWS",
                        help="only print PyTorch eager bf16's step by CUDA kernel (ROWS rows)")
    parser.add_argument("--sizes", default="124M,350M", help="the model sizes to run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", action="store_true",
                        help="also dtrun's bf16 variants (what each choice buys), in the rounds")
    parser.add_argument("--precisions", default="bf16,fp32", help="bf16, fp32, fp8 (against dtc's bf16 step); 350M runs bf16 and fp8")
    parser.add_argument("--peers", default="bf16,fp32,compile,compile-max-autotune",
                        help="the PyTorch contenders: eager bf16 and fp32, torch.compile's modes")
    parser.add_argument("--peer", choices=("bf16", "fp32", "compile", "compile-max-autotune"))
    parser.add_argument("--size", default="124M", choices=sorted(SIZES))
    a = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # dtrun's fp32 GEMMs are exact fp32
    if a.peer:
        use_size(a.size)
        print(json.dumps(torch_peer(a.peer)))
        return
    if a.torch_profile:
        torch_profile(a.torch_profile)
        return
    if not a.build or not a.plans:
        parser.error("--build and --plans are needed (or --peer for one PyTorch round)")
    peaks = {"fp32": gpu_rounds.gemm_peak("float32"), "bf16": gpu_rounds.gemm_peak("bfloat16")}
    print(f"GPU: {torch.cuda.get_device_name()}; GEMM peak fp32 {peaks['fp32'] / 1e12:.1f} TFLOP/s, "
          f"bf16 {peaks['bf16'] / 1e12:.1f} TFLOP/s (8192^3, measured now); PyTorch {torch.__version__}")
    # Variants of GPT-2 124M's bf16 step, to see what each choice buys on this GPU (shown, not the
    # ratios' reference): attention unfused; dtc's own attention kernels instead of cuDNN's;
    # cuDNN's deterministic backward; no CUDA graphs; no cuBLASLt epilogues.
    variants = (("dtrun bf16, attention unfused", "gpt2-bf16-unfused-attention.dtp", {}),
                ("dtrun bf16, dtc's attention kernels", "gpt2-bf16.dtp", {"DTC_CUDA_ATTENTION": "gemm"}),
                ("dtrun bf16, cuDNN deterministic", "gpt2-bf16.dtp", {"DTC_CUDNN_DETERMINISTIC": "1"}),
                ("dtrun bf16, no CUDA graphs", "gpt2-bf16.dtp", {"DTC_CUDA_GRAPHS": "0"}),
                ("dtrun bf16, no cuBLASLt epilogues", "gpt2-bf16.dtp", {"DTC_CUDA_LT_EPILOGUES": "0"}))
    tokens = os.path.join(a.plans, "gpt2-tokens.bin")
    for size in a.sizes.split(","):
        if size == "124M":
            run_size(size, a, peaks, tuple(a.precisions.split(",")), variants if a.variants else (), tokens)
        else:
            run_size(size, a, peaks, tuple(p for p in a.precisions.split(",") if p in ("bf16", "fp8")) or ("bf16",),
                     (), tokens)


if __name__ == "__main__":
    main()
