"""dtrun --tensorboard DIR: a GPT trained with periodic evaluation writes TensorBoard scalars —
train/loss, train/lr, train/grad_norm, train/tokens_per_s, train/mfu and eval/loss — read back
here with the tensorboard package's event reader (the same values as the JSON-lines log, one per
step; evaluations every 2 steps and at the end of each run); a resumed run adds its own event
file, and the two together cover every step once."""
import glob
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", ".deps", "python"))  # scripts/setup.sh
from dtc_harness import read_log, run, tool, write_tokens  # noqa: E402

from tensorboard.backend.event_processing import event_accumulator  # noqa: E402

STEPS, T = 6, 16


def scalars(directory):
    """{tag: {step: value}} over every event file in `directory`."""
    out = {}
    for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
        acc = event_accumulator.EventAccumulator(path, size_guidance={event_accumulator.SCALARS: 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            for e in acc.Scalars(tag):
                assert e.step not in out.setdefault(tag, {}), f"{tag} step {e.step} written twice"
                out[tag][e.step] = e.value
    return out


def main():
    with tempfile.TemporaryDirectory() as work:
        rng = np.random.default_rng(0)
        data, val = os.path.join(work, "train.bin"), os.path.join(work, "val.bin")
        write_tokens(data, rng.integers(0, 64, 4000))
        write_tokens(val, rng.integers(0, 64, 1000))
        model, plan = os.path.join(work, "gpt.dtm"), os.path.join(work, "gpt.dtp")
        run(tool("dtc"), "zoo", "gpt", "--vocab", 64, "--ctx", T, "--layers", 1, "--heads", 2, "--embd", 32,
            "-o", model)
        run(tool("dtc"), "compile", model, "-o", plan, "--batch", 4, "--optimizer", "adamw",
            "--lr-schedule", "cosine", "--warmup-steps", 2, "--decay-steps", STEPS, "--clip-grad-norm", 1.0)
        board, log, ckpt = (os.path.join(work, n) for n in ("board", "log.jsonl", "ckpt"))
        common = ["--data", data, "--eval", val, "--eval-every", 2, "--eval-batches", 2, "--log", log,
                  "--tensorboard", board, "--checkpoint", ckpt, "--checkpoint-every", 3, "--threads", 1]
        run(tool("dtrun"), plan, "--steps", 3, *common)
        assert len(glob.glob(os.path.join(board, "events.out.tfevents.*"))) == 1
        run(tool("dtrun"), plan, "--steps", STEPS, "--resume", ckpt, *common)
        files = glob.glob(os.path.join(board, "events.out.tfevents.*"))
        assert len(files) == 2, f"a resumed run adds an event file: {files}"

        got = scalars(board)
        steps = [e for e in read_log(log) if "loss" in e]
        evals = [e for e in read_log(log, evaluations=True) if "val_loss" in e]
        assert [e["step"] for e in steps] == list(range(1, STEPS + 1)), steps
        for tag in ("train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s", "train/mfu"):
            assert sorted(got.get(tag, {})) == list(range(1, STEPS + 1)), f"{tag}: {got.get(tag)}"
        for e in steps:
            s = e["step"]
            for tag, key in (("train/loss", "loss"), ("train/lr", "lr"), ("train/grad_norm", "grad_norm")):
                assert np.isclose(got[tag][s], e[key], rtol=1e-6, atol=1e-12), (tag, s, got[tag][s], e[key])
            assert np.isclose(got["train/tokens_per_s"][s], e["samples_per_s"] * T, rtol=1e-5), s
            assert 0 < got["train/mfu"][s] < 1, got["train/mfu"][s]
        assert sorted(got["eval/loss"]) == [e["step"] for e in evals] == [2, 3, 4, 6], (got["eval/loss"], evals)
        for e in evals:
            assert np.isclose(got["eval/loss"][e["step"]], e["val_loss"], rtol=1e-6)
        print(f"tensorboard: {len(files)} event files, {sum(len(v) for v in got.values())} scalars over "
              f"{len(got)} tags, equal to the log: loss {steps[0]['loss']:.4f} -> {steps[-1]['loss']:.4f}, "
              f"eval/loss at steps {sorted(got['eval/loss'])}")
    print("tensorboard: OK")


if __name__ == "__main__":
    main()
