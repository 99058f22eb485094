"""Every priced candidate of `dtc explore --json` states rates that derive from its predicted step:
tokens_per_s x predicted_step_s is the batch's tokens, and mfu x predicted_step_s is the same for
all (the model's FLOPs over the devices' peak), whatever the layout (pipeline stages interleaved,
context parallelism, Ulysses)."""
import json
import sys

report, tokens = json.load(open(sys.argv[1])), float(sys.argv[2])
priced = [c for c in report["candidates"] if c["feasible"] and c["predicted_step_s"]]
layouts = {c["mesh"] for c in priced}
print("priced candidates:", len(priced) > 20, "| with cp:", any("cp=" in m for m in layouts),
      "| with pp:", any("pp=" in m for m in layouts))
wrong = [c["flags"] for c in priced if abs(c["tokens_per_s"] * c["predicted_step_s"] - tokens) > 1e-6 * tokens]
print("tokens per step off:", wrong[:3])
work = [c["mfu"] * c["predicted_step_s"] for c in priced]
print("mfu agrees with the step:", max(work) - min(work) <= 1e-9 * max(work))
