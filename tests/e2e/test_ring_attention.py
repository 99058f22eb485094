"""Ring attention (--cp-attention ring): context parallelism whose attention passes blocks of keys
and values around the cp ring instead of gathering them, the partial results merged by their
log-sum-exps and the key and value gradients carried home by the ring. The same GPT with a context
of 512 tokens as test_context_parallel.py must train exactly as the single-device plan: 10 AdamW
steps, losses and final weights within 1e-5 relative, on cp=2, cp=4 and dp=2 x cp=2
load-balanced, cp=2 with contiguous positions, cp=2 x tp=2 with sequence parallelism, a 2-stage
pipeline, ZeRO-3 over dp and full recomputation; in bf16 on cp=2 against the single-device bf16
plan; a Llama (rotary tables, grouped-query attention) on cp=2 and cp=4. The plans hold no
all-gather of keys or values: each rank holds its block and the one on its way."""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import run, tool, write_tokens  # noqa: E402
from test_context_parallel import B, C, H, L, OPTIM, SEED, STEPS, T, V  # noqa: E402
from test_data_parallel import compare, train  # noqa: E402
from test_mixed_precision import LOSS_TOLERANCE  # noqa: E402

RING = ["--cp-attention", "ring"]


def layouts():
    return [("ring-cp2", ["--mesh", "cp=2", *RING], 2),
            ("ring-cp4", ["--mesh", "cp=4", *RING], 4),
            ("ring-dp2-cp2", ["--mesh", "dp=2,cp=2", *RING], 4),
            ("ring-cp2-contiguous", ["--mesh", "cp=2", *RING, "--no-cp-load-balance"], 2),
            ("ring-cp2-tp2-sp", ["--mesh", "cp=2,tp=2", *RING, "--sequence-parallel"], 4),
            ("ring-cp2-pp2", ["--mesh", "cp=2,pp=2", *RING, "--microbatches", 2], 4),
            ("ring-dp2-cp2-zero3", ["--mesh", "dp=2,cp=2", *RING, "--zero", 3], 4),
            ("ring-cp2-recompute", ["--mesh", "cp=2", *RING, "--recompute", "full"], 2)]


def check_plan(model, work):
    """The ring's plan: per layer, cp-1 shifts of k and v forward, as many again backward with the
    two gradient sums beside them, and one more step home for those; no gather of k or v."""
    plan = os.path.join(work, "ring-plan.dtp")
    run(tool("dtc"), "compile", model, "-o", plan, "--batch", B, *OPTIM, "--mesh", "cp=4", *RING)
    text = run(tool("dtc"), "inspect", plan).stdout
    shifts = [line for line in text.splitlines() if "ring_shift over cp" in line and "call(s)" in line]
    assert shifts, text
    calls = int(shifts[0].split("ring_shift over cp: ")[1].split(" call")[0])
    # Per layer: 2·3 forward, 2·3 + 2·3 + 2 backward; the evaluation function is not counted.
    assert calls == L * (6 + 6 + 6 + 2), shifts[0]
    assert "all_gather over cp" not in "\n".join(
        line for line in text.splitlines() if "per training step" in line and "attn" in line), text


def check_bf16(model, work, data):
    losses = {}
    for name, flags, devices in (("single", [], 1), ("ring-cp2", ["--mesh", "cp=2", *RING], 2)):
        losses[name] = train(model, work, f"bf16-{name}", B, OPTIM + ["--precision", "bf16", *flags],
                             devices, data, STEPS, SEED)[0]
    err = max(abs(a - b) / abs(b) for a, b in zip(losses["ring-cp2"], losses["single"]))
    print(f"gpt-ctx512 bf16 ring-cp2: max loss rel err vs single device {err:.2e}")
    assert err <= LOSS_TOLERANCE, (losses["ring-cp2"], losses["single"])


def main():
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt.dtm")
        run(tool("dtc"), "zoo", "gpt", "--vocab", V, "--ctx", T, "--layers", L, "--heads", H,
            "--embd", C, "--seed", 3, "-o", model)
        data = os.path.join(work, "tokens.bin")
        write_tokens(data, np.random.default_rng(0).integers(0, V, 20000).astype(np.int32))
        check_plan(model, work)
        compare("gpt-ctx512", model, work, B, OPTIM, data, STEPS, SEED, layouts())
        check_bf16(model, work, data)
        llama = os.path.join(work, "llama.dtm")
        run(tool("dtc"), "zoo", "llama", "--vocab", V, "--ctx", T, "--layers", L, "--heads", H,
            "--kv-heads", 2, "--embd", C, "--seed", 3, "-o", llama)
        compare("llama-ctx512", llama, work, B, OPTIM, data, STEPS, SEED, layouts()[:2])
    print("ring attention: OK")


if __name__ == "__main__":
    main()
