"""Interleaved rounds for the GPU benchmarks (bench/gpu_gpt2.py, bench/gpu_llama.py): every
contender runs once per round, round after round, so that what drifts during a run (clocks,
temperature, a neighbour on the machine) touches all of them alike. Each run is a fresh process
that builds its step, warms up and then times a stretch of steps long enough to reach steady
clocks; the rate a contender gets is the median over the rounds, and the spread, (max - min) /
median, says how far to trust it: a contender whose spread is over 10% is flagged, and so is a
ratio between two contenders whose spreads overlap it.

A contender is a name and a function of the round's index returning one measurement (a dict
with "tokens_per_s", and where known "launches" per step and "peak_bytes"), or raising
ContenderFailed, which leaves that contender's other rounds standing."""
import json
import os
import statistics
import subprocess
import sys
import time

SPREAD_LIMIT = 0.10


class ContenderFailed(RuntimeError):
    pass


def run_rounds(contenders, rounds, say=print):
    """{name: [measurement per round that succeeded]}, contenders in order within each round."""
    results = {name: [] for name, _ in contenders}
    for r in range(rounds):
        for name, measure in contenders:
            start = time.perf_counter()
            try:
                m = measure(r)
            except ContenderFailed as e:
                say(f"  round {r + 1} {name}: failed: {e}")
                continue
            results[name].append(m)
            say(f"  round {r + 1} {name}: {m['tokens_per_s']:.0f} tokens/s "
                f"({time.perf_counter() - start:.0f} s with its start)", flush=True)
    return results


def summary(measurements):
    """(median tokens/s, spread, launches, peak bytes) of one contender's rounds; None if none ran."""
    if not measurements:
        return None
    rates = [m["tokens_per_s"] for m in measurements]
    median = statistics.median(rates)
    spread = (max(rates) - min(rates)) / median if median > 0 else float("inf")
    launches = next((m["launches"] for m in measurements if m.get("launches") is not None), None)
    peak = max((m.get("peak_bytes") or 0 for m in measurements), default=0) or None
    return median, spread, launches, peak


def ratio_note(ours, theirs):
    """What to say beside the ratio of two summaries: the ratio, and whether the spreads cover it."""
    ratio = ours[0] / theirs[0]
    flag = " (spreads overlap the difference)" if abs(ratio - 1) <= max(ours[1], theirs[1]) else ""
    return ratio, flag


def run_process(argv, env=None, timeout=1800):
    """Runs a contender's process; its stdout's last line that parses as JSON is the measurement."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        raise ContenderFailed(f"timed out after {timeout} s")
    if done.returncode != 0:
        raise ContenderFailed(f"exit {done.returncode}: {done.stderr[-1500:]}")
    for line in reversed(done.stdout.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    raise ContenderFailed("printed no measurement")


def dtrun_measure(build, plan, tokens, warmup, steps, env=None, tokens_per_sample=None):
    """A contender running dtrun on `plan` (--device cuda): the median of its logged rates after
    `warmup` steps, its CUDA graph's kernel launches and the bytes it allocated."""
    def measure(_round):
        log = f"{plan}.round.jsonl"
        argv = [os.path.join(build, "tools", "dtrun", "dtrun"), plan, "--data", tokens, "--device", "cuda",
                "--steps", str(warmup + steps), "--log", log]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **(env or {})})
        except OSError as e:
            raise ContenderFailed(str(e))
        if done.returncode != 0:
            raise ContenderFailed(f"exit {done.returncode}: {done.stderr[-1500:]}")
        rates = [json.loads(line)["samples_per_s"] for line in open(log)][warmup:]
        os.remove(log)
        launches = peak = None
        attention = ""
        for line in done.stderr.splitlines():
            if "function 'train_step' replays as a CUDA graph:" in line:
                launches = int(line.split(":")[-1].split()[0])
            if line.startswith("dtrun: attention "):
                attention = line[len("dtrun: attention "):]
        for line in done.stdout.splitlines():
            if line.startswith("memory: "):
                peak = int(line.split()[1])
        return {"tokens_per_s": statistics.median(rates) * tokens_per_sample, "launches": launches,
                "peak_bytes": peak, "attention": attention}
    return measure


def time_steps(step, warmup, steps, min_seconds):
    """Seconds per step of `step` (a PyTorch training step on the GPU) after `warmup` calls, over
    at least `steps` calls and `min_seconds` (steady clocks)."""
    import torch
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    done, start = 0, time.perf_counter()
    while done < steps or time.perf_counter() - start < min_seconds:
        step()
        done += 1
        if done % 10 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / done


def torch_training_step(net, mode, lr, idx, tgt):
    """The PyTorch peer's training step as a function: eager with fused AdamW ("fp32" without
    autocast, "bf16" or "eager" under bf16 autocast), or "compile" / "compile-max-autotune": the
    model and the optimizer's step under torch.compile (max-autotune-no-cudagraphs for the
    latter), in bf16 autocast."""
    import torch
    if not mode.startswith("compile"):
        opt = torch.optim.AdamW(net.parameters(), lr=lr, fused=True)
        forward, opt_step = net, opt.step
    else:
        compile_mode = "max-autotune-no-cudagraphs" if mode == "compile-max-autotune" else "default"
        opt = torch.optim.AdamW(net.parameters(), lr=lr)
        forward = torch.compile(net, mode=compile_mode)
        opt_step = torch.compile(opt.step, mode=compile_mode)

    def step():
        if mode == "fp32":
            loss = forward(idx, tgt)
        else:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = forward(idx, tgt)
        loss.backward()
        opt_step()
        opt.zero_grad(set_to_none=True)
    return step


def torch_measure(step, tokens_per_step, warmup, steps, min_seconds):
    """One round of a PyTorch peer's `step`: tokens/s, kernel launches and peak memory."""
    import torch
    torch.cuda.reset_peak_memory_stats()
    seconds = time_steps(step, warmup, steps, min_seconds)
    return {"tokens_per_s": tokens_per_step / seconds, "launches": kernel_launches(step),
            "peak_bytes": torch.cuda.max_memory_allocated()}


def gemm_peak(dtype_name="bfloat16"):
    """FLOP/s of 8192³ GEMMs in `dtype_name` on this GPU, by PyTorch: the MFU's peak."""
    import torch
    a = torch.randn(8192, 8192, device="cuda", dtype=getattr(torch, dtype_name))
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ a
    torch.cuda.synchronize()
    return 10 * 2 * 8192**3 / (time.perf_counter() - t0)


def kernel_launches(step):
    """CUDA kernels one call of `step` launches, by the profiler; None where it cannot say."""
    import torch
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        return sum(e.count for e in prof.key_averages()
                   if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA)
    except Exception as e:  # a side line: the rate stands without it
        print(f"(no kernel count: {e})", file=sys.stderr)
        return None


def print_table(title, results, reference, peers, flops_per_token, peak_flops, say=print):
    """One row per contender: median tokens/s, spread, MFU, launches, peak memory, and `reference`'s
    ratio to each of `peers`."""
    say(title)
    ref = summary(results.get(reference, []))
    for name, measurements in results.items():
        s = summary(measurements)
        if s is None:
            say(f"  {name:40s} no round ran")
            continue
        median, spread, launches, peak = s
        flag = "  SPREAD OVER 10%" if spread > SPREAD_LIMIT else ""
        count = f"{launches:6d}" if launches is not None else "     ?"
        memory = f"{peak / 2**30:6.1f} GiB" if peak else "       ?"
        mfu = 100 * median * flops_per_token / peak_flops
        versus = ""
        if ref and name in peers:
            ratio, overlap = ratio_note(ref, s)
            versus = f"  {reference} / this: {ratio:5.2f}x{overlap}"
        say(f"  {name:40s} {median:10.0f} tokens/s  spread {100 * spread:4.1f}% over {len(measurements)}  "
            f"MFU {mfu:5.1f}%  launches/step {count}  peak {memory}{flag}{versus}")
