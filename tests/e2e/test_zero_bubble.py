"""Zero-bubble pipelines (`--schedule zb-h1`, `--schedule zb-v`): each stage's backward split into
the input gradient (B) and the weight gradients (W), the W passes filling the bubble. Must train
what one device trains (GPT and GQA Llama zoo models, 10 steps, within the pipeline bounds of
test_pipeline_parallel.py) on pp=2 and pp=4, under dp=2 x pp=2 with ZeRO-1 and ZeRO-3, tp=2 x pp=2,
recomputation and bf16; and since splitting the backward reorders passes but no sum, each must
give 1F1B's losses bit for bit. A checkpoint written under zb-v resumes under 1F1B and on one
device. The predicted timeline shows F, B and W; bad schedules are refused in one line."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import run, tool, write_tokens  # noqa: E402
from test_checkpoint_resume import reshard, uninterrupted  # noqa: E402
from test_data_parallel import MPIRUN, compare, train  # noqa: E402

STEPS = 10
BF16_LOSS_TOLERANCE = 1e-3  # partitioned bf16 against single-device bf16


def pp(stages, micro, schedule):
    return ["--mesh", f"pp={stages}", "--microbatches", micro, "--schedule", schedule]


def same_as_1f1b(name, model, work, batch, flags, devices, data):
    """Losses and final weights of a zero-bubble run equal 1F1B's exactly."""
    def trained(schedule):
        f = [schedule if a == "zb" else a for a in flags]
        return train(model, work, f"{name}-{schedule}", batch, f, devices, data, STEPS, 3)
    ref_losses, ref_final, _ = trained("1f1b")
    for schedule in ("zb-h1", "zb-v"):
        losses, final, _ = trained(schedule)
        assert losses == ref_losses, f"{name} {schedule}: {losses} vs 1F1B {ref_losses}"
        assert all(np.array_equal(final[k], ref_final[k]) for k in ref_final), f"{name} {schedule}"
    print(f"{name}: zb-h1 and zb-v give 1F1B's {STEPS} losses and weights bit for bit")


def check_trace(work, model):
    """F and W boxes on every rank, B boxes where a chunk sends an input gradient back (the first
    chunk's backward is all W: nothing waits for it); zb-v's device 0 runs the first and the last
    chunk."""
    for schedule, chunks in (("zb-h1", {0: {"c0"}, 1: {"c1"}}), ("zb-v", {0: {"c0", "c3"}, 1: {"c1", "c2"}})):
        plan, trace = os.path.join(work, f"tr-{schedule}.dtp"), os.path.join(work, f"tr-{schedule}.json")
        out = run(tool("dtc"), "compile", model, "-o", plan, "--batch", 8, *pp(2, 4, schedule),
                  "--schedule-trace", trace).stdout
        assert f"pipeline {schedule}" in out and "predicted bubble" in out, out
        boxes = [e for e in json.load(open(trace))["traceEvents"] if e["ph"] == "X"]
        for rank in (0, 1):
            mine = [e for e in boxes if e["pid"] == rank]
            kinds = {e["cat"] for e in mine}
            assert {"forward", "weight-grad"} <= kinds, (schedule, rank, kinds)
            assert ("backward" in kinds) == (rank == 1 or schedule == "zb-v"), (schedule, rank, kinds)
            names = {e["name"] for e in mine if e["cat"] == "weight-grad"}
            assert {n.split()[1] for n in names} == chunks[rank], (schedule, rank, names)
            assert all(n.startswith("W") for n in names), names
        print(f"trace {schedule}: {out.strip()}")


def check_memory(work, model):
    """dtc inspect's per-stage count: ZB-H1 holds at most 1F1B's most micro-batches, each stage
    until its W; the activations W alone reads stay, the rest go at B."""
    held = {}
    for schedule in ("1f1b", "zb-h1", "zb-v"):
        plan = os.path.join(work, f"mem-{schedule}.dtp")
        run(tool("dtc"), "compile", model, "-o", plan, "--batch", 16, *pp(2, 8, schedule))
        stages = json.loads(run(tool("dtc"), "inspect", plan, "--json").stdout)["pipeline"]["stages"]
        held[schedule] = [s["in_flight"] for s in stages]
        print(f"memory {schedule}: in flight {held[schedule]}, peak activations "
              f"{[s['peak_activation_bytes'] for s in stages]}, arena {[s['arena_bytes'] for s in stages]}")
    assert max(held["zb-h1"]) <= max(held["1f1b"]), held
    assert held["zb-h1"] == [2, 2], held  # stage d lags its W by d micro-batches


def check_recompute_once(work, model):
    """Under full recomputation the recomputed forward runs once, before B or in W, whichever reads
    it first: zb-h1's stage programs hold 1F1B's steps, reordered."""
    steps = {}
    for schedule in ("1f1b", "zb-h1"):
        plan = os.path.join(work, f"rc-{schedule}.dtp")
        run(tool("dtc"), "compile", model, "-o", plan, "--batch", 8, *pp(2, 4, schedule), "--recompute", "full")
        functions = json.loads(run(tool("dtc"), "inspect", plan, "--json").stdout)["functions"]
        steps[schedule] = [sorted(s["op"] for s in f["steps"]) for f in functions if f["name"] == "train_step"]
    assert steps["zb-h1"] == steps["1f1b"], "zb-h1's stage programs differ from 1F1B's in their steps"
    print(f"recompute full: {[len(s) for s in steps['zb-h1']]} steps per stage, 1F1B's")


def check_errors(work, model):
    plan = os.path.join(work, "err.dtp")
    cases = [(pp(2, 4, "zb-v") + ["--virtual-stages", 3], "an even number per device; got --virtual-stages 3"),
             (pp(2, 4, "zb-h1") + ["--virtual-stages", 2], "--virtual-stages needs --schedule interleaved or zb-v"),
             (pp(2, 3, "zb-v"), "--microbatches 3 does not divide the batch of 8"),
             (pp(2, 16, "zb-h1"), "--microbatches 16 does not divide the batch of 8"),
             (pp(9, 2, "zb-v"), "cannot cut the model into 18 pipeline stages")]
    for flags, message in cases:
        proc = subprocess.run([str(a) for a in [tool("dtc"), "compile", model, "-o", plan, "--batch", 8] + flags],
                              capture_output=True, text=True)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], (flags, proc.stderr)
    print("errors: ok")


def main():
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as work:
        tokens = os.path.join(work, "train.bin")
        write_tokens(tokens, ((np.arange(4000) * 7 + rng.integers(0, 3, 4000)) % 64).astype(np.int64))
        gpt, llama, gpt2 = (os.path.join(work, n) for n in ("gpt.dtm", "llama.dtm", "gpt2.dtm"))
        # 8 layers: zb-v on pp=4 cuts 8 chunks.
        run(tool("dtc"), "zoo", "gpt", "--vocab", 64, "--ctx", 16, "--layers", 8, "--heads", 4,
            "--embd", 32, "--seed", 11, "-o", gpt)
        run(tool("dtc"), "zoo", "llama", "--vocab", 64, "--ctx", 16, "--layers", 4, "--heads", 4,
            "--kv-heads", 2, "--embd", 32, "--seed", 7, "-o", llama)
        run(tool("dtc"), "zoo", "gpt", "--vocab", 64, "--ctx", 16, "--layers", 2, "--heads", 4,
            "--embd", 32, "--seed", 11, "-o", gpt2)
        sgd = ["--optimizer", "sgd", "--lr", 0.05, "--momentum", 0.9]
        adamw = ["--optimizer", "adamw", "--lr", 2e-3, "--eps", 1e-4]
        compare("gpt", gpt, work, 8, sgd, tokens, STEPS, 5,
                [("pp2-zb-h1", pp(2, 4, "zb-h1"), 2), ("pp2-zb-v", pp(2, 4, "zb-v"), 2),
                 ("pp4-zb-h1", pp(4, 8, "zb-h1"), 4), ("pp4-zb-v", pp(4, 4, "zb-v"), 4),
                 ("dp2-pp2-zero1-zb-h1", ["--mesh", "dp=2,pp=2", "--microbatches", 2, "--zero", 1,
                                         "--schedule", "zb-h1"], 4),
                 ("tp2-pp2-zb-v", ["--mesh", "tp=2,pp=2", "--microbatches", 2, "--schedule", "zb-v"], 4),
                 ("dp2-pp2-zero3-zb-v", ["--mesh", "dp=2,pp=2", "--microbatches", 2, "--zero", 3,
                                        "--schedule", "zb-v"], 4),
                 ("pp2-zb-v-recompute", pp(2, 4, "zb-v") + ["--recompute", "full"], 2)])
        compare("llama", llama, work, 8, adamw, tokens, STEPS, 5,
                [("pp2-zb-h1", pp(2, 4, "zb-h1"), 2), ("pp2-zb-v", pp(2, 2, "zb-v"), 2),
                 ("dp2-pp2-zero1-zb-v", ["--mesh", "dp=2,pp=2", "--microbatches", 2, "--zero", 1,
                                        "--schedule", "zb-v"], 4),
                 ("tp2-pp2-zb-h1", ["--mesh", "tp=2,pp=2", "--microbatches", 2, "--schedule", "zb-h1"], 4),
                 ("pp2-zb-h1-recompute", pp(2, 4, "zb-h1") + ["--recompute", "full"], 2)])
        same_as_1f1b("llama-bf16", llama, work, 8, adamw + ["--precision", "bf16"] + pp(2, 4, "zb"), 2, tokens)
        same_as_1f1b("gpt-dp2-tp2-pp2", gpt, work, 8,
                     sgd + ["--mesh", "dp=2,tp=2,pp=2", "--microbatches", 2, "--schedule", "zb"], 8, tokens)
        bf16 = adamw + ["--precision", "bf16"]
        ref_bf16 = train(llama, work, "llama-bf16-single", 8, bf16, 1, tokens, STEPS, 3)[0]
        zb_bf16 = train(llama, work, "llama-bf16-zb-v", 8, bf16 + pp(2, 4, "zb-v"), 2, tokens, STEPS, 3)[0]
        err = max(abs(a - b) / abs(b) for a, b in zip(zb_bf16, ref_bf16))
        print(f"llama bf16 zb-v: max loss rel err {err:.2e} against one device")
        assert err <= BF16_LOSS_TOLERANCE, (zb_bf16, ref_bf16)
        # A checkpoint of zb-v (two chunks per device) resumes under 1F1B and on one device.
        ref = uninterrupted(work, gpt, tokens, 3, 8, adamw, "zb")
        reshard(work, gpt, tokens, 3, 8, adamw, "zb-v-to-1f1b", pp(2, 4, "zb-v"), pp(2, 4, "1f1b"), ref)
        reshard(work, gpt, tokens, 3, 8, adamw, "zb-v-to-one", pp(2, 4, "zb-v"), [], ref)
        check_trace(work, gpt2)
        check_memory(work, gpt2)
        check_recompute_once(work, gpt2)
        check_errors(work, gpt2)
    print("zero-bubble pipelines: ok")


if __name__ == "__main__":
    main()
