"""Checkpoints and PyTorch: a checkpoint written by a dp=2 x tp=2 x pp=2 GPT run becomes one
consolidated model.safetensors (dtrun --resume CK --steps 0 --save OUT, on one device or on the
grid itself, also in shards and their index) that nanoGPT's GPT module loads with strict=True and evaluates to dtrun's own
validation loss; and dtrun --init starts from files PyTorch users have: a state_dict saved the
way safetensors.torch.save_model saves a tied model (one name of the tied pair, here in
float16), on one device and under tensor parallelism. Missing, unexpected, mis-shaped and
conflicting names are one error that lists them."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import safetensors_np  # noqa: E402
from checkpoint_harness import compile_plan, dtrun, same_weights, weights  # noqa: E402
from dtc_harness import read_tokens, run, tool, windows, write_tokens  # noqa: E402
from nanogpt_model import GPT, GPTConfig, install_sdpa  # noqa: E402

V, T, L, H, C = 64, 16, 2, 4, 32
ADAMW = ["--optimizer", "adamw", "--lr", 3e-3, "--eps", 1e-4]
GRID = ["--mesh", "dp=2,tp=2,pp=2", "--microbatches", 2, "--zero", 1]


def eval_loss(stdout):
    line = next(line for line in stdout.splitlines() if line.startswith("eval:"))
    return float(line.split("loss ")[1].split()[0])


def nanogpt_eval(state, tokens, batch):
    """nanoGPT's loss over dtrun's evaluation windows (consecutive, non-overlapping, full batches)."""
    install_sdpa()
    model = GPT(GPTConfig(block_size=T, vocab_size=V, n_layer=L, n_head=H, n_embd=C))
    result = model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()}, strict=True)
    assert not result.missing_keys and not result.unexpected_keys, result
    count = (len(tokens) - 1) // T
    losses = []
    with torch.no_grad():
        for k in range(count // batch):
            offsets = [(k * batch + b) * T for b in range(batch)]
            x, y = map(torch.from_numpy, windows(tokens, offsets, T))
            losses.append(model(x, y)[1].item())
    return float(np.mean(losses))


def check_consolidated(work, model, tokens_path, val_path):
    grid = compile_plan(model, work, "grid", 8, ADAMW + GRID)
    single = compile_plan(model, work, "single", 8, ADAMW)
    ckpt = os.path.join(work, "grid-ckpt")
    dtrun(grid, 8, ["--data", tokens_path, "--steps", 4, "--seed", 5, "--checkpoint", ckpt])
    one, many = os.path.join(work, "consolidated-1"), os.path.join(work, "consolidated-8")
    out = dtrun(single, 1, ["--resume", ckpt, "--steps", 0, "--save", one, "--eval", val_path]).stdout
    dtrun(grid, 8, ["--resume", ckpt, "--steps", 0, "--save", many])
    # The grid again, in shards of at most 30 KB as save_pretrained writes them.
    sharded = os.path.join(work, "consolidated-8-sharded")
    dtrun(grid, 8, ["--resume", ckpt, "--steps", 0, "--save", sharded, "--max-shard-size", "30KB"])
    state = weights(one)
    assert same_weights(state, weights(many)), "consolidating on one device and on the grid differ"
    shards = [f for f in os.listdir(sharded) if f.endswith(".safetensors")]
    assert len(shards) > 2 and same_weights(state, weights(sharded)), shards
    print(f"consolidated on the grid in {len(shards)} shards of at most 30 KB: the same tensors")
    assert np.array_equal(state["lm_head.weight"], state["transformer.wte.weight"]), "tied names differ"
    theirs = nanogpt_eval(state, read_tokens(val_path), 8)
    ours = eval_loss(out)
    print(f"consolidated dp2 x tp2 x pp2 checkpoint: nanoGPT loads it with strict=True ({len(state)} tensors); "
          f"validation loss nanoGPT {theirs:.6f}, dtrun {ours:.6f}")
    assert abs(theirs - ours) <= 1e-5 * abs(ours), (theirs, ours)
    return state


def check_init(work, model, state, val_path):
    """A tied model saved by safetensors.torch.save_model keeps one name of the pair (the first
    in sorted order: lm_head.weight); here in float16."""
    pytorch = {k: v.astype(np.float16) for k, v in state.items() if k != "transformer.wte.weight"}
    path = os.path.join(work, "pytorch-f16.safetensors")
    safetensors_np.save(path, pytorch, {"format": "pt"})
    expected = {k: v.astype(np.float16).astype(np.float32) for k, v in state.items()}
    single = os.path.join(work, "single.dtp")
    tp2 = compile_plan(model, work, "tp2", 8, ADAMW + ["--mesh", "tp=2"])
    for plan, devices in ((single, 1), (tp2, 2)):
        out = os.path.join(work, f"init-{devices}")
        dtrun(plan, devices, ["--init", path, "--steps", 0, "--save", out])
        assert same_weights(weights(out), expected), f"--init on {devices} device(s) changed values"
    evaluated = dtrun(single, 1, ["--init", path, "--steps", 0, "--eval", val_path]).stdout
    print(f"--init from a PyTorch float16 file with lm_head.weight only: loaded exactly on 1 device and "
          f"tp=2; {evaluated.strip().splitlines()[-1]}")

    bad = dict(pytorch)
    del bad["transformer.ln_f.bias"]
    bad["transformer.h.9.attn.c_attn.weight"] = bad["transformer.h.0.attn.c_attn.weight"]
    bad["transformer.wpe.weight"] = np.zeros((T + 1, C), np.float32)
    bad_path = os.path.join(work, "bad.safetensors")
    safetensors_np.save(bad_path, bad)
    proc = dtrun(single, 1, ["--init", bad_path, "--steps", 0], expect_ok=False)
    for fragment in ("missing transformer.ln_f.bias", "unexpected transformer.h.9.attn.c_attn.weight",
                     "mis-shaped transformer.wpe.weight float32[17,32] (plan: float32[16,32])"):
        assert proc.returncode == 2 and fragment in proc.stderr, (fragment, proc.stderr)
    print(f"--init with bad names: {proc.stderr.strip()}")

    conflict = dict(state)
    conflict["lm_head.weight"] = conflict["lm_head.weight"] + 1
    conflict_path = os.path.join(work, "conflict.safetensors")
    safetensors_np.save(conflict_path, conflict)
    proc = dtrun(single, 1, ["--init", conflict_path, "--steps", 0], expect_ok=False)
    assert proc.returncode == 2 and "hold different values" in proc.stderr, proc.stderr


def check_batch_norm_counter(work):
    """PyTorch's BatchNorm keeps num_batches_tracked, which dtc does not: --init ignores it."""
    model = os.path.join(work, "convnet.dtm")
    run(tool("dtc"), "zoo", "convnet", "--seed", 2, "-o", model)
    plan = compile_plan(model, work, "convnet", 16, ["--optimizer", "sgd"])
    saved = os.path.join(work, "convnet-init")
    dtrun(plan, 1, ["--steps", 0, "--save", saved])
    state = weights(saved)
    state["layer1.1.num_batches_tracked"] = np.array(12, dtype=np.int64)
    state["layer2.1.num_batches_tracked"] = np.array(12, dtype=np.int64)
    path = os.path.join(work, "convnet-pt.safetensors")
    safetensors_np.save(path, state)
    out = os.path.join(work, "convnet-back")
    dtrun(plan, 1, ["--init", path, "--steps", 0, "--save", out])
    assert same_weights(weights(out), weights(saved))
    print("--init: BatchNorm's num_batches_tracked from PyTorch ignored, running statistics loaded")


def main():
    torch.set_num_threads(2)
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt.dtm")
        run(tool("dtc"), "zoo", "gpt", "--vocab", V, "--ctx", T, "--layers", L, "--heads", H, "--embd", C,
            "--seed", 11, "-o", model)
        train, val = os.path.join(work, "train.bin"), os.path.join(work, "val.bin")
        write_tokens(train, ((np.arange(3000) * 7 + rng.integers(0, 3, 3000)) % V).astype(np.int64))
        write_tokens(val, ((np.arange(600) * 7 + rng.integers(0, 3, 600)) % V).astype(np.int64))
        state = check_consolidated(work, model, train, val)
        check_init(work, model, state, val)
        check_batch_norm_counter(work)
    print("checkpoint and PyTorch: ok")


if __name__ == "__main__":
    main()
