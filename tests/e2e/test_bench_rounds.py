"""The GPU benchmarks' bookkeeping, without a GPU (bench/gpu_rounds.py, bench/gpu_llama.py):
contenders run in interleaved rounds, a failed round leaves the others standing, the median and
the spread are what the table prints and a spread over 10% is flagged; dtrun's measurement is
read from its log and its lines (a stand-in dtrun here); and the Llama bench's model FLOPs per
token are the FLOPs dtc counts in the plan of that model (a small Llama with grouped-query
attention and a tied head)."""
import json
import os
import stat
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import gpu_llama  # noqa: E402
import gpu_rounds  # noqa: E402
from dtc_harness import run, tool  # noqa: E402


def check_rounds():
    order = []

    def contender(name, rates):
        def measure(r):
            order.append((r, name))
            if rates[r] is None:
                raise gpu_rounds.ContenderFailed("no GPU today")
            return {"tokens_per_s": rates[r], "launches": 7, "peak_bytes": 2**30}
        return name, measure

    said = []
    results = gpu_rounds.run_rounds([contender("a", [100, 110, 90]), contender("b", [50, None, 51])], 3,
                                    say=lambda *s, **k: said.append(" ".join(map(str, s))))
    assert order == [(0, "a"), (0, "b"), (1, "a"), (1, "b"), (2, "a"), (2, "b")], order
    assert any("round 2 b: failed: no GPU today" in line for line in said), said
    median, spread, launches, peak = gpu_rounds.summary(results["a"])
    assert (median, round(spread, 6), launches, peak) == (100, 0.2, 7, 2**30)
    assert gpu_rounds.summary(results["b"])[0] == 50.5 and gpu_rounds.summary([]) is None
    table = []
    gpu_rounds.print_table("t", results, "a", ["b"], 1.0, 1000.0, say=table.append)
    row_a = next(line for line in table if line.strip().startswith("a "))
    row_b = next(line for line in table if line.strip().startswith("b "))
    assert "SPREAD OVER 10%" in row_a and "SPREAD" not in row_b, table
    assert "a / this:  1.98x" in row_b and "MFU  10.0%" in row_a, table
    # A ratio inside the spreads says so.
    assert gpu_rounds.ratio_note((105, 0.2), (100, 0.01))[1], "an overlapping ratio was not flagged"
    assert not gpu_rounds.ratio_note((200, 0.05), (100, 0.05))[1]


def check_dtrun_measure(work):
    """A stand-in dtrun: logs 8 steps, says its CUDA graph's launches and the attention path."""
    build = os.path.join(work, "build")
    os.makedirs(os.path.join(build, "tools", "dtrun"))
    fake = os.path.join(build, "tools", "dtrun", "dtrun")
    with open(fake, "w") as f:
        f.write("""#!/usr/bin/env python3
import json, sys
log = sys.argv[sys.argv.index("--log") + 1]
with open(log, "w") as f:
    for step, rate in enumerate([1, 1, 4, 5, 6, 7, 8, 100], 1):
        f.write(json.dumps({"step": step, "loss": 1.0, "samples_per_s": rate}) + "\\n")
print("memory: 123456 bytes allocated (state 1 + arena 2 + beyond the plan 0), peak resident 1.0 MiB")
print("dtrun: function 'train_step' replays as a CUDA graph: 321 kernel nodes", file=sys.stderr)
print("dtrun: attention on cuDNN 9.19.0's fused flash attention", file=sys.stderr)
""")
    os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
    m = gpu_rounds.dtrun_measure(build, os.path.join(work, "p.dtp"), "tokens.bin", 2, 6, tokens_per_sample=10)(0)
    assert m == {"tokens_per_s": 65.0, "launches": 321, "peak_bytes": 123456,
                 "attention": "on cuDNN 9.19.0's fused flash attention"}, m


def check_llama_flops(work):
    """The bench's count against dtc's: a tiny Llama (6 query heads over 2, tied head)."""
    gpu_llama.MODELS["tiny"] = (2, 48, 6, 2, 64)
    gpu_llama.V = 97
    context, batch = 12, 4
    model = os.path.join(work, "tiny.dtm")
    run(tool("dtc"), "zoo", "llama", "--vocab", 97, "--ctx", context, "--layers", 2, "--heads", 6, "--kv-heads", 2,
        "--embd", 48, "--ffn", 64, "--tie-embeddings", "-o", model)
    plan = os.path.join(work, "tiny.dtp")
    run(tool("dtc"), "compile", model, "-o", plan, "--batch", batch, "--optimizer", "adamw", "--fused-attention")
    info = json.loads(run(tool("dtc"), "inspect", plan, "--json").stdout)
    counted = info["prediction"]["flops_per_step"] / (batch * context)
    ours = gpu_llama.flops_per_token("tiny", context)
    assert abs(counted - ours) <= 1e-9 * ours, f"dtc counts {counted} FLOPs a token, the bench {ours}"
    print(f"llama FLOPs per token: {ours:.0f}, as dtc counts them")


def main():
    check_rounds()
    with tempfile.TemporaryDirectory() as work:
        check_dtrun_measure(work)
        check_llama_flops(work)
    print("bench rounds: ok")


if __name__ == "__main__":
    main()
