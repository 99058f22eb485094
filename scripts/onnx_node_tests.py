"""ONNX's backend node tests (Debian's libonnx-testdata) through dtc and dtrun.

Every case whose ops dtc translates on their own (`dtc ops --onnx`) is compiled (the output
scored by --loss mse, so the training step exists too) and run forward on its test data with
`dtrun --predict`; each output is compared with the expected one (float32: |got - want| <=
1e-5 + 1e-4·|want|; integers exactly). Prints the pass rate over those cases, the failures, and
the op types that kept the other cases out.

A case dtc cannot run must be refused by dtc with a one-line error (exit 2); a result that
differs, or any other failure, is wrong. The exit status is 1 when any case is wrong.

usage: onnx_node_tests.py [--build DIR] [--ci] [--keep DIR]
  --ci    leave out the list of ops that kept other cases out (what `make test` runs)
"""
import argparse
import collections
import glob
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

DATA = "/usr/share/libonnx-testdata/data/node"
RTOL, ATOL = 1e-4, 1e-5
# Inputs that say how to compute (shapes, axes, sizes): known when compiling, so given as
# initializers; a model exported from PyTorch has them as constants.
SHAPE_INPUTS = {"Reshape": {1}, "Unsqueeze": {1}, "Squeeze": {1}, "Split": {1}, "ReduceSum": {1},
                "ReduceMean": {1}, "Expand": {1}, "Slice": {1, 2, 3, 4}, "Tile": {1}, "Dropout": {1, 2}}


def shape_inputs(model):
    names = set()
    for node in model.graph.node:
        for k in SHAPE_INPUTS.get(node.op_type, ()):
            if k < len(node.input):
                names.add(node.input[k])
    return names


def training_mode(case, model):
    """Nodes whose expected outputs are a training-mode forward, which --predict (the model in
    evaluation mode) does not compute: BatchNormalization's training_mode, and Dropout dropping
    in training (its expected output is a mask NumPy's generator drew)."""
    if any(a.name == "training_mode" and a.i == 1 for n in model.graph.node for a in n.attribute):
        return True
    inputs = [i.name for i in model.graph.input]

    def value(name):
        if name not in inputs:
            return None
        path = os.path.join(case, "test_data_set_0", f"input_{inputs.index(name)}.pb")
        tensor = onnx.TensorProto()
        with open(path, "rb") as f:
            tensor.ParseFromString(f.read())
        return numpy_helper.to_array(tensor)

    for node in model.graph.node:
        if node.op_type != "Dropout" or len(node.input) < 3 or not node.input[2]:
            continue
        training = value(node.input[2])
        ratio = value(node.input[1]) if len(node.input) > 1 and node.input[1] else 0.5
        if training is not None and bool(training) and (ratio is None or float(ratio) != 0):
            return True
    return False


def tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def opset(model):
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)


PASS, REFUSED, WRONG = "pass", "refused", "wrong"


def tool_failed(proc):
    """A dtc or dtrun failure: refused (bad input, exit 2, one line naming the problem), else
    wrong (a crash, an internal error)."""
    message = proc.stderr.strip()
    if proc.returncode == 2 and "\n" not in message:
        return REFUSED, re.sub(r"^\S+\.onnx: ", "", message.split("error: ", 1)[-1])
    return WRONG, f"exit {proc.returncode}: {message[-300:]}"


def run_case(case, model, build, work):
    """Returns (PASS | REFUSED | WRONG, detail)."""
    dtc = os.path.join(build, "tools", "dtc", "dtc")
    dtrun = os.path.join(build, "tools", "dtrun", "dtrun")
    data_set = os.path.join(case, "test_data_set_0")
    try:
        inputs = [tensor(p) for p in sorted(glob.glob(os.path.join(data_set, "input_*.pb")))]
        outputs = [tensor(p) for p in sorted(glob.glob(os.path.join(data_set, "output_*.pb")))]
    except ValueError as e:
        return REFUSED, f"its test data is not plain tensors ({e})"
    graph_inputs = [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    if len(inputs) != len(graph_inputs) or len(outputs) != len(model.graph.output):
        return REFUSED, "test data does not match the graph"
    results = []
    constants = shape_inputs(model)
    labels = {n.input[1] for n in model.graph.node
              if n.op_type in ("SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss", "Gather") and len(n.input) > 1}
    for k, want in enumerate(outputs):
        # A scalar output is scored as the loss itself; the batch is then the first input's.
        scalar = want.ndim == 0
        batch = inputs[0].shape[0] if scalar and inputs and inputs[0].ndim else (want.shape[0] if not scalar else 0)
        m = onnx.ModelProto()
        m.CopyFrom(model)
        # Inputs sharing the output's first dimension are data; the rest become initializers.
        data = {}
        keep = []
        for n, (info, value) in enumerate(zip(graph_inputs, inputs)):
            # The first input is the data, and the labels or ids ops read; the others are the
            # node's weights (parameters, as an export has them).
            if ((n == 0 or info.name in labels) and info.name not in constants and value.ndim >= 1
                    and value.shape[0] == batch and value.dtype in (np.float32, np.int64)):
                data[info.name] = value
                keep.append(info)
            else:
                m.graph.initializer.append(numpy_helper.from_array(value, info.name))
        del m.graph.input[:]
        for info in keep:
            info.type.tensor_type.shape.dim[0].ClearField("dim_value")
            info.type.tensor_type.shape.dim[0].dim_param = "batch"
            m.graph.input.append(info)
        out = m.graph.output[k]
        del m.graph.output[:]
        m.graph.output.append(out)
        path = os.path.join(work, f"model{k}.onnx")
        onnx.save(m, path)
        data_dir = os.path.join(work, f"data{k}")
        os.makedirs(data_dir, exist_ok=True)
        for name, value in data.items():
            np.save(os.path.join(data_dir, name + ".npy"), value)
        if want.dtype != np.float32:
            return REFUSED, f"output {k} is {want.dtype} (dtc computes float32)"
        plan = os.path.join(work, f"plan{k}.dtp")
        loss = ["--loss", out.name]
        if not scalar:
            np.save(os.path.join(data_dir, "dtc_target.npy"), np.zeros_like(want))
            loss = ["--loss", "mse", "--target", "dtc_target"]
        compiled = subprocess.run([dtc, "compile", path, "-o", plan, "--batch", str(batch), *loss],
                                  capture_output=True, text=True)
        if compiled.returncode != 0:
            return tool_failed(compiled)
        predicted = os.path.join(work, f"out{k}")
        ran = subprocess.run([dtrun, plan, "--data", data_dir, "--predict", predicted, "--threads", "1"],
                             capture_output=True, text=True)
        if ran.returncode != 0:
            return tool_failed(ran)
        name = "".join(c if c.isalnum() or c in "._-" else "_" for c in out.name)
        got = np.load(os.path.join(predicted, name + ".npy"))
        if scalar:
            got = got.reshape(())
        if got.shape != want.shape:
            return WRONG, f"output {k}: shape {got.shape}, expected {want.shape}"
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        bound = ATOL + RTOL * np.abs(want.astype(np.float64))
        if not np.all(err <= bound):
            return WRONG, f"output {k}: max |error| {err.max():.3g} (bound {bound.max():.3g})"
        results.append(float(err.max()))
    return PASS, f"max |error| {max(results):.2g}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    parser.add_argument("--ci", action="store_true")
    parser.add_argument("--keep")
    parser.add_argument("--cases", default="test_*",
                        help="a glob of case names; each one's outcome is printed")
    args = parser.parse_args()
    build = os.environ.get("DTC_BUILD_DIR", args.build)
    supported = set(subprocess.run([os.path.join(build, "tools", "dtc", "dtc"), "ops", "--onnx"],
                                   capture_output=True, text=True, check=True).stdout.split())
    cases = sorted(glob.glob(os.path.join(DATA, args.cases)))
    if not cases:
        sys.exit(f"no node tests in {DATA} (apt-get install libonnx-testdata)")
    blockers = collections.Counter()
    results = {}
    out_of_range = training = 0
    for case in cases:
        model = onnx.load(os.path.join(case, "model.onnx"))
        ops = {n.op_type for n in model.graph.node}
        missing = ops - supported
        if missing:
            for op in missing:
                blockers[op] += 1
            continue
        if not 13 <= opset(model) <= 17:
            out_of_range += 1
            continue
        if training_mode(case, model):
            training += 1
            continue
        with tempfile.TemporaryDirectory(dir=args.keep) as work:
            results[os.path.basename(case)] = run_case(case, model, build, work)
    if args.cases != "test_*":
        for case, (status, detail) in sorted(results.items()):
            print(f"{case}: {status}{' (' + detail + ')' if detail else ''}")
    passed = [c for c, (status, _) in results.items() if status == PASS]
    refused = {c: d for c, (status, d) in results.items() if status == REFUSED}
    wrong = {c: d for c, (status, d) in results.items() if status == WRONG}
    for case, detail in sorted(wrong.items()):
        print(f"WRONG {case}: {detail}")
    reasons = collections.Counter(refused.values())
    print("refused, with dtc's reasons (cases):")
    for reason, n in reasons.most_common():
        print(f"  ({n}) {reason}")
    print(f"ONNX node tests with only supported ops: {len(passed)}/{len(results)} passed "
          f"({100.0 * len(passed) / max(len(results), 1):.1f}%), {len(refused)} refused with an "
          f"error, {len(wrong)} wrong; "
          f"{out_of_range} more outside opsets 13-17, {training} checking a training-mode forward; "
          f"{len(cases)} cases in all")
    if not args.ci:
        print("ops that keep the other cases out (cases):")
        print("  " + ", ".join(f"{op} ({n})" for op, n in blockers.most_common()))
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
