"""Reads `dtrun --profile-summary` output: the op-type rows add up to the time in kernels, the
model-node rows (layers folded) add up to it too, and kernels plus the rest make the run's time."""
import re
import sys

text = open(sys.argv[1]).read()
head = re.search(r"profile of (\w+): (\d+) run\(s\) timed.*, ([\d.]+) ms each", text)
inside = re.search(r"in kernels ([\d.]+) ms \(([\d.]+)%\), outside them ([\d.]+) ms", text)
sections = re.split(r"\n  by (?:op type|model node \(layers folded\)) .*\n", text)
row = re.compile(r"^  (\S.*?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%$", re.M)
ops = row.findall(sections[1])
nodes = row.findall(sections[2])
run_ms, kernel_ms, outside_ms = float(head[3]), float(inside[1]), float(inside[3])
op_ms = sum(float(r[2]) for r in ops)
node_ms = sum(float(r[2]) for r in nodes)
# Rows are printed to a microsecond: allow one per row.
print(f"function {head[1]}, {head[2]} runs")
print("kernels + outside = run:", abs(kernel_ms + outside_ms - run_ms) <= 2e-3)
print("op types add up:", abs(op_ms - kernel_ms) <= 1e-3 * (len(ops) + 1))
print("model nodes add up:", abs(node_ms - kernel_ms) <= 1e-3 * (len(nodes) + 1))
print("op types:", " ".join(sorted(r[0] for r in ops if r[0] in ("linear", "adamw_update", "layer_norm"))))
print("layers folded:", any(r[0].startswith("transformer.h.*.") for r in nodes),
      not any(re.search(r"\.\d+\.", r[0]) for r in nodes))
