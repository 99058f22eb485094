"""Mixture-of-experts training on the CPU, in two parts.

1. One training step of a GPT whose MLPs are mixture-of-experts layers (dtc zoo gpt --experts),
   dtrun against PyTorch, one process, the same threads, model, batch, AdamW and data: PyTorch
   runs tests/e2e/moe_reference.py's model (its routing: top-k, capacity, drops, the
   load-balancing and z losses) from dtrun's initial weights over dtrun's token windows, so the
   first losses agree. The reference computes each token's experts on its own row (a [C, 4C]
   gather per row, seconds a step here); the peer timed replaces only that by one GEMM per
   expert over the rows routed to it, the same arithmetic.
2. The all-to-alls of expert parallelism (--mesh ep=P) under mpirun on P processes of one
   thread: each all-to-all's predicted time, (P-1)·latency + sent bytes / bandwidth on the
   intra-node link of a profile calibrated on the same P processes (the cost model's
   communicationSeconds), against the time per call dtrun --profile-summary measures, and the
   predicted step (dtc inspect --profile) against the measured one."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
import moe_reference  # noqa: E402
import nanogpt_model  # noqa: E402
from dtc_harness import window_offsets, windows, write_tokens  # noqa: E402

import common  # noqa: E402
from common import dtrun_run, initial_weights, report_peers, rounds_of, tools, torch_run  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]
AUX, Z = 0.01, 0.001  # dtc zoo gpt's default aux- and z-loss weights


class GroupedExperts(moe_reference.Experts):
    """The reference's experts, each as one GEMM over the rows routed to it."""

    def forward(self, x, e):
        order = torch.argsort(e, stable=True)
        counts = torch.bincount(e, minlength=self.c_fc.weight.shape[0]).tolist()
        out = []
        fc, proj = self.c_fc, self.c_proj
        params = zip(*(t.unbind(0) for t in (fc.weight, fc.bias, proj.weight, proj.bias)))
        for rows, (w1, b1, w2, b2) in zip(x[order].split(counts), params):
            if len(rows):
                out.append(F.gelu(rows @ w1 + b1, approximate="tanh") @ w2 + b2)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(len(order))
        return torch.cat(out)[inverse]


def compile_moe(build, a, work, name, mesh=()):
    """dtc zoo gpt --experts + dtc compile (AdamW, lr 1e-3) into WORK/NAME.dtp."""
    dtc, _ = tools(build)
    model = f"{work}/moe.dtm"
    if not os.path.exists(model):
        subprocess.run([dtc, "zoo", "gpt", "--vocab", str(a.vocab), "--ctx", str(a.ctx), "--layers", str(a.layers),
                        "--heads", str(a.heads), "--embd", str(a.embd), "--experts", str(a.experts), "--top-k",
                        str(a.top_k), "--capacity-factor", str(a.capacity_factor), "-o", model], check=True)
    plan = f"{work}/{name}.dtp"
    subprocess.run([dtc, "compile", model, "-o", plan, "--batch", str(a.batch), "--optimizer", "adamw", "--lr",
                    "1e-3", *mesh], check=True, stdout=subprocess.DEVNULL)
    return plan


def step_time(a, tokens, work):
    _, dtrun = tools(a.build)
    plan = compile_moe(a.build, a, work, "moe")
    _, init = initial_weights(dtrun, plan, work)
    init.pop("lm_head.weight", None)
    init["lm_head.weight"] = init["transformer.wte.weight"]
    nanogpt_model.install_sdpa()
    config = nanogpt_model.GPTConfig(block_size=a.ctx, vocab_size=a.vocab, n_layer=a.layers, n_head=a.heads,
                                     n_embd=a.embd)
    model = moe_reference.MoeGPT(config, (a.experts, a.top_k, a.capacity_factor, True), 1, AUX, Z)
    for block in model.transformer.h:
        block.mlp.experts.__class__ = GroupedExperts
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in init.items()}, strict=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    # dtrun's windows (seed 0), which both sides visit.
    batches = [tuple(map(torch.from_numpy, windows(tokens, window_offsets(len(tokens), a.batch, a.ctx, 0, i), a.ctx)))
               for i in range(a.warmup + a.steps)]

    def torch_step(i):
        opt.zero_grad()
        _, loss = model(*batches[i])
        loss.backward()
        opt.step()
        return loss.item() if i == 0 else 0.0

    def torch_side():
        model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in init.items()}, strict=True)
        opt.state.clear()
        return torch_run(torch_step)

    results = rounds_of({"dtrun": lambda: dtrun_run(dtrun, plan, f"{work}/train.bin", a.threads, a.batch, work),
                         f"pytorch {torch.__version__}": torch_side})
    report_peers(f"MoE GPT L={a.layers} H={a.heads} C={a.embd} T={a.ctx} V={a.vocab}, {a.experts} experts, "
                 f"top-{a.top_k}, capacity factor {a.capacity_factor}, AdamW, batch {a.batch}, {a.threads} threads, "
                 f"best of {a.rounds} medians of {a.steps} steps (PyTorch: one GEMM per expert)", results)


def profile_row(text, op):
    """(calls/run, ms/run, us/call) of `op` in --profile-summary's "by op type" table, and the
    "ms each" of the train step."""
    each = float(re.search(r"profile of train_step: .*?([\d.]+) ms each", text).group(1))
    table = text.split("by op type", 1)[1].split("by model node", 1)[0]
    for line in table.splitlines():
        cols = line.split()
        if cols and cols[0] == op:
            return float(cols[1]), float(cols[2]), float(cols[3]), each
    raise RuntimeError(f"no {op} row in the profile summary")


def all_to_all(a, procs, work):
    dtc, dtrun = tools(a.build)
    launch = MPIRUN + [str(procs)]
    plan = compile_moe(a.build, a, work, f"ep{procs}", ["--mesh", f"ep={procs}"])
    profile = f"{work}/profile-{procs}.json"
    subprocess.run([*launch, dtrun, "--calibrate", "-o", profile, "--threads", "1"], check=True,
                   stdout=subprocess.DEVNULL)
    link = json.load(open(profile))["intra_node"]
    info = json.loads(subprocess.run([dtc, "inspect", plan, "--json"], check=True, capture_output=True,
                                     text=True).stdout)
    step = next(f for f in info["functions"] if f["name"] == "train_step")
    calls = [c for c in step["collectives"] if c["op"] == "all_to_all"]
    predicted = [(c["group"] - 1) * link["latency_s"] + c["sent_bytes"] / link["bytes_per_s"] for c in calls]
    inspect = subprocess.run([dtc, "inspect", plan, "--profile", profile], check=True, capture_output=True,
                             text=True).stdout
    m = re.search(r"^predicted step on [^:]*: ([\d.e+-]+) (ms|s)\b", inspect, re.M)
    predicted_step = float(m.group(1)) * (1.0 if m.group(2) == "ms" else 1e3)
    log = f"{work}/ep{procs}.jsonl"
    out = subprocess.run([*launch, dtrun, plan, "--data", f"{work}/train.bin", "--steps", str(a.mpi_steps),
                          "--threads", "1", "--seed", "0", "--log", log, "--profile-summary"], check=True,
                         capture_output=True, text=True).stdout
    per_run, _, us_call, each = profile_row(out, "all_to_all")
    rates = [json.loads(line)["samples_per_s"] for line in open(log)][min(common.WARMUP, a.mpi_steps // 4):]
    measured_step = 1000.0 * a.batch / float(np.median(rates))
    assert per_run == len(calls), f"plan has {len(calls)} all-to-alls, the profile {per_run} per run"
    return dict(procs=procs, calls=len(calls), sent=sorted({c["sent_bytes"] for c in calls}),
                bytes=sorted({c["bytes"] for c in calls}), predicted_us=1e6 * float(np.mean(predicted)),
                measured_us=us_call, predicted_step=predicted_step, measured_step=measured_step, each=each,
                link=link)


def report_all_to_all(a, rows):
    print(f"All-to-all of expert parallelism (--mesh ep=P, global batch {a.batch}), mpirun -np P x 1 thread, "
          f"{a.mpi_steps} steps; predicted: (P-1)*latency + sent bytes/bandwidth, intra-node link calibrated "
          f"on the same P processes")
    print(f"  {'P':>2} {'calls':>5} {'bytes':>9} {'sent/rank':>9} {'latency us':>10} {'GB/s':>6} "
          f"{'predicted us':>12} {'measured us':>11} {'meas/pred':>9}")
    for r in rows:
        print(f"  {r['procs']:>2} {r['calls']:>5} {'/'.join(map(str, r['bytes'])):>9} "
              f"{'/'.join(map(str, r['sent'])):>9} {1e6 * r['link']['latency_s']:>10.2f} "
              f"{r['link']['bytes_per_s'] / 1e9:>6.2f} {r['predicted_us']:>12.1f} {r['measured_us']:>11.1f} "
              f"{r['measured_us'] / r['predicted_us']:>9.2f}")
    print("  (measured per call: dtrun --profile-summary on rank 0, which includes waiting for the slowest rank"
          " to arrive)")
    print(f"  {'P':>2} {'predicted step ms':>17} {'measured ms/step':>16} {'profiled ms each':>16} {'meas/pred':>9}")
    for r in rows:
        print(f"  {r['procs']:>2} {r['predicted_step']:>17.2f} {r['measured_step']:>16.2f} {r['each']:>16.2f} "
              f"{r['measured_step'] / r['predicted_step']:>9.2f}")


def main():
    p = argparse.ArgumentParser()
    common.add_gpt_arguments(p)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--capacity-factor", type=float, default=1.25)
    p.add_argument("--warmup", type=int, default=common.WARMUP)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=common.ROUNDS)
    p.add_argument("--procs", default="2,4", help="process counts of the all-to-all part; empty: skip it")
    p.add_argument("--mpi-steps", type=int, default=40, help="steps of each mpirun run")
    a = p.parse_args()
    common.WARMUP, common.STEPS, common.ROUNDS = a.warmup, a.steps, a.rounds
    torch.set_num_threads(a.threads)
    procs = [int(n) for n in a.procs.split(",") if n]
    for n in procs:
        assert a.batch % n == 0 and a.experts % n == 0, f"batch {a.batch} and experts {a.experts} must divide by {n}"
    tokens = np.random.default_rng(0).integers(0, a.vocab, 200000).astype(np.int64)
    with tempfile.TemporaryDirectory() as work:
        write_tokens(f"{work}/train.bin", tokens)
        step_time(a, tokens, work)
        if procs:
            report_all_to_all(a, [all_to_all(a, n, work) for n in procs])


if __name__ == "__main__":
    main()
