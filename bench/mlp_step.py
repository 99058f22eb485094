"""Times one training step of the zoo MLP (784-256-128-10, AdamW) in dtrun and in PyTorch."""
import argparse
import subprocess
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

from common import ROUNDS, STEPS, best_of, dtrun_ms, report, tools, torch_ms


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8192, 784)).astype(np.float32)
    y = rng.integers(0, 10, 8192).astype(np.int64)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    perm = rng.permutation(len(x))

    def torch_step(i):
        idx = perm[(i * a.batch) % (len(x) - a.batch):][:a.batch]
        opt.zero_grad()
        F.cross_entropy(model(xs[idx]), ys[idx]).backward()
        opt.step()

    dtc, dtrun = tools(a.build)
    with tempfile.TemporaryDirectory() as work:
        np.save(f"{work}/input.npy", x)
        np.save(f"{work}/target.npy", y)
        subprocess.run([dtc, "zoo", "mlp", "-o", f"{work}/mlp.dtm"], check=True)
        subprocess.run([dtc, "compile", f"{work}/mlp.dtm", "-o", f"{work}/mlp.dtp", "--batch", str(a.batch),
                        "--optimizer", "adamw", "--lr", "1e-3"], check=True)
        ours, theirs = best_of(ROUNDS, lambda: dtrun_ms(dtrun, f"{work}/mlp.dtp", work, a.threads, a.batch, work),
                               lambda: torch_ms(torch_step))
    report(f"MLP 784-256-128-10, AdamW, batch {a.batch}, {a.threads} threads, best of {ROUNDS} medians of "
           f"{STEPS} steps", ours, theirs, torch.__version__)


if __name__ == "__main__":
    main()
