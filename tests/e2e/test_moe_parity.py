"""Mixture-of-experts parity: `dtc zoo gpt --experts` against a PyTorch GPT with the same routing
(moe_reference.py: top-k, capacity, order of drops, renormalisation, load-balancing and z losses)
holding the same initial weights, 10 AdamW steps on the same token windows: losses within 1e-5
relative, final weights within 1e-4 (max |diff| / max |w| per tensor, eps 1e-4 as
test_gpt_parity.py explains). One case drops tokens (capacity factor 1), one drops none (a
capacity of every token), one renormalises no weights and mixes dense and MoE blocks, one scores
with a sigmoid (DeepSeek-V3's router). Then
layouts train as one device (1e-5), pipelines (1F1B, zero-bubble ZB-V and ZB-H1) as one device
accumulating their micro-batches, and a checkpoint written on ep=2 resumes on ep=4 and on one
device as if never interrupted."""
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import nanogpt_model  # noqa: E402
from dtc_harness import (dtc_train, load_safetensors, read_log, run, tool, weight_error, window_offsets,  # noqa: E402
                         windows, write_tokens)
from moe_reference import MoeGPT  # noqa: E402
from test_data_parallel import TOLERANCE, compare, train  # noqa: E402

V, T, L, H, C = 64, 16, 2, 4, 32
B, STEPS, SEED, DATA_SEED = 4, 10, 7, 5
OPTIM = ["--optimizer", "adamw", "--lr", 3e-3, "--eps", 1e-4, "--weight-decay", 0.1]
AUX, Z = 0.01, 0.001
# Megatron's splits of attention, and of every expert's MLP (column- then row-parallel).
TP_SHARDS = [flag for spec in ("attn.c_attn.weight=tp,-", "attn.c_attn.bias=tp", "attn.c_proj.weight=-,tp",
                               "mlp.experts.c_fc.weight=-,-,tp", "mlp.experts.c_fc.bias=-,tp",
                               "mlp.experts.c_proj.weight=-,tp,-")
             for flag in ("--shard", f"transformer.h.*.{spec}")]


def torch_run(init, tokens, experts, k, factor, normalize, every, score):
    nanogpt_model.install_sdpa()
    config = nanogpt_model.GPTConfig(block_size=T, vocab_size=V, n_layer=L, n_head=H, n_embd=C)
    model = MoeGPT(config, (experts, k, factor, normalize, score), every, AUX, Z)
    model.load_state_dict({n: torch.from_numpy(v.copy()) for n, v in init.items()}, strict=True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, eps=1e-4, weight_decay=0.1)
    losses = []
    for step in range(STEPS):
        idx, tgt = map(torch.from_numpy, windows(tokens, window_offsets(len(tokens), B, T, DATA_SEED, step), T))
        opt.zero_grad()
        _, loss = model(idx, tgt)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    final = {n: v.detach().to(torch.float64).numpy() for n, v in model.state_dict().items()}
    return losses, final, model.dropped()


def check(name, work, data, tokens, experts, k, factor, normalize=True, every=1, score="softmax"):
    model = os.path.join(work, f"{name}.dtm")
    flags = ["--experts", experts, "--top-k", k, "--capacity-factor", factor, "--moe-every", every,
             "--aux-loss-weight", AUX, "--z-loss-weight", Z, "--router-score", score]
    if not normalize:
        flags.append("--no-normalize-top-k")
    run(tool("dtc"), "zoo", "gpt", "--vocab", V, "--ctx", T, "--layers", L, "--heads", H, "--embd", C,
        "--seed", SEED, *flags, "-o", model)
    init, final, losses, _ = dtc_train(model, work, name, B, OPTIM, data, STEPS, DATA_SEED)
    init.pop("lm_head.weight", None)
    init["lm_head.weight"] = init["transformer.wte.weight"]
    ref_losses, ref_final, dropped = torch_run(init, tokens, experts, k, factor, normalize, every, score)
    ref_final.pop("lm_head.weight")
    final.pop("lm_head.weight", None)
    assert sorted(final) == sorted(ref_final), f"names differ: {sorted(set(final) ^ set(ref_final))}"
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
    weight_err = weight_error(final, ref_final)
    print(f"{name}: losses {losses[0]:.6f} -> {losses[-1]:.6f}, {dropped} choices dropped over "
          f"{STEPS} steps; vs PyTorch: max loss rel err {loss_err:.3e}, max weight rel err {weight_err:.3e}")
    assert loss_err <= 1e-5, f"{name}: loss mismatch {losses} vs {ref_losses}"
    assert weight_err <= 1e-4, f"{name}: weight mismatch {weight_err}"
    assert losses[-1] < losses[0], f"{name}: loss did not fall"
    return model, dropped


def check_resharded_resume(model, work, data):
    """A checkpoint written on ep=2 after 5 steps, resumed to step 10 on ep=4 and on one device:
    the losses of steps 6-10 and the final weights equal the uninterrupted one-device run's."""
    ref_losses, ref_final, _ = train(model, work, "moe-whole", 8, OPTIM, 1, data, STEPS, DATA_SEED)
    plans = {}
    for name, mesh in (("one", []), ("ep2", ["--mesh", "ep=2"]), ("ep4", ["--mesh", "ep=4"])):
        plans[name] = os.path.join(work, f"moe-ckpt-{name}.dtp")
        run(tool("dtc"), "compile", model, "-o", plans[name], "--batch", 8, *OPTIM, *mesh)
    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]
    checkpoint = os.path.join(work, "moe-ckpt-ep2")
    common = ["--data", data, "--seed", DATA_SEED, "--threads", 1]
    run(*mpirun, 2, tool("dtrun"), plans["ep2"], *common, "--steps", STEPS // 2, "--checkpoint", checkpoint)
    for name, launch in (("ep4", [*mpirun, 4]), ("one", [])):
        log, save = os.path.join(work, f"moe-resumed-{name}.jsonl"), os.path.join(work, f"moe-resumed-{name}")
        run(*launch, tool("dtrun"), plans[name], *common, "--steps", STEPS, "--resume", checkpoint, "--log", log,
            "--save", save)
        losses = [e["loss"] for e in read_log(log)]
        assert len(losses) == STEPS - STEPS // 2, f"{name}: resumed steps {losses}"
        loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses[STEPS // 2:]))
        weight_err = weight_error(load_safetensors(os.path.join(save, "model.safetensors")), ref_final)
        print(f"moe checkpoint ep2 -> {name}: max loss rel err {loss_err:.2e}, max weight rel err {weight_err:.2e}")
        assert loss_err <= TOLERANCE and weight_err <= TOLERANCE, f"resumed on {name}: {losses}"


def main():
    torch.set_num_threads(2)
    rng = np.random.default_rng(1)
    tokens = ((np.arange(4000) * 7 + rng.integers(0, 3, 4000)) % V).astype(np.int64)
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "train.bin")
        write_tokens(data, tokens)
        dropping, dropped = check("moe-drops", work, data, tokens, experts=4, k=2, factor=1.0)
        assert dropped > 0, "the capacity-factor-1 case dropped no token: it tests nothing"
        _, dropped = check("moe-no-drops", work, data, tokens, experts=4, k=2, factor=2.0)
        assert dropped == 0, f"a capacity of every token dropped {dropped} choices"
        check("moe-top1-every2", work, data, tokens, experts=4, k=1, factor=1.25, normalize=False,
              every=2)
        check("moe-sigmoid", work, data, tokens, experts=4, k=2, factor=1.0, score="sigmoid")
        compare("moe", dropping, work, 8, OPTIM, data, STEPS, DATA_SEED, [
            ("dp2", ["--mesh", "dp=2"], 2),
            ("ep2", ["--mesh", "ep=2"], 2),
            ("ep4", ["--mesh", "ep=4"], 4),
            ("dp2-ep2", ["--mesh", "dp=2,ep=2"], 4),
            ("ep2-tp2", ["--mesh", "ep=2,tp=2", *TP_SHARDS], 4),
            # Megatron's preset finds the same splits by GPT-2's names, experts included.
            ("ep2-tp2-preset", ["--mesh", "ep=2,tp=2"], 4),
            ("dp2-ep2-zero1", ["--mesh", "dp=2,ep=2", "--zero", 1], 4),
            ("dp2-ep2-zero3", ["--mesh", "dp=2,ep=2", "--zero", 3], 4),
            ("ep2-recompute", ["--mesh", "ep=2", "--recompute", "full"], 2),
        ])
        # Micro-batches route alone and their load-balancing losses are their own (f and P are
        # means over the micro-batch, as in Megatron): a pipeline equals one device that
        # accumulates the same micro-batches.
        ref = train(dropping, work, "moe-accumulate2", 4, OPTIM + ["--accumulate", 2], 1, data, STEPS, DATA_SEED)
        for name, flags, devices in [("pp2", ["--mesh", "pp=2"], 2), ("pp2-ep2", ["--mesh", "pp=2,ep=2"], 4),
                                     ("pp2-zb-v", ["--mesh", "pp=2", "--schedule", "zb-v"], 2),
                                     ("pp2-ep2-zb-h1", ["--mesh", "pp=2,ep=2", "--schedule", "zb-h1"], 4)]:
            ours = train(dropping, work, f"moe-{name}", 8, OPTIM + flags + ["--microbatches", 2], devices, data,
                         STEPS, DATA_SEED)
            loss_err = max(abs(a - b) / abs(b) for a, b in zip(ours[0], ref[0]))
            weight_err = weight_error(ours[1], ref[1])
            print(f"moe {name} (2 micro-batches): max loss rel err {loss_err:.2e}, max weight rel err {weight_err:.2e}")
            assert loss_err <= TOLERANCE and weight_err <= TOLERANCE, f"{name}: {ours[0]} vs {ref[0]}"
        check_resharded_resume(dropping, work, data)
    print("moe parity: ok")


if __name__ == "__main__":
    main()
