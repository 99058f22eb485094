"""Times one training step of the zoo ConvNet (Conv-BN-ReLU-MaxPool ×2, Linear; AdamW) in dtrun
and in PyTorch, same batch and threads."""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
from test_convnet_parity import ConvNet  # noqa: E402

from common import ROUNDS, STEPS, best_of, dtrun_ms, report, tools, torch_ms  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--batch", type=int, default=100)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    x = rng.random((4096, 784), dtype=np.float32)
    y = rng.integers(0, 10, 4096).astype(np.int64)
    model = ConvNet()
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
        subprocess.run([dtc, "zoo", "convnet", "-o", f"{work}/c.dtm"], check=True)
        subprocess.run([dtc, "compile", f"{work}/c.dtm", "-o", f"{work}/c.dtp", "--batch", str(a.batch),
                        "--optimizer", "adamw", "--lr", "1e-3"], check=True)
        ours, theirs = best_of(ROUNDS, lambda: dtrun_ms(dtrun, f"{work}/c.dtp", work, a.threads, a.batch, work),
                               lambda: torch_ms(torch_step))
    report(f"ConvNet (Fashion-MNIST shape), AdamW, batch {a.batch}, {a.threads} threads, best of {ROUNDS} "
           f"medians of {STEPS} steps", ours, theirs, torch.__version__)


if __name__ == "__main__":
    main()
