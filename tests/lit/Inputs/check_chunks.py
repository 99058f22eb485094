"""Checks the interleaved candidates of an estimated exploration: every power-of-two chunk count a
device up to the model's most chunks (`most`), 2 always; and where a pipeline of p stages runs
p micro-batches (1F1B's bubble its largest share of the step), each doubling of the chunks a
device shrinks the bubble of the layout otherwise the same.
Usage: check_chunks.py EXPLORE.json MOST"""
import json
import sys

result, most = json.load(open(sys.argv[1])), int(sys.argv[2])


def value(flags, name, default):
    return flags[flags.index(name) + 1] if name in flags else default


def without(flags, names):
    """`flags` less each of `names` and its value."""
    rest, k = [], 0
    while k < len(flags):
        if flags[k] in names:
            k += 2
        else:
            rest.append(flags[k])
            k += 1
    return tuple(rest)


seen, bubbles = {}, {}
for c in result["candidates"]:
    flags = c["layout_flags"]
    mesh = value(flags, "--mesh", "")
    pp = int(dict(a.split("=") for a in mesh.split(",") if a).get("pp", 1))
    v = int(value(flags, "--virtual-stages", 1))
    if value(flags, "--schedule", "1f1b").startswith("zb-"):
        continue  # the zero-bubble schedules: not interleaving
    if v > 1:
        seen.setdefault(pp, set()).add(v)
    if c["predicted_step_s"] is not None and pp > 1 and int(value(flags, "--microbatches", 1)) == pp:
        rest = without(flags, ("--schedule", "--virtual-stages", "--stage-cuts"))
        bubbles.setdefault(rest, {})[v] = c["bubble_s"]
for pp, vs in sorted(seen.items()):
    want = {2} | {v for v in (4, 8, 16, 32) if pp * v <= most}
    print(f"pp={pp}: chunks a device {sorted(vs)}, expected {sorted(want)}: {vs == want}")
shrinks = grows = 0
for rest, by in bubbles.items():
    vs = sorted(by)
    for a, b in zip(vs, vs[1:]):
        if by[b] < by[a]:
            shrinks += 1
        else:
            grows += 1
print(f"more chunks shrink the bubble at p micro-batches: {shrinks > 0 and grows == 0} "
      f"({shrinks} pairs, {grows} not)")
