"""Times one training step of the zoo MLP (784-256-128-10, AdamW) in dtrun and in PyTorch."""
import argparse

import numpy as np
import torch

from common import ROUNDS, STEPS, classifier_bench, report


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
    ours, theirs = classifier_bench(a.build, ["mlp"], a.threads, a.batch, x, y, model)
    report(f"MLP 784-256-128-10, AdamW, batch {a.batch}, {a.threads} threads, best of {ROUNDS} medians of "
           f"{STEPS} steps", ours, theirs, torch.__version__)


if __name__ == "__main__":
    main()
