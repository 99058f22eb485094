"""Times one training step of the zoo ConvNet (Conv-BN-ReLU-MaxPool ×2, Linear; AdamW) in dtrun
and in PyTorch, same batch and threads."""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
from test_convnet_parity import ConvNet  # noqa: E402

from common import ROUNDS, STEPS, classifier_bench, report_peers  # noqa: E402


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
    results = classifier_bench(a.build, ["convnet"], a.threads, a.batch, x, y, ConvNet(), jax_model="convnet")
    report_peers(f"ConvNet (Fashion-MNIST shape), AdamW, batch {a.batch}, {a.threads} threads, best of {ROUNDS} "
                 f"medians of {STEPS} steps", results)


if __name__ == "__main__":
    main()
