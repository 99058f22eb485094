"""FP8 training (--precision fp8) partitioned: every layout trains what one device trains in FP8,
to the bound partitioned bf16 plans are held to (losses within 1e-3 relative over 10 steps,
test_mixed_precision.py's bound: the sums' order differs, and with it the odd rounding, here an
FP8 code's).

The ranks agree on every scale: a tensor split over a mesh axis has its amax reduced by an
all-reduce MAX before any rank quantizes, so each rank's codes are the single device's codes of
its block. A pipeline's micro-batches are quantized each on its own (their own amax, as a single
device accumulating them would), which is the one difference by design.

Models: a zoo Llama with grouped-query attention (4 query heads over 2 key/value heads, SwiGLU),
on dp=2 and ZeRO 1 and 3, the tensor-parallel preset with and without sequence parallelism (the
FP8 codes are what it gathers), dp=2 x tp=2 with ZeRO-1, full recomputation, pp=2, and context
parallelism by all-gather and by ring; and a mixture-of-experts GPT (4 experts, top-2) on ep=2
and dp=2 x ep=2. Each plan must hold FP8 GEMMs, and every layout that splits activations must
reduce their amax. With delayed scaling (amax histories), dp2 x tp2 with sequence parallelism
and pp=2 against one device with delayed scaling.

Checkpoints hold the master weights and optimizer state, as bf16's do, and delayed scaling's
amax histories: an FP8 run's checkpoint on dp=2 resumes on one device in FP8, continuing as the
uninterrupted run (the layouts' bound), and in bf16 (within the two precisions' difference on
one step from the same state, 1e-2, where a restart from the initial weights is 10x further);
a bf16 checkpoint resumes in FP8 on tp=2 and with delayed scaling (its histories started anew)
likewise; a delayed-scaling checkpoint on dp=2 resumes on one device as it ran, and in bf16. The data is real text (the fortunes corpus,
bytes), on which 10 steps move the loss.

dtc-fold-casts' FP8 rewrites are exact: with them (the weights' bf16 copies folded into their
amax and quantization; under ZeRO-3, the weights quantized on their shards and gathered as FP8
codes, the transposed copy made from the gathered codes) the losses and the evaluation equal
those without, bit for bit."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import read_log, run, tool  # noqa: E402
from test_data_parallel import MPIRUN, train  # noqa: E402

V, T, B, STEPS, SEED = 256, 32, 4, 10, 5
LOSS_TOLERANCE = 1e-3  # partitioned bf16 against single-device bf16
PRECISION_TOLERANCE = 1e-2  # an FP8 step against a bf16 one from the same state
OPTIM = ["--optimizer", "adamw", "--lr", 1e-3, "--precision", "fp8"]

LLAMA_LAYOUTS = [
    ("dp2", ["--mesh", "dp=2"], 2),
    ("dp2-zero1", ["--mesh", "dp=2", "--zero", 1], 2),
    ("dp2-zero3", ["--mesh", "dp=2", "--zero", 3], 2),
    ("tp2", ["--mesh", "tp=2"], 2),
    ("tp2-sp", ["--mesh", "tp=2", "--sequence-parallel"], 2),
    ("dp2-tp2-sp-zero1", ["--mesh", "dp=2,tp=2", "--sequence-parallel", "--zero", 1], 4),
    ("tp2-sp-recompute-full", ["--mesh", "tp=2", "--sequence-parallel", "--recompute", "full"], 2),
    ("pp2", ["--mesh", "pp=2", "--microbatches", 2], 2),
    ("cp2", ["--mesh", "cp=2"], 2),
    ("cp2-ring", ["--mesh", "cp=2", "--cp-attention", "ring"], 2),
]
# Delayed scaling: each split tensor's recorded amax is reduced before it enters the history.
DELAYED_LAYOUTS = [
    ("dp2-tp2-sp", ["--mesh", "dp=2,tp=2", "--sequence-parallel"], 4),
    ("pp2", ["--mesh", "pp=2", "--microbatches", 2], 2),
]
MOE_LAYOUTS = [
    ("ep2", ["--mesh", "ep=2"], 2),
    ("dp2-ep2", ["--mesh", "dp=2,ep=2"], 4),
]


def plan_summary(plan):
    """The training step's FP8 GEMMs, its all-reduces of one float (the amaxes: nothing else
    reduces a single float but the loss), and the element types its all-gathers move."""
    functions = json.loads(run(tool("dtc"), "inspect", plan, "--json").stdout)["functions"]
    gemms, amax_reductions, gathered = 0, 0, set()
    for f in functions:
        if not f["name"].startswith("train_step"):
            continue
        for s in f["steps"]:
            gemms += s["op"] == "fp8_gemm"
            amax_reductions += s["op"] == "all_reduce" and s["outputs"][0]["shape"] == [1]
            if s["op"] == "all_gather":
                gathered.add(s["outputs"][0]["dtype"])
    return gemms, amax_reductions, gathered


def check(model, work, data, name, layouts, optim=OPTIM):
    ref = train(model, work, f"{name}-one", B, optim, 1, data, STEPS, SEED)[0]
    assert all(np.isfinite(ref)), ref
    for layout, flags, devices in layouts:
        losses = train(model, work, f"{name}-{layout}", B, optim + flags, devices, data, STEPS, SEED)[0]
        err = max(abs(a - b) / abs(b) for a, b in zip(losses, ref))
        gemms, amaxes, gathered = plan_summary(os.path.join(work, f"{name}-{layout}.dtp"))
        print(f"{name} {layout}: max loss rel err vs one device {err:.2e}; {gemms} FP8 GEMMs, "
              f"{amaxes} amax all-reduces, all-gathers of {sorted(gathered) or 'none'}")
        assert gemms > 0, f"{name} {layout}: no FP8 GEMM in the plan"
        assert err <= LOSS_TOLERANCE, f"{name} {layout}: losses {losses} vs {ref}"
        if "pp" not in layout:
            assert amaxes > 0, f"{name} {layout}: split activations with no amax reduced"
        if "sp" in layout.split("-"):
            assert {"f8e4m3", "f8e5m2"} <= gathered, f"{layout}: FP8 codes not gathered: {gathered}"


def dtrun(plan, devices, *args):
    cmd = [tool("dtrun"), plan, "--threads", 1, *args]
    run(*(MPIRUN + [devices] + cmd if devices > 1 else cmd))


def check_checkpoints(model, work, data):
    plans = {}
    delayed = ["--fp8-scaling", "delayed"]
    for name, precision, flags in (("fp8-dp2", "fp8", ["--mesh", "dp=2"]), ("fp8", "fp8", []),
                                   ("bf16", "bf16", []), ("fp8-tp2", "fp8", ["--mesh", "tp=2"]),
                                   ("fp8-delayed-dp2", "fp8", ["--mesh", "dp=2", *delayed]),
                                   ("fp8-delayed", "fp8", delayed)):
        plans[name] = os.path.join(work, f"ckpt-{name}.dtp")
        optim = [f if f != "fp8" else precision for f in OPTIM]
        run(tool("dtc"), "compile", model, "-o", plans[name], "--batch", B, *optim, *flags)
    half, common = STEPS // 2, ["--data", data, "--seed", SEED]

    def losses(plan, devices, *args):
        log = os.path.join(work, f"ckpt-{len(os.listdir(work))}.jsonl")
        dtrun(plan, devices, *common, "--log", log, *args)
        return [e["loss"] for e in read_log(log)]

    # Delayed scaling's amax histories are checkpointed: a delayed run resumes as it ran; a bf16
    # run resumes without them, and a delayed run from a bf16 checkpoint starts them anew.
    for (writer, wdev), resumed in ((("fp8-dp2", 2), [("fp8", 1), ("bf16", 1)]),
                                    (("bf16", 1), [("bf16", 1), ("fp8-tp2", 2), ("fp8-delayed", 1)]),
                                    (("fp8-delayed-dp2", 2), [("fp8-delayed", 1), ("bf16", 1)])):
        checkpoint = os.path.join(work, f"ckpt-{writer}")
        full = losses(plans[writer], wdev, "--steps", STEPS)
        ref = full[half:]
        # What a resume that lost the state would show: the first half's losses again.
        restart = max(abs(a - b) / abs(b) for a, b in zip(full[:half], ref))
        assert restart >= 10 * PRECISION_TOLERANCE, f"{writer}: 10 steps barely move the loss"
        losses(plans[writer], wdev, "--steps", half, "--checkpoint", checkpoint)
        with open(os.path.join(checkpoint, f"step-{half}", "index.json")) as f:
            histories = [t for t in json.load(f)["tensors"] if t.endswith("_amax_history")]
        assert bool(histories) == ("delayed" in writer), f"{writer}: histories {histories}"
        for name, devices in resumed:
            got = losses(plans[name], devices, "--steps", STEPS, "--resume", checkpoint)
            assert len(got) == STEPS - half, f"{writer} -> {name}: resumed steps {got}"
            err = max(abs(a - b) / abs(b) for a, b in zip(got, ref))
            same = name.split("-")[0] == writer.split("-")[0] and ("delayed" in name) == ("delayed" in writer)
            bound = LOSS_TOLERANCE if same else PRECISION_TOLERANCE
            print(f"checkpoint {writer} -> {name}: max loss rel err vs the uninterrupted "
                  f"{writer} run {err:.2e} (bound {bound:g})")
            assert err <= bound, (writer, name, got, ref)


def check_folds(model, work, data):
    val = os.path.join(work, "val.bin")
    for name, flags, devices in (("one", [], 1), ("dp2-zero3", ["--mesh", "dp=2", "--zero", 3], 2)):
        runs = {}
        for fold in ("folded", "unfolded"):
            extra = [] if fold == "folded" else ["--no-fold-casts"]
            runs[fold] = train(model, work, f"fold-{name}-{fold}", B, OPTIM + flags + extra, devices, data,
                               STEPS, SEED, ("--eval", val, "--eval-batches", 2))
        plan = json.loads(run(tool("dtc"), "inspect", os.path.join(work, f"fold-{name}-folded.dtp"),
                              "--json").stdout)
        casts = {f["name"]: sum(s["op"] == "cast" for s in f["steps"]) for f in plan["functions"]}
        gathered = {s["outputs"][0]["dtype"] for f in plan["functions"]
                    for s in f["steps"] if s["op"] == "all_gather"}
        print(f"fold-casts {name}: losses {'equal' if runs['folded'][0] == runs['unfolded'][0] else 'differ'}, "
              f"{runs['folded'][2]}; casts per function {casts}; gathers {sorted(gathered)}")
        assert runs["folded"][0] == runs["unfolded"][0], (runs["folded"][0], runs["unfolded"][0])
        assert runs["folded"][2] == runs["unfolded"][2], (runs["folded"][2], runs["unfolded"][2])
        if devices > 1:
            assert "f8e4m3" in gathered, gathered


def main():
    with tempfile.TemporaryDirectory() as work:
        # Real text (the fortunes corpus, bytes), on which the steps move the loss.
        subprocess.run(["/usr/bin/python3", os.path.join(os.path.dirname(__file__), "..", "..", "scripts",
                                                         "text_to_tokens.py"), work], check=True,
                       stdout=subprocess.DEVNULL)
        data = os.path.join(work, "train.bin")
        llama = os.path.join(work, "llama.dtm")
        run(tool("dtc"), "zoo", "llama", "--vocab", V, "--ctx", T, "--layers", 2, "--heads", 4,
            "--kv-heads", 2, "--embd", 64, "--seed", 3, "-o", llama)
        check(llama, work, data, "llama", LLAMA_LAYOUTS)
        check(llama, work, data, "llama-delayed", DELAYED_LAYOUTS, OPTIM + ["--fp8-scaling", "delayed"])
        check_checkpoints(llama, work, data)
        check_folds(llama, work, data)
        moe = os.path.join(work, "moe.dtm")
        run(tool("dtc"), "zoo", "gpt", "--vocab", V, "--ctx", T, "--layers", 2, "--heads", 4,
            "--embd", 64, "--experts", 4, "--top-k", 2, "--seed", 3, "-o", moe)
        check(moe, work, data, "moe-gpt", MOE_LAYOUTS)
    print("fp8 layouts: ok")


if __name__ == "__main__":
    main()
