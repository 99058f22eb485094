"""Checkpoint write and read throughput for the GPT-2 124M training state (parameters and both
AdamW moments, about 1.5 GB), side by side with the disk's own sequential speed (dd, the same
bytes) and torch.save/torch.load of the same tensors, in one run on one directory.

Writes count until the bytes are synced (dd conv=fdatasync; torch.save then fsync; dtrun
fsyncs every file before `latest` moves). Reads start from a cold page cache: each file is
evicted first (dd iflag=nocache count=0, posix_fadvise DONTNEED), and include checking every
byte's CRC-32 for dtrun. Each measurement runs ROUNDS times, interleaved; medians are shown.
dtrun runs on one process and on two (dp=2 with ZeRO-1: each rank writes its own share, no
gathering), total and per rank.

Each round's model has another seed, so that no write repeats bytes a disk has seen before;
its state is first checkpointed to memory (tmpfs), and dd copies exactly those bytes to the
disk (torch.save writes the same tensors). Two thirds of a step-0 AdamW state are zeros (the
moments), as in any checkpoint taken before training."""
import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
import safetensors_np  # noqa: E402

ROUNDS = 4  # each writer goes first once
# After `sync`, before each write: time for write-back below the file system (a virtual disk's
# host cache) to drain, so each writer starts from the same state. 20 s on the VM this was
# written on; shorter pauses gave whoever wrote first in a round two to three times the speed.
SETTLE_WRITE_S, SETTLE_READ_S = 20, 3
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]


def settle(seconds):
    """Each measurement starts with no write-back of the previous one pending."""
    os.sync()
    time.sleep(seconds)


def evict(paths):
    for path in paths:
        subprocess.run(["dd", f"if={path}", "iflag=nocache", "count=0"], check=True, capture_output=True)


def files_under(directory):
    return [p for p in glob.glob(os.path.join(directory, "**", "*"), recursive=True) if os.path.isfile(p)]


def dd_rate(text):
    """Bytes and seconds from dd's last line."""
    m = re.search(r"^(\d+) bytes .* copied, ([\d.]+) s", text, re.M)
    return int(m.group(1)), float(m.group(2))


def dd_write(source, target):
    out = subprocess.run(["dd", f"if={source}", f"of={target}", "bs=64M", "conv=fdatasync"],
                         check=True, capture_output=True, text=True).stderr
    n, s = dd_rate(out)
    return n / s / 1e9


def dd_read(target):
    evict([target])
    out = subprocess.run(["dd", f"if={target}", "of=/dev/null", "bs=64M"], check=True, capture_output=True,
                         text=True).stderr
    n, s = dd_rate(out)
    return n / s / 1e9


def dtrun(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def dtrun_write(dtrun_cmd, ckpt):
    """(total GB/s, per-rank GB/s of the slowest rank, GB) from dtrun's checkpoint line."""
    out = dtrun(dtrun_cmd + ["--checkpoint", ckpt])
    m = re.search(r"checkpoint: \S+ \(([\d.]+) GB in (\d+) files?, ([\d.]+) s: ([\d.]+) GB/s; slowest rank "
                  r"([\d.]+) GB in ([\d.]+) s\)", out)
    assert m, out
    return float(m.group(4)), float(m.group(5)) / float(m.group(6)), float(m.group(1))


def dtrun_read(dtrun_cmd, ckpt, ranks):
    evict(files_under(ckpt))
    out = dtrun(dtrun_cmd + ["--resume", ckpt])
    m = re.search(r"resumed at step 0 from \S+ \(([\d.]+) GB read by \d+ ranks? in ([\d.]+) s: ([\d.]+) GB/s\)", out)
    assert m, out
    return float(m.group(3)), float(m.group(1)) / ranks / float(m.group(2))


def torch_write(state, path):
    start = time.perf_counter()
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    return os.path.getsize(path) / (time.perf_counter() - start) / 1e9


def torch_read(path):
    evict([path])
    start = time.perf_counter()
    torch.load(path)
    return os.path.getsize(path) / (time.perf_counter() - start) / 1e9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--dir", required=True, help="where to write (the disk measured)")
    args = p.parse_args()
    dtc, dtrun_bin = (os.path.join(args.build, "tools", t, t) for t in ("dtc", "dtrun"))
    os.makedirs(args.dir, exist_ok=True)
    work = tempfile.mkdtemp(dir=args.dir, prefix="bench-checkpoint-")
    try:
        adamw = ["--optimizer", "adamw", "--lr", "6e-4"]

        def plans(seed):
            """GPT-2 124M (its initial values from `seed`) on one process and on dp=2 ZeRO-1."""
            model, one, two = (os.path.join(work, n) for n in ("gpt2.dtm", "one.dtp", "dp2.dtp"))
            subprocess.run([dtc, "zoo", "gpt", "--vocab", "50304", "--ctx", "1024", "--layers", "12", "--heads",
                            "12", "--embd", "768", "--seed", str(seed), "-o", model], check=True)
            subprocess.run([dtc, "compile", model, "-o", one, "--batch", "2", *adamw], check=True, capture_output=True)
            subprocess.run([dtc, "compile", model, "-o", two, "--batch", "2", *adamw, "--mesh", "dp=2", "--zero", "1"],
                           check=True, capture_output=True)
            return ([dtrun_bin, one, "--steps", "0", "--threads", "1"],
                    MPIRUN + ["2", dtrun_bin, two, "--steps", "0", "--threads", "1"])

        ckpt1, ckpt2 = os.path.join(work, "ckpt-1"), os.path.join(work, "ckpt-2")
        # Each round's bytes, first written to memory (tmpfs) by dtrun itself: dd copies exactly
        # them to the disk, torch.save writes the same tensors.
        shm = "/dev/shm" if shutil.disk_usage("/dev/shm").free > 4e9 else work
        staged = tempfile.mkdtemp(dir=shm, prefix="dtc-bench-")
        dd_target, torch_target = os.path.join(work, "dd.bin"), os.path.join(work, "state.pt")

        results = {k: [] for k in ("dd_w", "torch_w", "one_w", "two_w", "two_w_rank",
                                   "dd_r", "torch_r", "one_r", "two_r", "two_r_rank")}
        for r in range(ROUNDS):
            single, pair = plans(r + 1)
            shutil.rmtree(staged, ignore_errors=True)
            _, _, gigabytes = dtrun_write(single, staged)
            source = max(files_under(staged), key=os.path.getsize)
            state = {k: torch.from_numpy(v) for k, v in safetensors_np.load(source).items()}
            # Every target is removed before the round (deleting gigabytes keeps a disk busy:
            # not right before one writer only).
            for path in (dd_target, torch_target, ckpt1, ckpt2):
                shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else (
                    os.path.exists(path) and os.remove(path))

            def write_pair():
                total, rank, _ = dtrun_write(pair, ckpt2)
                results["two_w_rank"].append(rank)
                return total

            def read_pair():
                total, rank = dtrun_read(pair, ckpt2, 2)
                results["two_r_rank"].append(rank)
                return total

            methods = [("dd", lambda: dd_write(source, dd_target), lambda: dd_read(dd_target)),
                       ("torch", lambda: torch_write(state, torch_target), lambda: torch_read(torch_target)),
                       ("one", lambda: dtrun_write(single, ckpt1)[0], lambda: dtrun_read(single, ckpt1, 1)[0]),
                       ("two", write_pair, read_pair)]
            # Each round another method goes first, and each reads back what it has just written:
            # a disk that absorbs a burst and then slows down, or that keeps what was written
            # lately in a cache of its own, favours no one.
            for key, write, read in methods[r % 4:] + methods[:r % 4]:
                settle(SETTLE_WRITE_S)
                results[f"{key}_w"].append(write())
                settle(SETTLE_READ_S)
                results[f"{key}_r"].append(read())
        med = {k: statistics.median(v) for k, v in results.items()}
        print(f"GPT-2 124M training state (parameters + AdamW moments): {gigabytes:.3f} GB, directory {args.dir}")
        print(f"medians of {ROUNDS} interleaved rounds; ratio = GB/s / dd's GB/s")
        for kind, suffix in (("write (synced)", "w"), ("read (cold cache)", "r")):
            disk = med[f"dd_{suffix}"]
            print(f"{kind}:")
            rows = [("dd, sequential, same bytes", med[f"dd_{suffix}"]),
                    ("torch.save" if suffix == "w" else "torch.load", med[f"torch_{suffix}"]),
                    ("dtrun, 1 rank", med[f"one_{suffix}"]),
                    ("dtrun, dp=2 ZeRO-1, total", med[f"two_{suffix}"]),
                    ("dtrun, dp=2 ZeRO-1, per rank", med[f"two_{suffix}_rank"])]
            for name, rate in rows:
                print(f"  {name:32s} {rate:7.3f} GB/s  {rate / disk:5.2f}")
        print("every round (GB/s): " + "; ".join(f"{k} " + " ".join(f"{v:.2f}" for v in vs)
                                                 for k, vs in results.items()))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for leftover in glob.glob("/dev/shm/dtc-bench-*"):
            shutil.rmtree(leftover, ignore_errors=True)


if __name__ == "__main__":
    main()
