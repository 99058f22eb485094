"""Context parallelism's other attention methods: `--cp-attention ring` (blocks of keys and values
passed around the cp ring instead of gathered, the partial results merged by their
log-sum-exps, the key and value gradients carried home by the ring) and `--cp-attention ulysses`
(queries, keys and values exchanged by all-to-all from a block of the sequence to a share of the
heads, attention on whole sequences, the results exchanged back). The same GPT with a context of
512 tokens as test_context_parallel.py must train exactly as the single-device plan: 10 AdamW
steps, losses and final weights within 1e-5 relative, on cp=2, cp=4 and dp=2 x cp=2
load-balanced, cp=2 with contiguous positions, cp=2 x tp=2 with sequence parallelism, a 2-stage
pipeline, ZeRO-3 over dp and full recomputation; in bf16 on cp=2 against the single-device bf16
plan; a Llama (rotary tables, grouped-query attention) on cp=2 and cp=4. The plans gather no key
or value: the ring holds its block and the one on its way, Ulysses a share of the heads.

Usage: test_cp_attention.py ring|ulysses"""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import run, tool, write_tokens  # noqa: E402
from test_context_parallel import B, C, H, L, OPTIM, SEED, STEPS, T, V, check_bf16  # noqa: E402
from test_data_parallel import compare  # noqa: E402


def layouts(method):
    m = ["--cp-attention", method]
    return [(f"{method}-cp2", ["--mesh", "cp=2", *m], 2),
            (f"{method}-cp4", ["--mesh", "cp=4", *m], 4),
            (f"{method}-dp2-cp2", ["--mesh", "dp=2,cp=2", *m], 4),
            (f"{method}-cp2-contiguous", ["--mesh", "cp=2", *m, "--no-cp-load-balance"], 2),
            (f"{method}-cp2-tp2-sp", ["--mesh", "cp=2,tp=2", *m, "--sequence-parallel"], 4),
            (f"{method}-cp2-pp2", ["--mesh", "cp=2,pp=2", *m, "--microbatches", 2], 4),
            (f"{method}-dp2-cp2-zero3", ["--mesh", "dp=2,cp=2", *m, "--zero", 3], 4),
            (f"{method}-cp2-recompute", ["--mesh", "cp=2", *m, "--recompute", "full"], 2)]


def per_step(text, collective):
    """Calls of `collective` over cp per training step, as dtc inspect counts them."""
    for line in text.splitlines():
        if line.startswith(f"per rank, per training step: {collective} over cp: "):
            return int(line.split(": ")[2].split(" call")[0])
    return 0


def check_plan(model, work, method):
    """Per layer and step at cp=4: the ring shifts k and v 3 times forward and again backward,
    their gradients' sums 3 times beside them and once more home (20 shifts); Ulysses exchanges
    q, k, v, out and lse forward, the incoming gradient backward and dq, dk, dv back (9
    all-to-alls). Neither gathers a key or a value."""
    plan = os.path.join(work, f"{method}-plan.dtp")
    run(tool("dtc"), "compile", model, "-o", plan, "--batch", B, *OPTIM, "--mesh", "cp=4",
        "--cp-attention", method)
    text = run(tool("dtc"), "inspect", plan).stdout
    if method == "ring":
        assert per_step(text, "ring_shift") == L * (6 + 6 + 6 + 2), text
    else:
        assert per_step(text, "all_to_all") == L * 9, text
    # The one gather left is the position table's gradient (load-balanced: the table is whole).
    assert per_step(text, "all_gather") == 1, text


def main():
    method = sys.argv[1] if len(sys.argv) > 1 else "ring"
    assert method in ("ring", "ulysses"), __doc__
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt.dtm")
        run(tool("dtc"), "zoo", "gpt", "--vocab", V, "--ctx", T, "--layers", L, "--heads", H,
            "--embd", C, "--seed", 3, "-o", model)
        data = os.path.join(work, "tokens.bin")
        write_tokens(data, np.random.default_rng(0).integers(0, V, 20000).astype(np.int32))
        check_plan(model, work, method)
        compare("gpt-ctx512", model, work, B, OPTIM, data, STEPS, SEED, layouts(method))
        check_bf16(model, work, data,
                   [(f"{method}-cp2", ["--mesh", "cp=2", "--cp-attention", method], 2)])
        llama = os.path.join(work, "llama.dtm")
        run(tool("dtc"), "zoo", "llama", "--vocab", V, "--ctx", T, "--layers", L, "--heads", H,
            "--kv-heads", 2, "--embd", C, "--seed", 3, "-o", llama)
        compare("llama-ctx512", llama, work, B, OPTIM, data, STEPS, SEED, layouts(method)[:2])
    print(f"{method} attention: OK")


if __name__ == "__main__":
    main()
