"""The GEMM-bound benchmark: a GPT of width 768, 4 layers, context 256, batch 8 (AdamW) in dtrun,
PyTorch and JAX, with each side's model FLOPs utilisation against the single-core and all-core
sgemm peaks measured in the same run (dtrun --calibrate: OpenBLAS sgemm on linear-layer shapes
through dtrun's GEMM path, its best point, measured before and after the steps and the higher
kept: this machine's speed drifts, and a peak caught in a slow moment would flatter everyone).
FLOPs per step: the plan's contractions
(planfile/flops.h, as dtrun's MFU counts them)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import gpt_step  # noqa: E402
from common import tools  # noqa: E402


def sgemm_peak(dtrun, threads, work):
    path = os.path.join(work, f"calibrated-{threads}.json")
    subprocess.run([dtrun, "--calibrate", "--threads", str(threads), "-o", path], check=True,
                   stdout=subprocess.DEVNULL)
    return max(rate for _, rate in json.load(open(path))["gemm_flops_per_s"]["f32"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--threads", type=int, required=True)
    a = p.parse_args()
    dtc, dtrun = tools(a.build)
    with tempfile.TemporaryDirectory() as work:
        one, every = sgemm_peak(dtrun, 1, work), sgemm_peak(dtrun, a.threads, work)
        plan = os.path.join(work, "gpt.dtp")
        sys.argv = ["gpt_step.py", "--build", a.build, "--threads", str(a.threads), "--embd", "768", "--layers",
                    "4", "--heads", "12", "--ctx", "256", "--batch", "8", "--vocab", "512", "--warmup", "2",
                    "--steps", "5", "--rounds", "2", "--plan", plan]
        results = gpt_step.main()
        one = max(one, sgemm_peak(dtrun, 1, work))
        every = max(every, sgemm_peak(dtrun, a.threads, work))
        inspect = subprocess.run([dtc, "inspect", plan, "--json"], check=True, capture_output=True, text=True)
        flops = json.loads(inspect.stdout)["prediction"]["flops_per_step"]
    print(f"  sgemm peak measured now: {one / 1e9:.1f} GFLOP/s on 1 core, {every / 1e9:.1f} GFLOP/s on "
          f"{a.threads}; {flops / 1e9:.1f} GFLOP per step")
    for name, (ms, _) in results.items():
        rate = flops / (ms / 1000.0)
        print(f"  {name:28s} {rate / 1e9:7.1f} GFLOP/s: {100 * rate / every:5.1f}% of the all-core peak, "
              f"{100 * rate / one:5.1f}% of one core's")


if __name__ == "__main__":
    main()
