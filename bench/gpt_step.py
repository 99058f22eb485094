"""Times one training step of a small GPT (dtc zoo gpt vs the nanoGPT-style PyTorch model of
tests/e2e/test_gpt_parity.py, same sizes, AdamW) on the same token data."""
import argparse
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
import test_gpt_parity as ref  # noqa: E402
from dtc_harness import window_offsets, write_tokens  # noqa: E402

import common  # noqa: E402
from common import (compile_plan, dtrun_run, initial_weights, jax_run, report_peers, rounds_of, tools,  # noqa: E402
                    torch_run)


def main():
    p = argparse.ArgumentParser()
    common.add_gpt_arguments(p)
    p.add_argument("--no-jax", action="store_true", help="leave the JAX peer out")
    p.add_argument("--warmup", type=int, default=common.WARMUP)
    p.add_argument("--steps", type=int, default=common.STEPS)
    p.add_argument("--rounds", type=int, default=common.ROUNDS)
    p.add_argument("--plan", default="", help="also keep the compiled plan here")
    a = p.parse_args()
    common.WARMUP, common.STEPS, common.ROUNDS = a.warmup, a.steps, a.rounds
    torch.set_num_threads(a.threads)
    ref.V, ref.T, ref.L, ref.H, ref.C = a.vocab, a.ctx, a.layers, a.heads, a.embd
    tokens = np.random.default_rng(0).integers(0, a.vocab, 200000).astype(np.int64)
    # dtrun's windows (seed 0), which every side visits.
    offsets = [window_offsets(len(tokens), a.batch, a.ctx, 0, i) for i in range(a.warmup + a.steps)]
    _, dtrun = tools(a.build)
    with tempfile.TemporaryDirectory() as work:
        write_tokens(f"{work}/train.bin", tokens)
        plan = compile_plan(a.build, ["gpt", "--vocab", str(a.vocab), "--ctx", str(a.ctx), "--layers",
                                      str(a.layers), "--heads", str(a.heads), "--embd", str(a.embd)],
                            a.batch, work)
        if a.plan:
            shutil.copyfile(plan, a.plan)
        weights, init = initial_weights(dtrun, plan, work)
        model = ref.Gpt()
        model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in init.items()})
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def torch_step(i):
            idx = torch.from_numpy(np.stack([tokens[o:o + a.ctx] for o in offsets[i]]))
            tgt = torch.from_numpy(np.stack([tokens[o + 1:o + a.ctx + 1] for o in offsets[i]]))
            opt.zero_grad()
            loss = model(idx, tgt)
            loss.backward()
            opt.step()
            return loss.item() if i == 0 else 0.0

        runners = {"dtrun": lambda: dtrun_run(dtrun, plan, f"{work}/train.bin", a.threads, a.batch, work),
                   f"pytorch {torch.__version__}": lambda: torch_run(torch_step)}
        version = []
        if not a.no_jax:
            np.savez(f"{work}/batches.npz", tokens=tokens, offsets=np.array(offsets))
            config = f"{a.layers},{a.heads},{a.embd},{a.ctx},{a.vocab}"

            def jax_peer():
                ms, first, v = jax_run(a.build, a.threads, "gpt", weights, f"{work}/batches.npz", config)
                version.append(v)
                return ms, first
            runners["jax"] = jax_peer
        results = rounds_of(runners)
        if version:
            results[f"jax {version[0]} (XLA)"] = results.pop("jax")
    report_peers(f"GPT L={a.layers} H={a.heads} C={a.embd} T={a.ctx} V={a.vocab}, AdamW, batch {a.batch}, "
                 f"{a.threads} threads, best of {a.rounds} medians of {a.steps} steps", results)
    return results


if __name__ == "__main__":
    main()
