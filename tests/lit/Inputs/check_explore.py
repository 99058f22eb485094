"""Checks `dtc explore --json`: the candidates' layouts, that each built candidate's flags compile
(with dtc compile) to a plan whose prediction (dtc inspect) and memory are what explore reported,
that `best` is the fastest feasible one, and that `dtc compile --mesh auto` builds it."""
import json
import os
import subprocess
import sys

dtc, model, report, work = sys.argv[1:5]
r = json.load(open(report))
cands = r["candidates"]
print("candidates:", " ".join(sorted({c["mesh"] for c in cands})))
for key in ("mesh", "flags", "layout_flags", "feasible", "reason", "predicted_step_s", "memory_per_rank_bytes",
            "tokens_per_s", "mfu"):
    assert all(key in c for c in cands), key


def compiled(flags, name):
    """`flags` is the whole command line explore reports (model included), -o added here."""
    plan = os.path.join(work, name + ".dtp")
    subprocess.run([dtc, "compile", *flags, "-o", plan], check=True, capture_output=True)
    out = json.loads(subprocess.run([dtc, "inspect", plan, "--json"], check=True, capture_output=True,
                                    text=True).stdout)
    return out["prediction"]["step_s"]


for k, c in enumerate(cands):
    if not c["built"] or not c["feasible"]:
        continue
    step = compiled(c["flags"], f"c{k}")
    assert abs(step - c["predicted_step_s"]) <= 1e-9 * step, (c, step)
print("every built candidate's flags compile to the plan explore predicted")
feasible = [c for c in cands if c["feasible"]]
best = cands[r["best"]]
assert best["feasible"] and best["predicted_step_s"] == min(c["predicted_step_s"] for c in feasible)
print("the best is the fastest feasible candidate")
out = subprocess.run([dtc, "compile", model, "-o", os.path.join(work, "auto.dtp"), "--batch", "8", "--optimizer",
                      "adamw", "--mesh", "auto", "--devices", "2"], check=True, capture_output=True, text=True).stdout
assert " ".join(best["layout_flags"]) in out.splitlines()[0], (out, best["layout_flags"])
auto = json.loads(subprocess.run([dtc, "inspect", os.path.join(work, "auto.dtp"), "--json"], check=True,
                                 capture_output=True, text=True).stdout)
assert auto["prediction"]["step_s"] == best["predicted_step_s"]
print("--mesh auto compiles the best")
