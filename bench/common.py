"""Shared pieces of the side-by-side benchmarks: run dtrun, read its per-step rates, time a
PyTorch step loop. Each side runs ROUNDS times, interleaved, and the best median counts, so a
noisy neighbour on a shared machine hurts both sides alike."""
import json
import os
import subprocess
import tempfile
import time

import numpy as np

WARMUP, STEPS, ROUNDS = 10, 60, 3


def tools(build):
    return os.path.join(build, "tools", "dtc", "dtc"), os.path.join(build, "tools", "dtrun", "dtrun")


def dtrun_ms(dtrun, plan, data, threads, batch, work):
    """Median milliseconds per step (data gather + step), from dtrun's JSON log."""
    log = os.path.join(work, "bench.jsonl")
    subprocess.run([dtrun, plan, "--data", data, "--steps", str(WARMUP + STEPS), "--threads", str(threads),
                    "--log", log], check=True, stdout=subprocess.DEVNULL)
    rates = [json.loads(line)["samples_per_s"] for line in open(log)][WARMUP:]
    return 1000.0 * batch / float(np.median(rates))


def torch_ms(step):
    """Median milliseconds of `step()` calls after warm-up."""
    times = []
    for i in range(WARMUP + STEPS):
        t0 = time.perf_counter()
        step(i)
        times.append(time.perf_counter() - t0)
    return 1000.0 * float(np.median(times[WARMUP:]))


def best_of(rounds, ours, theirs):
    a, b = [], []
    for _ in range(rounds):
        a.append(ours())
        b.append(theirs())
    return min(a), min(b)


def report(title, ours, theirs, torch_version):
    print(title)
    print(f"  dtrun   {ours:9.3f} ms/step")
    print(f"  pytorch {theirs:9.3f} ms/step (torch {torch_version})")
    print(f"  ratio   {theirs / ours:9.3f}  (pytorch time / dtrun time; > 1: dtrun faster)")


def compile_plan(build, zoo_args, batch, work):
    """dtc zoo + dtc compile (AdamW, lr 1e-3) into WORK/model.dtp; returns the plan's path."""
    dtc, _ = tools(build)
    subprocess.run([dtc, "zoo", *zoo_args, "-o", f"{work}/model.dtm"], check=True)
    subprocess.run([dtc, "compile", f"{work}/model.dtm", "-o", f"{work}/model.dtp", "--batch", str(batch),
                    "--optimizer", "adamw", "--lr", "1e-3"], check=True)
    return f"{work}/model.dtp"


def classifier_bench(build, zoo_args, threads, batch, x, y, torch_model):
    """Best-of-rounds ms/step of dtrun and of PyTorch on one classifier (input/target .npy)."""
    import torch
    import torch.nn.functional as F
    opt = torch.optim.AdamW(torch_model.parameters(), lr=1e-3)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    perm = np.random.default_rng(0).permutation(len(x))

    def torch_step(i):
        idx = perm[(i * batch) % (len(x) - batch):][:batch]
        opt.zero_grad()
        F.cross_entropy(torch_model(xs[idx]), ys[idx]).backward()
        opt.step()

    _, dtrun = tools(build)
    with tempfile.TemporaryDirectory() as work:
        np.save(f"{work}/input.npy", x)
        np.save(f"{work}/target.npy", y)
        plan = compile_plan(build, zoo_args, batch, work)
        return best_of(ROUNDS, lambda: dtrun_ms(dtrun, plan, work, threads, batch, work),
                       lambda: torch_ms(torch_step))
