"""Holds dtc explore's estimate (deep models priced from shallow copies) against whole compiles of
the same candidates: prints the median and largest errors of the predicted step and the memory per
rank, and how the estimate's pick fares among the whole compiles."""
import json
import statistics
import sys


def layout(c):
    """A candidate's flags without the stage cuts the estimate adds."""
    flags, out, i = c["layout_flags"], [], 0
    while i < len(flags):
        if flags[i] == "--stage-cuts":
            i += 2
            continue
        out.append(flags[i])
        i += 1
    return " ".join(out)


exact = json.load(open(sys.argv[1]))
estimate = json.load(open(sys.argv[2]))
assert not exact["estimated"] and estimate["estimated"]
whole = {layout(c): c for c in exact["candidates"] if c["built"] and c["predicted_step_s"]}
steps, memory, mfu = [], [], []
for c in estimate["candidates"]:
    e = whole.get(layout(c))
    if not e or not c["built"] or not c["predicted_step_s"]:
        continue
    steps.append(abs(c["predicted_step_s"] / e["predicted_step_s"] - 1))
    memory.append(abs(c["memory_per_rank_bytes"] / e["memory_per_rank_bytes"] - 1))
    mfu.append(abs(c["flops_per_step"] / e["flops_per_step"] - 1))
print(f"compared {len(steps)} candidates")
print(f"step: median error {100 * statistics.median(steps):.1f}%, largest {100 * max(steps):.1f}%")
print(f"memory: median error {100 * statistics.median(memory):.1f}%, largest {100 * max(memory):.1f}%")
print(f"FLOPs per step: largest error {100 * max(mfu):.2f}%")
print("FLOPs per step within 5%:", max(mfu) <= 0.05)
print("median step error within 10%:", statistics.median(steps) <= 0.10)
print("median memory error within 10%:", statistics.median(memory) <= 0.10)
# The estimate's pick among the candidates both explorations built (estimates also try more
# micro-batch counts than whole compiles do).
common = [c for c in estimate["candidates"]
          if c["feasible"] and layout(c) in whole and whole[layout(c)]["feasible"]]
best = min(whole.values(), key=lambda c: c["predicted_step_s"])
pick = whole[layout(min(common, key=lambda c: c["predicted_step_s"]))]
ratio = pick["predicted_step_s"] / best["predicted_step_s"]
print(f"the estimate's pick, compiled whole, takes {ratio:.3f}x the best whole compile")
print("pick within 10% of the best:", ratio <= 1.10)
