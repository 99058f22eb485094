"""dtc compile --recompute auto on a two-stage pipeline: with a budget between what stage 0
needs with and without recomputation, stage 0 must get the cheapest setting that fits and the
other stage none; the plan compiled must fit on every stage. Usage: recompute_auto.py DTC MODEL
WORKDIR"""
import json
import subprocess
import sys

dtc, model, work = sys.argv[1:4]
flags = ["--batch", "8", "--mesh", "pp=2", "--microbatches", "2", "--no-fused-attention"]


def per_stage(plan):
    out = subprocess.run([dtc, "inspect", plan, "--json"], check=True, capture_output=True, text=True).stdout
    return [s["state_bytes"] + s["arena_bytes"] for s in json.loads(out)["pipeline"]["stages"]]


needs = {}
for mode in ("none", "selective", "full"):
    plan = f"{work}/{mode}.dtp"
    subprocess.run([dtc, "compile", model, "-o", plan, *flags, "--recompute", mode], check=True,
                   capture_output=True)
    needs[mode] = per_stage(plan)
# Between stage 0's need without recomputation and the most that its cheapest setting or the
# other stage without recomputation needs.
budget = (needs["none"][0] + max(needs["none"][1], min(needs["selective"][0], needs["full"][0]))) // 2
assert needs["none"][1] <= budget < needs["none"][0], needs
expected = [next(m for m in ("none", "selective", "full") if needs[m][s] <= budget) for s in (0, 1)]
out = subprocess.run([dtc, "compile", model, "-o", f"{work}/auto.dtp", *flags, "--recompute", "auto", "--memory",
                      repr(budget / 2**30)], check=True, capture_output=True, text=True).stdout
line = out.splitlines()[0]
for s, mode in enumerate(expected):
    assert f"stage {s} {mode} (" in line, (expected, line)
assert all(n <= budget for n in per_stage(f"{work}/auto.dtp")), (per_stage(f"{work}/auto.dtp"), budget)
print(f"auto picked {','.join(expected)}; every stage fits")
