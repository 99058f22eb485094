"""Holds a screened dtc explore (estimates rank every candidate; the contenders are compiled whole)
against one that compiles every candidate whole: prints whether the screen compiled its pick and
every contender whole, whether those compiles agree with the exploration that compiled everything,
and whether its pick is at least as fast as that exploration's."""
import json
import sys

exact, screen = (json.load(open(p)) for p in sys.argv[1:3])
margin = float(sys.argv[3])
print("screened:", screen["how"].startswith("screened"))
feasible = [c for c in screen["candidates"] if c["feasible"]]
fastest = min(c["predicted_step_s"] for c in feasible)
pick = screen["candidates"][screen["best"]]
print("pick compiled whole:", not pick["estimated"])
# Both picks are whole compiles; the screen's pipelines carry the estimate's stage cuts, which may
# beat the compiler's own.
best = exact["candidates"][exact["best"]]
print("pick at least as fast as the exact pick:",
      pick["predicted_step_s"] <= best["predicted_step_s"] * (1 + 1e-9))
left = [c for c in screen["candidates"] if c["estimated"] and c["built"] and c["predicted_step_s"]
        and c["predicted_step_s"] <= (1 + margin) * fastest
        and c["memory_per_rank_bytes"] <= (1 + margin) * screen["budget_bytes"]]
print("every contender compiled whole:", not left)
whole = [c for c in screen["candidates"] if c["built"] and not c["estimated"]]
built = [c for c in screen["candidates"] if c["built"]]
print(f"compiled whole: {len(whole)} of {len(built)} built; fewer: {len(whole) < len(built)}")
same = {" ".join(c["layout_flags"]): c for c in exact["candidates"] if c["built"]}
agree = True
for c in whole:
    e = same.get(" ".join(c["layout_flags"]))
    if e is None:  # a pipeline with the estimate's cuts: not among the exact candidates
        continue
    agree &= (c["feasible"] == e["feasible"] and c["memory_per_rank_bytes"] ==
              e["memory_per_rank_bytes"] and abs(c["predicted_step_s"] - e["predicted_step_s"])
              <= 1e-9 * e["predicted_step_s"])
print("whole compiles agree with the exact exploration:", agree)
