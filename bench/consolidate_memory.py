"""The memory of consolidating a sharded checkpoint into one model file (dtrun --resume CK --steps 0
--save OUT): a GPT of about 1.2 GB of float32 parameters, its ZeRO-3 checkpoint over dp=4 (with
AdamW's moments, 3.6 GB), turned into model.safetensors on 4 processes. Each rank's peak
resident set must stay within its share of the state plus 256 MiB (rank 0 assembles the file a
block of rows at a time; no rank gathers a whole tensor), and PyTorch must load the file into
the same GPT with load_state_dict(strict=True)."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
from nanogpt_model import GPT, GPTConfig, install_sdpa  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors_np import load  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4"]
LAYERS, EMBD, HEADS, VOCAB, CTX = 24, 1024, 16, 50304, 128
LIMIT = 256 << 20


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--dir", required=True, help="where the checkpoint and the model file go")
    a = p.parse_args()
    dtc, dtrun = (os.path.join(a.build, "tools", t, t) for t in ("dtc", "dtrun"))
    os.makedirs(a.dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        model, plan = os.path.join(work, "gpt.dtm"), os.path.join(work, "gpt.dtp")
        subprocess.run([dtc, "zoo", "gpt", "--vocab", str(VOCAB), "--ctx", str(CTX), "--layers", str(LAYERS),
                        "--heads", str(HEADS), "--embd", str(EMBD), "-o", model], check=True)
        subprocess.run([dtc, "compile", model, "-o", plan, "--batch", "4", "--optimizer", "adamw", "--mesh",
                        "dp=4", "--zero", "3"], check=True, capture_output=True)
        ckpt, out = os.path.join(a.dir, "consolidate-ck"), os.path.join(a.dir, "consolidate-out")
        subprocess.run(["rm", "-rf", ckpt, out], check=True)
        subprocess.run(MPIRUN + [dtrun, plan, "--steps", "0", "--checkpoint", ckpt], check=True,
                       capture_output=True)
        index = json.load(open(os.path.join(ckpt, "step-0", "index.json")))
        state = sum(f["bytes"] for f in index["files"])
        params = sum(int(np.prod(t["shape"])) * 4 for t in index["tensors"].values() if t["role"] == "param")
        # dtrun reports its own peak resident set, and the largest rank's.
        ran = subprocess.run(MPIRUN + [dtrun, plan, "--steps", "0", "--resume", ckpt, "--save", out],
                             check=True, capture_output=True, text=True).stdout
        m = re.search(r"peak resident ([\d.]+) MiB; the largest rank: allocated ([\d.]+) MiB, "
                      r"peak resident ([\d.]+) MiB", ran)
        assert m, ran
        largest_peak = float(m.group(3)) * 2**20
        share = state / 4
        print(f"GPT {LAYERS}x{EMBD}: {params / 1e9:.2f} GB of float32 parameters, ZeRO-3 checkpoint over dp=4 "
              f"{state / 1e9:.2f} GB ({share / 2**20:.0f} MiB a rank)")
        print(f"consolidating on 4 processes: the largest rank's peak resident set {largest_peak / 2**20:.0f} MiB, "
              f"its share of the state plus {(largest_peak - share) / 2**20:.0f} MiB (goal: <= 256 MiB)")
        weights = load(os.path.join(out, "model.safetensors"))
        install_sdpa()
        gpt = GPT(GPTConfig(block_size=CTX, vocab_size=VOCAB, n_layer=LAYERS, n_head=HEADS, n_embd=EMBD,
                            bias=True, dropout=0.0))
        gpt.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
        print(f"model.safetensors ({os.path.getsize(os.path.join(out, 'model.safetensors')) / 1e9:.2f} GB) "
              "loads into nanoGPT's GPT with load_state_dict(strict=True)")
        subprocess.run(["rm", "-rf", ckpt, out], check=True)


if __name__ == "__main__":
    main()
