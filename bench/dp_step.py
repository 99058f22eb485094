"""Data-parallel training step on N processes: dtrun (plan compiled with --mesh dp=N, launched by
mpirun, MPI all-reduce) against PyTorch DistributedDataParallel (gloo all-reduce), both with
one thread per process, the zoo MLP and AdamW, the same global batch split over the processes.
Milliseconds per step of rank 0, best of ROUNDS medians."""
import argparse
import os
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from common import ROUNDS, STEPS, WARMUP, dp_mlp_plan, dtrun_run, report, tools

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]


def ddp_worker(rank, procs, store, batch, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=procs)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model)  # 25 MB buckets, as dtc's default
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    rng = np.random.default_rng(rank)
    local = batch // procs
    x = torch.from_numpy(rng.standard_normal((local * 8, 784)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, local * 8).astype(np.int64))
    times = []
    for i in range(WARMUP + STEPS):
        lo = (i % 8) * local
        t0 = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(ddp(x[lo:lo + local]), y[lo:lo + local]).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    if rank == 0:
        with open(out, "w") as f:
            f.write(str(1000.0 * float(np.median(times[WARMUP:]))))
    dist.destroy_process_group()


def ddp_ms(procs, batch, work):
    store, out = os.path.join(work, "store"), os.path.join(work, "ddp_ms")
    for path in (store, out):
        if os.path.exists(path):
            os.remove(path)
    mp.spawn(ddp_worker, args=(procs, store, batch, out), nprocs=procs, join=True)
    return float(open(out).read())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--procs", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    a = p.parse_args()
    dtc, dtrun = tools(a.build)
    with tempfile.TemporaryDirectory() as work:
        plan = dp_mlp_plan(dtc, work, a.batch, a.procs)
        ours, theirs = [], []
        for _ in range(ROUNDS):
            ours.append(dtrun_run(dtrun, plan, work, 1, a.batch, work, MPIRUN + [str(a.procs)])[0])
            theirs.append(ddp_ms(a.procs, a.batch, work))
    report(f"MLP 784-256-128-10, AdamW, global batch {a.batch} over {a.procs} processes x 1 thread "
           f"(dtrun: MPI; PyTorch: DDP over gloo), best of {ROUNDS} medians of {STEPS} steps",
           min(ours), min(theirs), torch.__version__)


if __name__ == "__main__":
    main()
