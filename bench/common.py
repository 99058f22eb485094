"""Shared pieces of the side-by-side benchmarks: run dtrun, read its per-step rates, time a
PyTorch step loop and the JAX peer (bench/jax_peer.py in its own environment). Each side runs
ROUNDS times, interleaved, and the best median counts, so a noisy neighbour on a shared machine
hurts every side alike. All sides start from dtrun's initial weights and visit dtrun's batches,
so their first losses must agree: report_peers prints them."""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
from dtc_harness import batches, load_safetensors  # noqa: E402

WARMUP, STEPS, ROUNDS = 10, 60, 3
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def add_gpt_arguments(parser):
    """The build, threads, batch and zoo GPT shape flags the GPT benchmarks share."""
    parser.add_argument("--build", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--ctx", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--embd", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=256)


def tools(build):
    return os.path.join(build, "tools", "dtc", "dtc"), os.path.join(build, "tools", "dtrun", "dtrun")


def dp_mlp_plan(dtc, work, batch, procs):
    """WORK/input.npy and target.npy (8192 samples) and WORK/mlp.dtp: the zoo MLP with AdamW,
    global batch `batch` data-parallel over `procs` processes. Returns the plan."""
    rng = np.random.default_rng(0)
    np.save(f"{work}/input.npy", rng.standard_normal((8192, 784)).astype(np.float32))
    np.save(f"{work}/target.npy", rng.integers(0, 10, 8192).astype(np.int64))
    subprocess.run([dtc, "zoo", "mlp", "-o", f"{work}/mlp.dtm"], check=True)
    subprocess.run([dtc, "compile", f"{work}/mlp.dtm", "-o", f"{work}/mlp.dtp", "--batch", str(batch),
                    "--optimizer", "adamw", "--lr", "1e-3", "--mesh", f"dp={procs}"], check=True)
    return f"{work}/mlp.dtp"


def dtrun_run(dtrun, plan, data, threads, batch, work, launcher=()):
    """(median ms per step, first step's loss) of dtrun on `data` with seed 0, started by
    `launcher` (mpirun and its arguments) where given."""
    log = os.path.join(work, "bench.jsonl")
    subprocess.run([*launcher, dtrun, plan, "--data", data, "--steps", str(WARMUP + STEPS), "--threads",
                    str(threads), "--seed", "0", "--log", log], check=True, stdout=subprocess.DEVNULL)
    entries = [json.loads(line) for line in open(log)]
    rates = [e["samples_per_s"] for e in entries][WARMUP:]
    return 1000.0 * batch / float(np.median(rates)), entries[0]["loss"]


def torch_run(step):
    """(median ms of `step(i)` after warm-up, the loss `step(0)` returned)."""
    times, first = [], None
    for i in range(WARMUP + STEPS):
        t0 = time.perf_counter()
        loss = step(i)
        times.append(time.perf_counter() - t0)
        if first is None:
            first = float(loss)
    return 1000.0 * float(np.median(times[WARMUP:])), first


def jax_run(build, threads, model, weights, batches_npz, gpt=""):
    """(median ms, first loss) of bench/jax_peer.py on `threads` cores (taskset), in the JAX
    environment bench/jax_env.sh keeps under BUILD."""
    python = subprocess.run(["bash", os.path.join(ROOT, "bench", "jax_env.sh"), build], check=True,
                            capture_output=True, text=True).stdout.strip()
    cores = f"0-{threads - 1}" if threads > 1 else "0"
    out = subprocess.run(["taskset", "-c", cores, python, os.path.join(ROOT, "bench", "jax_peer.py"), "--model",
                          model, "--weights", weights, "--batches", batches_npz, "--warmup", str(WARMUP),
                          "--steps", str(STEPS), "--gpt", gpt], check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return result["ms"], result["first_loss"], result["jax"]


def rounds_of(runners):
    """Each runner ROUNDS times, interleaved: {name: (best ms, first loss)}."""
    got = {name: [] for name in runners}
    for _ in range(ROUNDS):
        for name, run in runners.items():
            got[name].append(run())
    return {name: (min(r[0] for r in runs), runs[0][1]) for name, runs in got.items()}


def report_peers(title, results):
    """dtrun and its peers' ms/step, the ratio to the best peer, and the first losses (the same
    weights and batches give the same first loss, to rounding)."""
    print(title)
    for name, (ms, first) in results.items():
        print(f"  {name:28s} {ms:9.3f} ms/step   first loss {first:.6f}")
    ours = results["dtrun"][0]
    peers = {n: r for n, r in results.items() if n != "dtrun"}
    best = min(peers, key=lambda n: peers[n][0])
    print(f"  ratio to the best peer ({best}): {peers[best][0] / ours:.3f}  (> 1: dtrun faster)")
    first = results["dtrun"][1]
    spread = max(abs(r[1] - first) / abs(first) for r in results.values())
    print(f"  first losses agree within {spread:.1e} (same initial weights and batches)")


def initial_weights(dtrun, plan, work):
    """dtrun's initial parameters (PyTorch names): the file and its tensors."""
    subprocess.run([dtrun, plan, "--steps", "0", "--save", f"{work}/init"], check=True, stdout=subprocess.DEVNULL)
    path = f"{work}/init/model.safetensors"
    return path, load_safetensors(path)


def report(title, ours, theirs, torch_version):
    print(title)
    print(f"  dtrun   {ours:9.3f} ms/step")
    print(f"  pytorch {theirs:9.3f} ms/step (torch {torch_version})")
    print(f"  ratio   {theirs / ours:9.3f}  (pytorch time / dtrun time; > 1: dtrun faster)")


def compile_plan(build, zoo_args, batch, work):
    """dtc zoo + dtc compile (AdamW, lr 1e-3) into WORK/model.dtp; returns the plan's path."""
    dtc, _ = tools(build)
    subprocess.run([dtc, "zoo", *zoo_args, "-o", f"{work}/model.dtm"], check=True)
    subprocess.run([dtc, "compile", f"{work}/model.dtm", "-o", f"{work}/model.dtp", "--batch", str(batch),
                    "--optimizer", "adamw", "--lr", "1e-3"], check=True)
    return f"{work}/model.dtp"


def classifier_bench(build, zoo_args, threads, batch, x, y, torch_model, jax_model=None):
    """{name: (best-of-rounds ms/step, first loss)} of dtrun, PyTorch and (given `jax_model`)
    JAX on one classifier, all from dtrun's initial weights over dtrun's batches."""
    import torch
    import torch.nn.functional as F
    _, dtrun = tools(build)
    with tempfile.TemporaryDirectory() as work:
        np.save(f"{work}/input.npy", x)
        np.save(f"{work}/target.npy", y)
        plan = compile_plan(build, zoo_args, batch, work)
        weights, init = initial_weights(dtrun, plan, work)
        torch_model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in init.items()})
        opt = torch.optim.AdamW(torch_model.parameters(), lr=1e-3)
        xs, ys = torch.from_numpy(x), torch.from_numpy(y)
        order = batches(len(x), batch, 0, WARMUP + STEPS)

        def torch_step(i):
            opt.zero_grad()
            loss = F.cross_entropy(torch_model(xs[order[i]]), ys[order[i]])
            loss.backward()
            opt.step()
            return loss.item() if i == 0 else 0.0

        runners = {"dtrun": lambda: dtrun_run(dtrun, plan, work, threads, batch, work),
                   f"pytorch {torch.__version__}": lambda: torch_run(torch_step)}
        if jax_model:
            np.savez(f"{work}/batches.npz", x=x, y=y, idx=np.stack(order))
            version = []

            def jax_peer():
                ms, first, v = jax_run(build, threads, jax_model, weights, f"{work}/batches.npz")
                version.append(v)
                return ms, first
            runners["jax"] = jax_peer
            results = rounds_of(runners)
            results[f"jax {version[0]} (XLA)"] = results.pop("jax")
            return results
        return rounds_of(runners)
