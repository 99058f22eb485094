"""Times one training step of the zoo MLP (784-256-128-10, AdamW) in dtrun, PyTorch and JAX."""
import argparse

import numpy as np
import torch

from common import ROUNDS, STEPS, classifier_bench, report_peers


class Mlp(torch.nn.Module):
    """The zoo MLP under its parameter names (fc0, fc1, fc2)."""

    def __init__(self):
        super().__init__()
        self.fc0, self.fc1, self.fc2 = torch.nn.Linear(784, 256), torch.nn.Linear(256, 128), torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(torch.relu(self.fc0(x)))))


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
    results = classifier_bench(a.build, ["mlp"], a.threads, a.batch, x, y, Mlp(), jax_model="mlp")
    report_peers(f"MLP 784-256-128-10, AdamW, batch {a.batch}, {a.threads} threads, best of {ROUNDS} medians of "
                 f"{STEPS} steps", results)


if __name__ == "__main__":
    main()
