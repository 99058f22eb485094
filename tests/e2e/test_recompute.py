"""Activation recomputation: `--recompute full|selective` must train bit-identically to
`--recompute none` on the same mesh (the copies in backward compute the same bits from the same
inputs): every logged loss equal and the saved parameters byte for byte. Partitioned runs (tp=2,
tp=2 with sequence parallelism, whose backward gathers its inputs again, alone and under pp=2,
pp=2 with micro-batches, interleaved pp=2 with layers cut between chunks, dp=2 under ZeRO-3) with
recomputation must equal one device within the
project's bound. And it must pay: each setting's arena (dtc inspect) must shrink against none's."""
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import read_log, run, tool, write_tokens  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]
TOLERANCE = 1e-5
STEPS, SEED, BATCH = 5, 3, 8
# Unfused attention keeps its [T, T] probabilities, which selective recomputation drops.
FLAGS = ["--optimizer", "sgd", "--lr", 0.05, "--momentum", 0.9, "--no-fused-attention"]


def train(work, name, model, tokens, flags, devices):
    plan = os.path.join(work, f"{name}.dtp")
    run(tool("dtc"), "compile", model, "-o", plan, "--batch", BATCH, *FLAGS, *flags)
    log, save = os.path.join(work, f"{name}.jsonl"), os.path.join(work, f"{name}-final")
    cmd = [tool("dtrun"), plan, "--data", tokens, "--steps", STEPS, "--seed", SEED, "--log", log, "--save", save,
           "--threads", 1]
    run(*(MPIRUN + [devices] + cmd if devices > 1 else cmd))
    arena = json.loads(run(tool("dtc"), "inspect", plan, "--json").stdout)["memory"]["arena_bytes"]
    with open(os.path.join(save, "model.safetensors"), "rb") as f:
        weights = f.read()
    return [e["loss"] for e in read_log(log)], weights, arena


def main():
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as work:
        model, tokens = os.path.join(work, "gpt.dtm"), os.path.join(work, "train.bin")
        run(tool("dtc"), "zoo", "gpt", "--vocab", 64, "--ctx", 16, "--layers", 2, "--heads", 4, "--embd", 32,
            "--seed", 11, "-o", model)
        write_tokens(tokens, ((np.arange(3000) * 7 + rng.integers(0, 3, 3000)) % 64).astype(np.int64))
        both = ("full", "selective")
        meshes = [("one", [], 1, both), ("tp2", ["--mesh", "tp=2"], 2, both),
                  # the backward gathers the sequence-sharded projection inputs again
                  ("tp2-sp", ["--mesh", "tp=2", "--sequence-parallel"], 2, both),
                  ("pp2-tp2-sp", ["--mesh", "pp=2,tp=2", "--microbatches", 2, "--sequence-parallel"], 4,
                   ("selective",)),
                  ("pp2", ["--mesh", "pp=2", "--microbatches", 2], 2, both),
                  # layers cut between chunks: each stage recomputes its own part of a layer (the
                  # attention cores sit where they set no peak, so only full recomputation pays)
                  ("pp2-interleaved-split-layers",
                   ["--mesh", "pp=2", "--microbatches", 2, "--schedule", "interleaved", "--virtual-stages", 2,
                    "--stage-cuts", "transformer.h.0.ln_2,transformer.h.1.ln_1,transformer.h.1.ln_2"], 2, ("full",)),
                  ("dp2-zero3", ["--mesh", "dp=2", "--zero", 3], 2, both)]
        single = None
        for mesh, flags, devices, modes in meshes:
            base_losses, base_weights, base_arena = train(work, f"{mesh}-none", model, tokens, flags, devices)
            if single is None:
                single = base_losses
            for mode in modes:
                losses, weights, arena = train(work, f"{mesh}-{mode}", model, tokens,
                                               flags + ["--recompute", mode], devices)
                err = max(abs(a - b) / abs(b) for a, b in zip(losses, single))
                print(f"{mesh} --recompute {mode}: arena {arena} bytes vs {base_arena} ({arena / base_arena:.0%}); "
                      f"losses and weights {'bit-identical' if weights == base_weights else 'DIFFER'} to none; "
                      f"max loss rel err vs one device {err:.2e}")
                assert losses == base_losses, f"{mesh} {mode}: losses {losses} vs {base_losses}"
                assert weights == base_weights, f"{mesh} {mode}: parameters differ from --recompute none"
                assert err <= TOLERANCE, f"{mesh} {mode}: {losses} vs one device {single}"
                assert arena < base_arena, f"{mesh} {mode}: arena {arena} not below {base_arena}"
    print("recompute: ok")


if __name__ == "__main__":
    main()
