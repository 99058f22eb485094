"""Context parallelism: a GPT with a context of 512 tokens, its sequences split over a `cp` mesh
axis, must train exactly as the single-device plan: 10 AdamW steps, losses and final weights
within 1e-5 relative (test_data_parallel.py's check), on every layout: cp=2, cp=4 and dp=2 x cp=2
load-balanced (2·cp chunks, rank i holding i and 2·cp−1−i), cp=2 with contiguous positions; a
Llama (rotary tables, grouped-query attention) on cp=2 and cp=4; and the same GPT reading .npy
arrays instead of a token file. Each rank reads only its positions of every window (the data
loader), holds T/cp of every activation, and reaches the other ranks' keys as the layout's
attention method says."""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import read_tokens, run, tool, write_tokens  # noqa: E402
from test_data_parallel import compare  # noqa: E402

V, T, L, H, C = 64, 512, 2, 4, 32
B, STEPS, SEED = 4, 10, 1
OPTIM = ["--optimizer", "adamw", "--lr", 3e-3, "--eps", 1e-4, "--weight-decay", 0.1,
         "--fused-attention"]


def layouts():
    gather = ["--cp-attention", "all-gather"]
    return [("cp2", ["--mesh", "cp=2", *gather], 2),
            ("cp4", ["--mesh", "cp=4", *gather], 4),
            ("dp2-cp2", ["--mesh", "dp=2,cp=2", *gather], 4),
            ("cp2-contiguous", ["--mesh", "cp=2", *gather, "--no-cp-load-balance"], 2)]


def main():
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt.dtm")
        run(tool("dtc"), "zoo", "gpt", "--vocab", V, "--ctx", T, "--layers", L, "--heads", H,
            "--embd", C, "--seed", 3, "-o", model)
        data = os.path.join(work, "tokens.bin")
        write_tokens(data, np.random.default_rng(0).integers(0, V, 20000).astype(np.int32))
        compare("gpt-ctx512", model, work, B, OPTIM, data, STEPS, SEED, layouts())
        llama = os.path.join(work, "llama.dtm")
        run(tool("dtc"), "zoo", "llama", "--vocab", V, "--ctx", T, "--layers", L, "--heads", H,
            "--kv-heads", 2, "--embd", C, "--seed", 3, "-o", llama)
        compare("llama-ctx512", llama, work, B, OPTIM, data, STEPS, SEED, layouts()[:2])
        # The loader's other source: whole windows as .npy rows, each rank reading its positions.
        arrays = os.path.join(work, "arrays")
        os.makedirs(arrays)
        tokens = read_tokens(data)
        starts = np.arange(0, 32 * T, T)
        np.save(os.path.join(arrays, "idx.npy"), np.stack([tokens[s:s + T] for s in starts]).astype(np.int64))
        np.save(os.path.join(arrays, "targets.npy"),
                np.stack([tokens[s + 1:s + T + 1] for s in starts]).astype(np.int64))
        compare("gpt-npy", model, work, B, OPTIM, arrays, STEPS, SEED, layouts()[:1])
    print("context parallel: OK")


if __name__ == "__main__":
    main()
