"""The collectives of one transformer block of a plan's train_step, from `dtc inspect --json`:
each as op:projection:dtype, in program order, then a line of what a sequence-parallel block
must not hold (an activation reduce-scattered in f32, a weight gradient reduced whole)."""
import json
import subprocess
import sys

dtc, plan, layer = sys.argv[1:4]
steps = next(f for f in json.loads(subprocess.run([dtc, "inspect", plan, "--json"],
                                                  capture_output=True, text=True,
                                                  check=True).stdout)["functions"]
             if f["name"] == "train_step")["steps"]
ops = [s for s in steps if s["op"] in ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")
       and s.get("loc", "").startswith(layer + ".")]
for s in ops:
    print(f"{s['op']}:{s['loc'].split('.')[-1]}:{s['outputs'][0]['dtype']}")
wide = [s["loc"] for s in ops if s["op"] == "reduce_scatter" and s["outputs"][0]["dtype"] == "f32"
        and len(s["outputs"][0]["shape"]) == 3]
print("f32 activation reduce-scatters:", wide or "none")
