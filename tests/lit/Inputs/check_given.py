"""Prints the layouts given to dtc explore with --try, as priced by two explorations (one compiled
whole, one estimated), and whether each estimate is within a tolerance of the whole compile."""
import json
import sys

exact, estimate = (json.load(open(p)) for p in sys.argv[1:3])
tolerance = float(sys.argv[3])


def given(r):
    out = {}
    for c in r["candidates"]:
        if c["given"]:
            flags = c["layout_flags"]
            if "--stage-cuts" in flags:
                k = flags.index("--stage-cuts")
                flags = flags[:k] + flags[k + 2:]
            out[" ".join(flags)] = c
    return out


whole, priced = given(exact), given(estimate)
print(f"given: {len(whole)} whole, {len(priced)} estimated")
for layout, e in sorted(priced.items()):
    w = whole[layout]
    step = e["predicted_step_s"] / w["predicted_step_s"] - 1
    memory = e["memory_per_rank_bytes"] / w["memory_per_rank_bytes"] - 1
    print(f"{layout}: step within {tolerance:.0%}: {abs(step) <= tolerance}; "
          f"memory within {tolerance:.0%}: {abs(memory) <= tolerance} "
          f"({step:+.1%}, {memory:+.1%})")
