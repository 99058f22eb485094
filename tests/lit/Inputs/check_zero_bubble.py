"""Bubbles of the pipeline schedules of one model on one profile, from `dtc inspect --json` of
each plan: the predicted bubble of each schedule over 1F1B's, and over textbook 1F1B's
(p-1)/m of the step's compute (a whole backward before the input gradient leaves; dtc's 1F1B
sends it first, so its own bubble is smaller); and the most activations a stage keeps, over
1F1B's.
Usage: check_zero_bubble.py STAGES MICRO-BATCHES 1F1B.json SCHEDULE=PLAN.json ..."""
import json
import sys

p, m = int(sys.argv[1]), int(sys.argv[2])


def read(path):
    info = json.load(open(path))
    peak = max(s["peak_activation_bytes"] for s in info["pipeline"]["stages"])
    return info["prediction"], peak


base, base_peak = read(sys.argv[3])
textbook = (p - 1) / m * base["compute_s"]
print(f"1f1b: bubble {base['bubble_s']:.3f} s, {base['bubble_s'] / textbook:.2f} of textbook 1F1B's")
for arg in sys.argv[4:]:
    name, path = arg.split("=")
    pred, peak = read(path)
    print(f"{name}: bubble {pred['bubble_s']:.3f} s, {pred['bubble_s'] / base['bubble_s']:.2f} of 1F1B's, "
          f"{pred['bubble_s'] / textbook:.2f} of textbook 1F1B's; step {pred['step_s'] / base['step_s']:.3f} of "
          f"1F1B's; most activations {peak / base_peak:.2f} of 1F1B's")
