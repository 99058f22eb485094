"""Pipeline parallelism (`--mesh pp=N --microbatches M --schedule ...`): each stage's program on
its own MPI process, activations and their gradients sent between stages, must train exactly as
the single-device plan on the whole batch: losses and final weights within 1e-5 (as
test_data_parallel.py). The micro-batches' gradients are summed as gradient accumulation does,
so only the order of floating-point sums differs. GPT-mini's tied embedding lives on stage 0:
the last stage receives it and sends its LM-head gradient back to be summed there.

Also: the 3-D grid dp=2 x tp=2 x pp=2 on 8 ranks, the measured timeline (dtrun --trace) next to
the predicted one, and the activation memory of 1F1B against GPipe (dtc inspect)."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import measured_bubble, run, tool  # noqa: E402
from test_data_parallel import MPIRUN, compare, make_models  # noqa: E402


def pp(stages, micro, schedule, virtual=1):
    flags = ["--mesh", f"pp={stages}", "--microbatches", micro, "--schedule", schedule]
    return flags + (["--virtual-stages", virtual] if virtual > 1 else [])


def inspect(plan):
    return json.loads(run(tool("dtc"), "inspect", plan, "--json").stdout)


def check_memory(work, model):
    """1F1B keeps at most p - s micro-batches' activations on stage s, GPipe all m of them: the
    compiler's count, and the arena the memory planner sized from the scheduled program."""
    arena = {}
    for schedule in ("gpipe", "1f1b"):
        plan = os.path.join(work, f"mem-{schedule}.dtp")
        run(tool("dtc"), "compile", model, "-o", plan, "--batch", 16, *pp(2, 8, schedule))
        info = inspect(plan)
        stages = info["pipeline"]["stages"]
        expected = [8, 8] if schedule == "gpipe" else [2, 1]
        assert [s["in_flight"] for s in stages] == expected, (schedule, stages)
        for s in stages:
            assert s["peak_activation_bytes"] == s["in_flight"] * s["activation_bytes"], s
        arena[schedule] = [s["arena_bytes"] for s in stages]
        print(f"memory {schedule}: per stage in flight {[s['in_flight'] for s in stages]}, "
              f"activations per micro-batch {[s['activation_bytes'] for s in stages]} bytes, "
              f"peak {[s['peak_activation_bytes'] for s in stages]}, arena {arena[schedule]}")
    assert all(a < b for a, b in zip(arena["1f1b"], arena["gpipe"])), arena


def check_trace(work, model, data):
    """Planned and measured timelines: one row per rank, forward/backward/send/recv boxes."""
    plan, planned, measured = (os.path.join(work, n) for n in ("tr.dtp", "planned.json", "measured.json"))
    out = run(tool("dtc"), "compile", model, "-o", plan, "--batch", 8, "--optimizer", "sgd",
              *pp(2, 4, "1f1b"), "--schedule-trace", planned).stdout
    assert "predicted bubble" in out and "(p-1)/(v*m) = 0.250" in out, out
    events = json.load(open(planned))["traceEvents"]
    rows = sorted(e["args"]["name"] for e in events if e["ph"] == "M")
    assert rows == ["rank 0 (pp=0)", "rank 1 (pp=1)"], rows
    kinds = {(e["pid"], e["cat"]) for e in events if e["ph"] == "X"}
    for rank in (0, 1):
        for kind in ("forward", "backward", "send", "recv"):
            assert (rank, kind) in kinds, (rank, kind)
    run(*(MPIRUN + ["2", tool("dtrun"), plan, "--data", data, "--steps", 3, "--threads", 1,
                    "--trace", measured]))
    boxes = [e for e in json.load(open(measured))["traceEvents"] if e["ph"] == "X"]
    for rank in (0, 1):
        names = {e["name"] for e in boxes if e["pid"] == rank}
        assert {"send", "recv"} <= names, names
    print(f"trace: {out.strip()}; measured idle/busy {measured_bubble(measured, 3, 1):.3f}")


def check_zero1_shards(work, model):
    """ZeRO-1 under a pipeline shards each stage's optimizer state over dp: a pp axis splits no
    tensor, so a dp x pp mesh is data-parallel only for the parameters (it had silently kept
    every moment whole)."""
    state = {}
    for zero in (0, 1):
        plan = os.path.join(work, f"zero{zero}-pp.dtp")
        run(tool("dtc"), "compile", model, "-o", plan, "--batch", 8, "--optimizer", "adamw", "--mesh",
            "dp=2,pp=2", "--microbatches", 2, "--zero", zero)
        state[zero] = inspect(plan)["memory"]["optimizer_state_bytes"]
    print(f"dp=2,pp=2 optimizer state per rank: {state[0]} bytes, ZeRO-1 {state[1]}")
    assert state[1] * 1.9 < state[0], state


def check_errors(work, model):
    plan = os.path.join(work, "err.dtp")
    cases = [(pp(2, 3, "1f1b"), "--microbatches 3 does not divide the batch of 8"),
             (pp(9, 2, "1f1b"), "cannot cut the model into 9 pipeline stages"),
             (pp(4, 2, "interleaved", 2), "multiple of the pipeline stages")]
    for flags, message in cases:
        proc = subprocess.run([str(a) for a in [tool("dtc"), "compile", model, "-o", plan, "--batch", 8]
                               + flags], capture_output=True, text=True)
        assert proc.returncode == 2 and message in proc.stderr, (flags, proc.stderr)
    run(tool("dtc"), "compile", model, "-o", plan, "--batch", 8, *pp(2, 2, "1f1b"))
    proc = subprocess.run(MPIRUN + ["3", tool("dtrun"), plan, "--steps", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "partitioned for 2 devices (mesh pp=2)" in proc.stderr, proc.stderr
    print("errors: ok")


def main():
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as work:
        m = make_models(work, rng)
        adamw = ["--optimizer", "adamw", "--lr", 2e-3, "--eps", 1e-4]
        compare("mlp", m["mlp"], work, 32, adamw, m["data"], 6, 3,
                [("pp2-gpipe", pp(2, 4, "gpipe"), 2), ("pp2-1f1b", pp(2, 4, "1f1b"), 2),
                 ("pp2-cut-fc1", pp(2, 2, "1f1b") + ["--stage-cuts", "fc1"], 2)],
                ("--eval", m["data"]))

        # SGD, as the tensor-parallel test: AdamW amplifies the rounding of near-zero bias
        # gradients past 1e-5 whatever the strategy.
        sgd = ["--optimizer", "sgd", "--lr", 0.05, "--momentum", 0.9]
        compare("gpt", m["gpt"], work, 8, sgd, m["tokens"], 6, 5,
                [("pp2-gpipe", pp(2, 4, "gpipe"), 2), ("pp2-1f1b", pp(2, 4, "1f1b"), 2),
                 ("pp2-interleaved", pp(2, 4, "interleaved", 2), 2),
                 ("pp4-gpipe", pp(4, 4, "gpipe"), 4), ("pp4-1f1b", pp(4, 8, "1f1b"), 4),
                 ("pp4-interleaved", pp(4, 4, "interleaved", 2), 4),
                 ("dp2-tp2-pp2", ["--mesh", "dp=2,tp=2,pp=2", "--microbatches", 2], 8),
                 # the tied embedding split by vocabulary over tp, its optimizer state with it
                 ("dp2-tp2-pp2-zero3", ["--mesh", "dp=2,tp=2,pp=2", "--microbatches", 2, "--zero", 3], 8),
                 ("dp2-pp2-zero1", ["--mesh", "dp=2,pp=2", "--microbatches", 2, "--zero", 1], 4),
                 ("dp2-pp2-zero3", ["--mesh", "dp=2,pp=2", "--microbatches", 2, "--zero", 3], 4),
                 ("dp2-pp2-zero3-interleaved", ["--mesh", "dp=2,pp=2", "--microbatches", 4, "--schedule",
                                                "interleaved", "--virtual-stages", 2, "--zero", 3], 4)])
        check_memory(work, m["gpt"])
        check_zero1_shards(work, m["gpt"])
        check_trace(work, m["gpt"], m["tokens"])
        check_errors(work, m["gpt"])
    print("pipeline parallel parity: ok")


if __name__ == "__main__":
    main()
