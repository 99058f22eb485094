"""Times one training step of the zoo MLP (784-256-128-10, AdamW) in dtrun and in PyTorch."""
import argparse
import os
import re
import subprocess
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

WARMUP, STEPS = 20, 200


def dtrun_ms(build, threads, batch, work):
    dtc = os.path.join(build, "tools", "dtc", "dtc")
    dtrun = os.path.join(build, "tools", "dtrun", "dtrun")
    subprocess.run([dtc, "zoo", "mlp", "-o", f"{work}/mlp.dtm"], check=True)
    subprocess.run([dtc, "compile", f"{work}/mlp.dtm", "-o", f"{work}/mlp.dtp", "--batch", str(batch),
                    "--optimizer", "adamw", "--lr", "1e-3"], check=True)
    log = f"{work}/log.jsonl"
    subprocess.run([dtrun, f"{work}/mlp.dtp", "--data", work, "--steps", str(WARMUP + STEPS),
                    "--threads", str(threads), "--log", log], check=True, stdout=subprocess.DEVNULL)
    import json
    rates = [json.loads(l)["samples_per_s"] for l in open(log)][WARMUP:]
    # Median step time from the per-step rates dtrun logs (data gather + step).
    return 1000.0 * batch / float(np.median(rates))


def torch_ms(threads, batch, x, y):
    torch.set_num_threads(threads)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    times = []
    perm = np.random.default_rng(0).permutation(len(x))
    for step in range(WARMUP + STEPS):
        t0 = time.perf_counter()
        idx = perm[(step * batch) % (len(x) - batch):][:batch]
        xb, yb = xs[idx], ys[idx]
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return 1000.0 * float(np.median(times[WARMUP:]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    a = p.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8192, 784)).astype(np.float32)
    y = rng.integers(0, 10, 8192).astype(np.int64)
    with tempfile.TemporaryDirectory() as work:
        np.save(f"{work}/input.npy", x)
        np.save(f"{work}/target.npy", y)
        ours = dtrun_ms(a.build, a.threads, a.batch, work)
    theirs = torch_ms(a.threads, a.batch, x, y)
    print(f"MLP 784-256-128-10, AdamW, batch {a.batch}, {a.threads} threads, median of {STEPS} steps")
    print(f"  dtrun   {ours:8.3f} ms/step")
    print(f"  pytorch {theirs:8.3f} ms/step (torch {torch.__version__})")
    print(f"  ratio   {theirs / ours:8.3f}  (pytorch time / dtrun time; > 1: dtrun faster)")


if __name__ == "__main__":
    main()
