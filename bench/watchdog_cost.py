"""What the watchdog's look at other hosts costs a step: PROCS ranks of dp=PROCS as two hosts of
PROCS/2 (DTC_WATCHDOG_HOST), the zoo MLP with AdamW, one thread each; each rank's watchdog
reads its host-mates' /proc entries every half second and tells every rank of one that died
(DTC_WATCHDOG_LIVENESS=1, the default) or does not (0). Runs of the two alternate; the median
ms per step of rank 0 in each, then the median over rounds and the ratio."""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np

from common import dp_mlp_plan, tools

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]
WARMUP = 20


def median_ms(launcher, dtrun, plan, data, steps, batch, work):
    """Rank 0's median ms per step after the warm-up (from its log)."""
    log = os.path.join(work, "bench.jsonl")
    subprocess.run([*launcher, dtrun, plan, "--data", data, "--steps", str(steps), "--threads", "1",
                    "--log", log], check=True, stdout=subprocess.DEVNULL)
    rates = [json.loads(line)["samples_per_s"] for line in open(log)][WARMUP:]
    return 1000.0 * batch / float(np.median(rates))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--procs", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=2000, help="each run's; several seconds, so that the "
                   "half-second look happens many times")
    a = p.parse_args()
    dtc, dtrun = tools(a.build)
    with tempfile.TemporaryDirectory() as work:
        plan = dp_mlp_plan(dtc, work, a.batch, a.procs)
        half = max(1, a.procs // 2)
        wrapper = os.path.join(work, "host.sh")
        with open(wrapper, "w") as f:
            f.write(f'#!/bin/sh\nexport DTC_WATCHDOG_HOST=host$((OMPI_COMM_WORLD_RANK / {half}))\nexec "$@"\n')
        os.chmod(wrapper, 0o755)
        times = {"1": [], "0": []}
        for _ in range(a.rounds):
            for liveness in ("1", "0"):
                os.environ["DTC_WATCHDOG_LIVENESS"] = liveness
                launcher = MPIRUN + [str(a.procs), "-x", "DTC_WATCHDOG_LIVENESS", wrapper]
                times[liveness].append(median_ms(launcher, dtrun, plan, work, a.steps, a.batch, work))
    on, off = float(np.median(times["1"])), float(np.median(times["0"]))
    print(f"MLP 784-256-128-10, AdamW, batch {a.batch} over {a.procs} processes as 2 hosts, "
          f"median of {a.rounds} rounds of {a.steps} steps")
    print(f"  the look at other hosts on:  {on:.3f} ms/step  (rounds: {', '.join(f'{t:.3f}' for t in times['1'])})")
    print(f"  the look at other hosts off: {off:.3f} ms/step  (rounds: {', '.join(f'{t:.3f}' for t in times['0'])})")
    print(f"  on / off: {on / off:.3f}")


if __name__ == "__main__":
    main()
