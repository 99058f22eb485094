"""Holds explore's estimate against whole compiles at scale: explores a model, compiles the top
candidates whole with the flags explore lists, and prints the predicted step and the largest
rank's memory of each side by side (dtc inspect on the whole plan).
Usage: explore_estimate_check.py DTC MODEL DEVICES BATCH TOP [extra dtc flags...]"""
import json
import os
import re
import subprocess
import sys
import tempfile

dtc, model, devices, batch, top = sys.argv[1:6]
extra = sys.argv[6:]
profile = "a100-80g"
explored = json.loads(subprocess.run(
    [dtc, "explore", model, "--devices", devices, "--batch", batch, "--profile", profile,
     "--json", *extra], check=True, capture_output=True, text=True).stdout)
print(f"explore: {explored['how']}, {explored['explore_s']:.1f} s")
feasible = [c for c in explored["candidates"] if c["feasible"]][: int(top)]
print(f"{'candidate':60s} {'step est':>9s} {'whole':>9s} {'err':>7s} {'GiB est':>8s} "
      f"{'whole':>8s} {'err':>7s} {'HFU est':>8s} {'whole':>6s}")
with tempfile.TemporaryDirectory() as work:
    plan = os.path.join(work, "candidate.dtp")
    for c in feasible:
        subprocess.run([dtc, "compile", *c["flags"], "-o", plan], check=True,
                       capture_output=True)
        inspected = subprocess.run([dtc, "inspect", plan, "--profile", profile, "--json"],
                                   check=True, capture_output=True, text=True).stdout
        prediction = json.loads(inspected)["prediction"]
        step = prediction["step_s"]
        text = subprocess.run([dtc, "inspect", plan, "--profile", profile], check=True,
                              capture_output=True, text=True).stdout
        totals = [int(t) for t in re.findall(r"per rank: .*; total (\d+) bytes", text)]
        memory = max(totals)
        layout = " ".join(f for f in c["layout_flags"] if not f.startswith("transformer."))
        layout = layout.replace(" --stage-cuts", "")
        est, est_mem = c["predicted_step_s"], c["memory_per_rank_bytes"]
        print(f"{layout[:60]:60s} {est:9.3f} {step:9.3f} {100 * (est / step - 1):+6.1f}% "
              f"{est_mem / 2**30:8.2f} {memory / 2**30:8.2f} {100 * (est_mem / memory - 1):+6.1f}% "
              f"{100 * c['hfu']:7.1f}% {100 * prediction['utilisation']:5.1f}%")
