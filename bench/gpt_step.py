"""Times one training step of a small GPT (dtc zoo gpt vs the nanoGPT-style PyTorch model of
tests/e2e/test_gpt_parity.py, same sizes, AdamW) on the same token data."""
import argparse
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
import test_gpt_parity as ref  # noqa: E402
from dtc_harness import window_offsets, write_tokens  # noqa: E402

from common import ROUNDS, STEPS, best_of, compile_plan, dtrun_ms, report, tools, torch_ms  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--ctx", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--embd", type=int, default=128)
    p.add_argument("--vocab", type=int, default=256)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    ref.V, ref.T, ref.L, ref.H, ref.C = a.vocab, a.ctx, a.layers, a.heads, a.embd
    tokens = np.random.default_rng(0).integers(0, a.vocab, 200000).astype(np.int64)
    model = ref.Gpt()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def torch_step(i):
        offsets = window_offsets(len(tokens), a.batch, a.ctx, 0, i)
        idx = torch.from_numpy(np.stack([tokens[o:o + a.ctx] for o in offsets]))
        tgt = torch.from_numpy(np.stack([tokens[o + 1:o + a.ctx + 1] for o in offsets]))
        opt.zero_grad()
        model(idx, tgt).backward()
        opt.step()

    _, dtrun = tools(a.build)
    with tempfile.TemporaryDirectory() as work:
        write_tokens(f"{work}/train.bin", tokens)
        plan = compile_plan(a.build, ["gpt", "--vocab", str(a.vocab), "--ctx", str(a.ctx), "--layers",
                                      str(a.layers), "--heads", str(a.heads), "--embd", str(a.embd)],
                            a.batch, work)
        ours, theirs = best_of(ROUNDS, lambda: dtrun_ms(dtrun, plan, f"{work}/train.bin", a.threads,
                                                        a.batch, work),
                               lambda: torch_ms(torch_step))
    report(f"GPT L={a.layers} H={a.heads} C={a.embd} T={a.ctx} V={a.vocab}, AdamW, batch {a.batch}, "
           f"{a.threads} threads, best of {ROUNDS} medians of {STEPS} steps", ours, theirs, torch.__version__)


if __name__ == "__main__":
    main()
