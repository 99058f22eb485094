"""Shared helpers for end-to-end tests: run the tools, reproduce dtrun's sample order, read
safetensors. Run with /usr/bin/python3 (Debian's python3-torch and python3-numpy)."""
import json
import os
import re
import subprocess
import sys

import numpy as np

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import safetensors_np  # noqa: E402


def tool(name):
    """Path of a built tool; DTC_BUILD_DIR is set by ctest."""
    build = os.environ.get("DTC_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
    return os.path.join(build, "tools", name, name)


def run(*args, expect_ok=True):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if expect_ok and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}")
    check_utilisation(proc.stdout)
    return proc


def check_utilisation(out):
    """dtrun's MFU divides by a peak the run's own contractions reached: no line may pass 100%."""
    for line in out.splitlines():
        m = re.search(r"\| MFU ([0-9.]+)%", line)
        assert not m or float(m.group(1)) < 100, f"a progress line over its peak: {line}"


def expect_error(args, needle, stdout_free_of=None):
    """A command that must fail with exit 2 and one stderr line holding `needle` (and, when
    given, nothing of `stdout_free_of` on stdout: it did not train)."""
    out = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and needle in lines[0], (args, out.returncode, out.stderr)
    assert stdout_free_of is None or stdout_free_of not in out.stdout, out.stdout
    print(f"refused: {lines[0]}")


def relative(a, b):
    """max |a − b| over max |b|."""
    return float(np.abs(a - b).max() / np.abs(b).max())


def splitmix64(state):
    state = (state + GOLDEN) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def stream_state(seed, index):
    """runtime/data/sampler.h streamState: one splitmix64 round over seed ^ golden·(index+1)."""
    _, mixed = splitmix64((seed ^ ((GOLDEN * (index + 1)) & MASK)) & MASK)
    return mixed


def epoch_permutation(n, seed, epoch):
    """dtrun's sample order for one epoch (runtime/data/sampler.h)."""
    perm = list(range(n))
    state = stream_state(seed, epoch)
    for i in range(n - 1, 0, -1):
        state, r = splitmix64(state)
        j = r % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def _mix_array(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def dropout_key(output_name):
    """A Dropout node's key: 64-bit FNV-1a of its output's name, shifted right once."""
    h = 0xCBF29CE484222325
    for c in output_name.encode():
        h = ((h ^ c) * 0x100000001B3) & MASK
    return h >> 1


def dropout_scale(seed, step, key, shape, ratio, first_index=0):
    """runtime/ops/dropout_math.h keepScale for the elements of a tensor of `shape` (float32:
    1/(1-ratio) where kept, 0 where dropped), elements numbered from `first_index`."""
    with np.errstate(over="ignore"):
        s = _mix_array(np.uint64((seed + 0x9E3779B97F4A7C15) & MASK))
        s = _mix_array(s ^ np.uint64((step * 0xD1B54A32D192ED03) & MASK))
        s = _mix_array(s ^ np.uint64((key * 0x8CB92BA72F3D8DD7) & MASK))
        index = np.arange(first_index, first_index + int(np.prod(shape)), dtype=np.uint64)
        u = (_mix_array(s ^ index) >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    ratio = np.float32(ratio)
    keep = np.float32(1.0) / (np.float32(1.0) - ratio)
    return np.where(u >= ratio, keep, np.float32(0.0)).astype(np.float32).reshape(shape)


def batches(n, batch, seed, steps):
    """The index batches of the first `steps` steps (drop_last=True, reshuffled per epoch)."""
    per_epoch = n // batch
    out = []
    for step in range(steps):
        epoch, k = divmod(step, per_epoch)
        perm = epoch_permutation(n, seed, epoch)
        out.append(perm[k * batch:(k + 1) * batch])
    return out


def read_log(path, evaluations=False):
    """The training steps dtrun logged (`evaluations`: its evaluations, {"step", "val_loss"})."""
    with open(path) as f:
        entries = [json.loads(line) for line in f if line.strip()]
    return [e for e in entries if ("val_loss" in e) == evaluations]


def load_safetensors(path):
    return safetensors_np.load(path)


def window_offsets(size, batch, t, seed, step):
    """dtrun's token windows for 0-based `step` (runtime/data/tokens.h)."""
    state = stream_state(seed, step)
    offsets = []
    for _ in range(batch):
        state, r = splitmix64(state)
        offsets.append(r % (size - t))
    return offsets


def windows(tokens, offsets, t):
    """The windows of `t` tokens starting at `offsets`, and the same shifted by one (a language
    model's inputs and targets), as int64 [len(offsets), t] arrays."""
    x = np.stack([tokens[o:o + t] for o in offsets]).astype(np.int64)
    y = np.stack([tokens[o + 1:o + t + 1] for o in offsets]).astype(np.int64)
    return x, y


def write_tokens(path, tokens):
    """An llm.c token file: 256 int32 header (magic, version, count), then uint16 tokens."""
    header = np.zeros(256, dtype=np.int32)
    header[:3] = [20240520, 1, len(tokens)]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=np.uint16).tobytes())


def read_tokens(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype=np.int32)
        assert header[0] == 20240520 and header[1] == 1, "not an llm.c token file"
        return np.frombuffer(f.read(), dtype=np.uint16)[:header[2]].astype(np.int64)


def weight_error(ours, ref):
    """Largest per-tensor max |ours − ref| / max |ref| over the tensors of `ref`."""
    return max(np.abs(ours[k] - ref[k]).max() / max(np.abs(ref[k]).max(), 1e-12) for k in ref)


def dtc_train(model, work, name, batch, compile_flags, data, steps, seed, extra=(), device=()):
    """Compiles `model`, saves its initial parameters, trains `steps` steps on `data` with 2
    threads (dtrun's `device` flags on both runs, `extra` on the training one). Returns (initial
    params, final params, logged losses, dtrun's stdout)."""
    plan = os.path.join(work, f"{name}.dtp")
    run(tool("dtc"), "compile", model, "-o", plan, "--batch", batch, *compile_flags)
    run(tool("dtrun"), plan, "--steps", 0, "--save", os.path.join(work, f"{name}-init"), *device)
    log = os.path.join(work, f"{name}.jsonl")
    out = run(tool("dtrun"), plan, "--data", data, "--steps", steps, "--seed", seed, "--log", log,
              "--save", os.path.join(work, f"{name}-final"), "--threads", 2, *device, *extra).stdout
    entries = read_log(log)
    assert [e["step"] for e in entries] == list(range(1, steps + 1)), "log steps are not 1..N"
    return (load_safetensors(os.path.join(work, f"{name}-init", "model.safetensors")),
            load_safetensors(os.path.join(work, f"{name}-final", "model.safetensors")),
            [e["loss"] for e in entries], out)


def torch_train_classifier(model, opt, x, y, batch, seed, steps, dtype):
    """PyTorch's side of a classifier parity run: the batches dtrun visits, cross-entropy."""
    import torch
    import torch.nn.functional as F
    losses = []
    for idx in batches(len(x), batch, seed, steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(torch.from_numpy(x[idx]).to(dtype)), torch.from_numpy(y[idx]))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def measured_bubble(trace, steps, skip):
    """Idle time over busy time in a dtrun --trace timeline of `steps` training steps, the first
    `skip` left out (warm-up): per step, the step's span over all ranks minus each rank's kernel
    time outside receives (a stage waits in them), summed over ranks, over the summed kernel
    time. Balanced pipeline stages give (p-1)/(v*m)."""
    import json
    events = [e for e in json.load(open(trace))["traceEvents"]
              if e["ph"] == "X" and e["cat"] == "train_step"]
    calls = {}  # rank -> its train_step calls; a call starts where the step index returns to 0
    for e in sorted(events, key=lambda e: (e["pid"], e["ts"])):
        rank_calls = calls.setdefault(e["pid"], [])
        if not rank_calls or e["args"]["step"] == 0:
            rank_calls.append([])
        rank_calls[-1].append(e)
    idle = busy = 0.0
    for s in range(skip, steps):
        start = min(c[s][0]["ts"] for c in calls.values())
        end = max(c[s][-1]["ts"] + c[s][-1]["dur"] for c in calls.values())
        for c in calls.values():
            work = sum(e["dur"] for e in c[s] if e["name"] != "recv")
            busy += work
            idle += (end - start) - work
    return idle / busy
