"""The Llama 3 paper's 405B training layouts beside dtc explore's predictions of them, on h100-80g.

Llama Team, "The Llama 3 Herd of Models" (2024), Table 4: Llama 3 405B (126 layers, width
16384, 128 query and 8 key/value heads, FFN 53248, vocabulary 128,256) trained in bf16 on H100s,
8 a node, with batches of 16M tokens:
  8,192 GPUs, tp=8, pp=16, dp=64, context 8192, 2,048 sequences: 430 teraFLOP/s a GPU, 43% MFU;
  16,384 GPUs, tp=8, pp=16, dp=128, context 8192: 400 teraFLOP/s, 41%;
  16,384 GPUs, tp=8, cp=16, pp=16, dp=8, context 131,072, 128 sequences: 380 teraFLOP/s, 38%.
The paper interleaves the pipeline (its own variant of Megatron's schedule) and shards over dp
as FSDP does; it does not give the chunks a device, the micro-batches or the recomputation.
Each row is priced with `dtc explore --try` as one sequence a micro-batch, interleaved over 8
chunks a device (one layer each), sequence parallelism, ZeRO-1 and full recomputation (the
long-context row with ring attention), and explore's own pick beside it; MFU is explore's (the
model's FLOPs over the step, against the profile's bf16 peak, 989 teraFLOP/s).

Goals: each published layout feasible within 80 GB and predicted within 15% of its published
MFU; explore's pick within 15% of it or faster. Megatron-LM's rows that held before (175B and 1T
of bench/megatron_table.py) are printed after, unless --no-megatron.

Row moe: mixture of experts at DeepSeek-V3's scale (DeepSeek-V3 Technical Report, 2024: 61
layers, width 7168, 256 routed experts top-8 of width 2048, 128 heads, trained over 2,048 H800s
with pp=16 and ep=64 across 8 nodes, 180K GPU-hours per trillion tokens, about 1,543 tokens/s a
GPU), on a stand-in dtc builds: `dtc zoo llama --experts 256 --top-k 8 --router-score sigmoid`
with plain multi-head attention (no multi-head latent attention, shared expert, dense first
layers or multi-token prediction), bf16 (no FP8), capacity-based dispatch (no node-limited
routing), batch 15,360 sequences of 4096, the paper's layout given with --try (pp=16, dp=2, ep=64,
120 micro-batches, ZeRO-1, full recomputation), estimated on h100-80g (not an H800). Its tokens/s
a GPU is printed beside the paper's; no goal is set on it.
Usage: frontier_table.py DTC [ROW ...] [--no-megatron]   (rows: 8k 16k long moe; default all)"""
import json
import os
import subprocess
import sys
import tempfile
import time

from megatron_table import brief

ROWS = [
    # name, GPUs, context, batch (sequences), tp, cp, pp, dp, published MFU
    ("8k", 8192, 8192, 2048, 8, 1, 16, 64, 0.43),
    ("16k", 16384, 8192, 2048, 8, 1, 16, 128, 0.41),
    ("long", 16384, 131072, 128, 8, 16, 16, 8, 0.38),
]


MOE = ("moe", 2048, 4096, 15360, 1543.0,
       "--mesh pp=16,dp=2,ep=64 --microbatches 120 --zero 1 --recompute full")


def moe_row(dtc, work):
    name, gpus, ctx, batch, paper, layout = MOE
    model = os.path.join(work, "deepseek-v3-like.dtm")
    subprocess.run([dtc, "zoo", "llama", "--vocab", "129280", "--ctx", str(ctx), "--layers", "61",
                    "--heads", "128", "--kv-heads", "128", "--embd", "7168", "--ffn", "2048",
                    "--experts", "256", "--top-k", "8", "--router-score", "sigmoid", "--seed", "0",
                    "-o", model], check=True, capture_output=True)
    start = time.time()
    out = subprocess.run([dtc, "explore", model, "--devices", str(gpus), "--batch", str(batch),
                          "--profile", "h100-80g", "--gpus-per-node", "8", "--precision", "bf16",
                          "--optimizer", "adamw", "--estimate", "--json", "--try", layout],
                         capture_output=True, text=True)
    seconds = time.time() - start
    if out.returncode:
        sys.exit(f"{name}: dtc explore failed: {out.stderr.strip()}")
    result = json.loads(out.stdout)
    print("\nDeepSeek-V3-like MoE (stand-in: see the docstring) over 2,048 GPUs, h100-80g; "
          "tokens/s a GPU")
    print(f"{'row':>5s} {'GPUs':>6s} {'paper':>6s} {'dtc':>6s} {'GiB':>6s} {'step s':>7s} "
          f"{'compute':>7s} {'comm':>6s} {'bubble':>6s}  {'pick':>6s} {'GiB':>6s} {'s':>5s}  "
          "pick's layout")
    mine = next(c for c in result["candidates"] if c["given"])
    rate = (mine["tokens_per_s"] or 0) / gpus
    line = (f"{name:>5s} {gpus:6d} {paper:6.0f} {rate:6.0f} "
            f"{(mine['memory_per_rank_bytes'] or 0) / 2**30:6.1f} "
            f"{mine['predicted_step_s'] or 0:7.1f} {mine['compute_s'] or 0:7.1f} "
            f"{mine['exposed_communication_s'] or 0:6.1f} {mine['bubble_s'] or 0:6.1f}")
    if result["best"] is None:
        print(f"{line}  no candidate fits ({seconds:.0f} s)")
    else:
        pick = result["candidates"][result["best"]]
        print(f"{line}  {pick['tokens_per_s'] / gpus:6.0f} "
              f"{pick['memory_per_rank_bytes'] / 2**30:6.1f} {seconds:5.0f}  "
              f"{brief(pick['layout_flags'])}")
    if not mine["feasible"]:
        print(f"{'':>5s}  the published layout: {mine['reason']}")


def given_layout(tp, cp, pp, dp, batch):
    mesh = ",".join(f"{a}={n}" for a, n in (("pp", pp), ("dp", dp), ("cp", cp), ("tp", tp))
                    if n > 1)
    flags = ["--mesh", mesh, "--microbatches", str(batch // dp), "--schedule", "interleaved",
             "--virtual-stages", "8", "--zero", "1", "--sequence-parallel", "--recompute", "full"]
    return flags + (["--cp-attention", "ring"] if cp > 1 else [])


def main():
    args = sys.argv[1:]
    megatron = "--no-megatron" not in args
    args = [a for a in args if a != "--no-megatron"]
    dtc, wanted = args[0], set(args[1:])
    known = {r[0] for r in ROWS} | {MOE[0]}
    if wanted - known:
        sys.exit(f"frontier_table.py: no row {sorted(wanted - known)}")
    print("Llama 3 405B (The Llama 3 Herd of Models, Table 4) on h100-80g; MFU of the bf16 peak")
    print(f"{'row':>5s} {'GPUs':>6s} {'paper':>6s} {'dtc':>6s} {'err':>7s} {'GiB':>6s}  "
          f"{'pick':>6s} {'GiB':>6s} {'s':>5s}  pick's layout")
    errors, slower = [], []
    with tempfile.TemporaryDirectory() as work:
        for name, gpus, ctx, batch, tp, cp, pp, dp, paper in ROWS:
            if wanted and name not in wanted:
                continue
            model = os.path.join(work, f"llama-405b-{ctx}.dtm")
            if not os.path.exists(model):
                subprocess.run([dtc, "zoo", "llama", "--vocab", "128256", "--ctx", str(ctx),
                                "--layers", "126", "--heads", "128", "--kv-heads", "8", "--embd",
                                "16384", "--ffn", "53248", "--seed", "0", "-o", model],
                               check=True, capture_output=True)
            start = time.time()
            out = subprocess.run([dtc, "explore", model, "--devices", str(gpus), "--batch",
                                  str(batch), "--profile", "h100-80g", "--gpus-per-node", "8",
                                  "--precision", "bf16", "--optimizer", "adamw", "--json",
                                  "--try", " ".join(given_layout(tp, cp, pp, dp, batch))],
                                 capture_output=True, text=True)
            seconds = time.time() - start
            if out.returncode:
                sys.exit(f"{name}: dtc explore failed: {out.stderr.strip()}")
            result = json.loads(out.stdout)
            mine = next(c for c in result["candidates"] if c["given"])
            if mine["predicted_step_s"] is None:
                print(f"{name:>5s} {gpus:6d} {100 * paper:5.1f}% {'-':>6s}: {mine['reason']}")
                errors.append(float("inf"))
                continue
            ours = mine["mfu"]
            errors.append(abs(ours / paper - 1) if mine["feasible"] else float("inf"))
            line = (f"{name:>5s} {gpus:6d} {100 * paper:5.1f}% {100 * ours:5.1f}% "
                    f"{100 * (ours / paper - 1):+6.1f}% "
                    f"{mine['memory_per_rank_bytes'] / 2**30:6.1f}")
            if result["best"] is None:
                print(f"{line}  no candidate fits ({seconds:.0f} s)")
                slower.append(name)
            else:
                pick = result["candidates"][result["best"]]
                if pick["mfu"] < paper * 0.85:
                    slower.append(name)
                print(f"{line}  {100 * pick['mfu']:5.1f}% "
                      f"{pick['memory_per_rank_bytes'] / 2**30:6.1f} {seconds:5.0f}  "
                      f"{brief(pick['layout_flags'])}")
            if not mine["feasible"]:
                print(f"{'':>5s}  the published layout: {mine['reason']}")
    within = sum(e <= 0.15 for e in errors)
    if errors:
        print(f"published layouts feasible and predicted within 15%: {within} of {len(errors)}; "
              f"explore's pick more than 15% below the paper: {', '.join(slower) or 'none'}")
    if not wanted or MOE[0] in wanted:
        with tempfile.TemporaryDirectory() as work:
            moe_row(dtc, work)
    if megatron:
        print()
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run([sys.executable, os.path.join(here, "megatron_table.py"), dtc, "175B-sel",
                        "175B-full", "1T"], check=True)


if __name__ == "__main__":
    main()
