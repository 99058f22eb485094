"""Memory for big models, in one run: a GPT (8 layers, width 512 by default) whose parameters and
AdamW state dominate the process, trained a few steps

- on DP ranks under ZeRO 0, 1, 2 and 3 (with 2 accumulated micro-batches, so that ZeRO-2's
  per-micro-batch reduce-scatter is in play), and
- on one device with --recompute none, full and selective (attention unfused, so that selective
  has its [T, T] probabilities to drop),

each reported with dtc inspect's per-rank plan (parameters, gradients as the optimizer reads
them, optimizer state, largest all-gather, arena peak), dtrun's own end-of-run report (bytes
allocated, peak resident set of the largest rank), /usr/bin/time's maximum resident set, and the
median step time, all as ratios to the plain run. The same model in PyTorch (nanoGPT's module)
runs the recompute settings' peer, torch.utils.checkpoint around each block; PyTorch's FSDP is
tried and reported as it fares."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
from dtc_harness import write_tokens  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]
STEPS = 4  # the first is warm-up


def measure(cmd):
    """Runs `cmd` under /usr/bin/time -v: (stdout, max RSS in MiB)."""
    proc = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1)) / 1024
    return proc.stdout, rss


def dtc_config(a, work, name, flags, procs, batch):
    dtc, dtrun = (os.path.join(a.build, "tools", t, t) for t in ("dtc", "dtrun"))
    plan = os.path.join(work, f"{name}.dtp")
    subprocess.run([dtc, "compile", os.path.join(work, "gpt.dtm"), "-o", plan, "--batch", str(batch),
                    "--optimizer", "adamw", "--lr", "1e-4", *flags], check=True, stdout=subprocess.DEVNULL)
    inspect = json.loads(subprocess.run([dtc, "inspect", plan, "--json"], check=True, capture_output=True,
                                        text=True).stdout)["memory"]
    log = os.path.join(work, f"{name}.jsonl")
    cmd = [dtrun, plan, "--data", os.path.join(work, "train.bin"), "--steps", str(STEPS), "--threads", "1",
           "--log", log]
    out, time_rss = measure(MPIRUN + [str(procs)] + cmd if procs > 1 else cmd)
    report = re.search(r"memory: (\d+) bytes allocated .*peak resident ([\d.]+) MiB; the largest rank: "
                       r"allocated ([\d.]+) MiB, peak resident ([\d.]+) MiB", out)
    rates = [json.loads(line)["samples_per_s"] for line in open(log)][1:]
    return {"name": name, "step_s": batch / float(np.median(rates)), "inspect": inspect,
            "allocated_mib": float(report.group(3)), "rss_mib": float(report.group(4)), "time_rss_mib": time_rss}


def print_table(title, rows):
    base = rows[0]
    mib = 1024 * 1024
    print(title)
    print(f"  {'':<20}{'step s':>8}{'x':>6} | per rank, MiB: {'params':>7}{'grads':>7}{'optim':>7}{'p+g+o':>7}"
          f"{'x':>6}{'gather':>7}{'arena':>8}{'x':>6} | {'alloc':>7}{'rss':>7}{'x':>6}{'time rss':>9}")
    for r in rows:
        m, b = r["inspect"], base["inspect"]
        state = m["param_bytes"] + m["grad_bytes"] + m["optimizer_state_bytes"]
        base_state = b["param_bytes"] + b["grad_bytes"] + b["optimizer_state_bytes"]
        print(f"  {r['name']:<20}{r['step_s']:8.2f}{r['step_s'] / base['step_s']:6.2f} | {'':15}"
              f"{m['param_bytes'] / mib:7.1f}{m['grad_bytes'] / mib:7.1f}{m['optimizer_state_bytes'] / mib:7.1f}"
              f"{state / mib:7.1f}{state / base_state:6.2f}{m['largest_gather_bytes'] / mib:7.1f}"
              f"{m['arena_bytes'] / mib:8.1f}{m['arena_bytes'] / b['arena_bytes']:6.2f} | "
              f"{r['allocated_mib']:7.1f}{r['rss_mib']:7.1f}{r['rss_mib'] / base['rss_mib']:6.2f}"
              f"{r['time_rss_mib']:9.1f}")


def torch_worker(a, mode):
    """One PyTorch run (a process of its own, for its peak RSS): prints step seconds and RSS."""
    import resource
    import time

    import torch
    import torch.utils.checkpoint as ckpt
    import nanogpt_model as ng
    ng.install_sdpa()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = ng.GPT(ng.GPTConfig(block_size=a.ctx, vocab_size=a.vocab, n_layer=a.layers, n_head=a.heads,
                                n_embd=a.embd, dropout=0.0, bias=True))
    if mode == "checkpoint":
        for block in model.transformer.h:
            forward = block.forward
            block.forward = lambda x, f=forward: ckpt.checkpoint(f, x, use_reentrant=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rng = np.random.default_rng(0)
    times = []
    for _ in range(STEPS):
        idx = torch.from_numpy(rng.integers(0, a.vocab, (a.batch, a.ctx + 1)))
        t0 = time.perf_counter()
        opt.zero_grad()
        model(idx[:, :-1].contiguous(), idx[:, 1:].contiguous())[1].backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"step_s": float(np.median(times[1:])), "rss_mib": rss}))


def fsdp_available():
    probe = subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed.fsdp"], capture_output=True,
                           text=True)
    return probe.returncode == 0, (probe.stderr.strip().splitlines() or [""])[-1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--procs", type=int, default=4)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--recompute-batch", type=int, default=32,
                   help="the one-device runs' batch: activations, not gradients, dominate the arena")
    p.add_argument("--ctx", type=int, default=128)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--embd", type=int, default=512)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--torch-worker", choices=["plain", "checkpoint"])
    a = p.parse_args()
    if a.torch_worker:
        return torch_worker(a, a.torch_worker)
    dtc = os.path.join(a.build, "tools", "dtc", "dtc")
    with tempfile.TemporaryDirectory() as work:
        subprocess.run([dtc, "zoo", "gpt", "--vocab", str(a.vocab), "--ctx", str(a.ctx), "--layers", str(a.layers),
                        "--heads", str(a.heads), "--embd", str(a.embd), "-o", os.path.join(work, "gpt.dtm")],
                       check=True)
        write_tokens(os.path.join(work, "train.bin"),
                     np.random.default_rng(0).integers(0, a.vocab, 200000).astype(np.int64))
        print(f"GPT {a.layers} layers, width {a.embd}, {a.heads} heads, vocabulary {a.vocab}, context {a.ctx}; "
              f"AdamW; batch {a.batch}; {STEPS} steps (the first not timed); one thread per process")
        zero = [dtc_config(a, work, f"zero{z}", ["--mesh", f"dp={a.procs}", "--zero", str(z), "--accumulate", "2"],
                           a.procs, a.batch // 2) for z in range(4)]
        print_table(f"dp={a.procs}, 2 accumulated micro-batches of {a.batch // 2}, ratios (x) to ZeRO-0:", zero)
        recompute = [dtc_config(a, work, f"recompute-{r}", ["--recompute", r, "--no-fused-attention"], 1,
                                a.recompute_batch) for r in ("none", "full", "selective")]
        print_table(f"one device, batch {a.recompute_batch}, attention unfused, ratios (x) to --recompute none "
                    "(the arena holds the gradients too):", recompute)

        runs = {}
        for mode in ("plain", "checkpoint"):
            out = subprocess.run(["/usr/bin/python3", __file__, "--build", a.build, "--torch-worker", mode,
                                  "--batch", str(a.recompute_batch), "--ctx", str(a.ctx), "--layers", str(a.layers),
                                  "--heads", str(a.heads), "--embd", str(a.embd), "--vocab", str(a.vocab)],
                                 check=True, capture_output=True, text=True).stdout
            runs[mode] = json.loads(out.strip().splitlines()[-1])
        plain, ck = runs["plain"], runs["checkpoint"]
        print(f"PyTorch (nanoGPT's module, one process, one thread, batch {a.recompute_batch}):")
        print(f"  plain               {plain['step_s']:8.2f} s/step, peak RSS {plain['rss_mib']:8.1f} MiB")
        print(f"  checkpoint(block)   {ck['step_s']:8.2f} s/step ({ck['step_s'] / plain['step_s']:.2f}x), "
              f"peak RSS {ck['rss_mib']:8.1f} MiB ({ck['rss_mib'] / plain['rss_mib']:.2f}x)")
        full, none = recompute[1], recompute[0]
        print(f"  dtrun --recompute full vs none: {full['step_s'] / none['step_s']:.2f}x time, "
              f"{full['rss_mib'] / none['rss_mib']:.2f}x peak RSS")
        ok, why = fsdp_available()
        if ok:
            print("PyTorch FSDP: importable here, but not run by this bench")
        else:
            print(f"PyTorch FSDP: cannot run here (importing torch.distributed.fsdp fails: {why})")


if __name__ == "__main__":
    main()
