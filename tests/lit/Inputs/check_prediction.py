"""Checks `dtc inspect --json` predictions of plans of one model on several layouts: each step is
its compute plus exposed communication plus bubble; dp=2 halves the compute of one device and
adds communication; a pipeline has a bubble; a tensor split communicates; a GPU profile predicts
a faster step than the CPU one. Prints one line per plan."""
import json
import subprocess
import sys

dtc, plans = sys.argv[1], sys.argv[2:]


def predict(plan, profile=None):
    cmd = [dtc, "inspect", plan, "--json"] + (["--profile", profile] if profile else [])
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["prediction"]


p = {name: predict(name) for name in plans}
for name, q in p.items():
    total = q["compute_s"] + q["exposed_communication_s"] + q["bubble_s"]
    assert abs(total - q["step_s"]) <= 1e-9 + 1e-6 * q["step_s"], (name, q)
    assert q["tokens_per_s"] > 0 and 0 < q["utilisation"] <= 1, (name, q)
    print(f"{name.split('/')[-1]}: profile {q['profile']}, exposed communication "
          f"{'yes' if q['exposed_communication_s'] > 0 else 'no'}, bubble {'yes' if q['bubble_s'] > 0 else 'no'}")
one, dp2, pp2, tp2 = (p[n] for n in plans)
assert 0.4 * one["compute_s"] < dp2["compute_s"] < 0.6 * one["compute_s"], (one, dp2)
assert dp2["step_s"] < one["step_s"]
assert pp2["bubble_s"] > 0 and len(pp2["stages"]) == 2
assert sum(s["communication_s"] for s in tp2["stages"]) > 0
gpu = predict(plans[1], "h100-80g")
assert gpu["profile"] == "h100-80g" and gpu["step_s"] < dp2["step_s"], gpu
print("predictions agree")
