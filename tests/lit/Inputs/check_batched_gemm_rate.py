"""A CPU runs a batched GEMM one slice at a time, a GPU all slices at once: the same profile's
GEMM curve (slow for small calls) prices a plan's batch_matmul higher when the profile describes
a CPU, and its linear layers (one GEMM each) the same either way.
Usage: check_batched_gemm_rate.py DTC CALIBRATED.json PLAN WORKDIR"""
import json
import os
import subprocess
import sys

dtc, calibrated, plan, work = sys.argv[1:5]
profile = json.load(open(calibrated))
profile["gemm_flops_per_s"] = {"f32": [[1e5, 1e9], [1e8, 1e12]]}
seconds = {}
for device in ("cpu", "cuda"):
    profile["device"] = device
    path = os.path.join(work, f"curve-{device}.json")
    json.dump(profile, open(path, "w"))
    out = subprocess.run([dtc, "inspect", plan, "--profile", path, "--json"], check=True,
                         capture_output=True, text=True).stdout
    seconds[device] = json.loads(out)["prediction"]["stages"][0]["kernels_s"]
print("batch_matmul slower per slice on a cpu:", seconds["cpu"]["batch_matmul"] > 1.5 * seconds["cuda"]["batch_matmul"])
print("linear priced alike:", abs(seconds["cpu"]["linear"] - seconds["cuda"]["linear"]) <= 1e-12)
