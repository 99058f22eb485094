"""Runs one step of a plan with dtrun and compares the bytes dtrun says it allocated with the
per-rank total `dtc inspect` gives for the plan.

usage: memory_matches_plan.py PLAN DATA [--np N] [DTRUN FLAGS...]
Prints "allocated N bytes: the plan's total" when they agree, else both numbers (and what dtrun
allocated beyond the plan); exits 1 when they differ. With --np, dtrun runs on N MPI processes
(a partitioned plan) and rank 0's allocation is compared with the per-rank total.
"""
import re
import subprocess
import sys


def main(plan, data, *flags):
    inspect = subprocess.run(["dtc", "inspect", plan], capture_output=True, text=True, check=True).stdout
    total = int(re.search(r"; total (\d+) bytes", inspect).group(1))
    launch = []
    if flags[:1] == ("--np",):
        launch = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", flags[1]]
        flags = flags[2:]
    run = subprocess.run(launch + ["dtrun", plan, "--data", data, "--steps", "1", "--threads", "1", *flags],
                         capture_output=True, text=True)
    if run.returncode != 0:
        print(run.stderr.strip())
        return 1
    line = re.search(r"memory: (\d+) bytes allocated \(([^)]*)\)", run.stdout)
    allocated = int(line.group(1))
    if allocated == total:
        print(f"allocated {allocated} bytes: the plan's total")
        return 0
    print(f"allocated {allocated} bytes ({line.group(2)}); the plan's total is {total}")
    return 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
