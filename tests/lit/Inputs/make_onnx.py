"""Writes small ONNX models for the ONNX bad-input and external-data tests.

usage: make_onnx.py CASE OUT.onnx
CASE: linear (a linear layer + ReLU, scalar-free output), unsupported (three ops dtc does not
run), dynamic-dim (an input whose second dimension is symbolic), fixed-batch (an input with a
fixed first dimension of 3), foreign-domain (imports com.microsoft), opset12, external (the
linear model with its weights in external data beside it), missing-external (the same, the
data file deleted).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def linear_graph(batch="batch", second=4):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((3, 4)).astype(np.float32), "fc.weight")
    b = numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "fc.bias")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, second])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])
    nodes = [helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["h"], name="/fc/Gemm", transB=1),
             helper.make_node("Relu", ["h"], ["y"], name="/relu/Relu")]
    return helper.make_graph(nodes, "linear", [x], [y], [w, b])


def model(graph, opset=14, domain=""):
    imports = [helper.make_opsetid(domain, opset)]
    if domain:
        imports.append(helper.make_opsetid("", 14))
    return helper.make_model(graph, opset_imports=imports)


def main(case, out):
    if case == "linear":
        onnx.save(model(linear_graph()), out)
    elif case == "unsupported":
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
        nodes = [helper.make_node("Cos", ["x"], ["a"], name="/first/Cos"),
                 helper.make_node("Relu", ["a"], ["b"], name="/relu/Relu"),
                 helper.make_node("HardSwish", ["b"], ["c"], name="/second/HardSwish"),
                 helper.make_node("Atan", ["c"], ["y"], name="/third/Atan")]
        onnx.save(model(helper.make_graph(nodes, "unsupported", [x], [y])), out)
    elif case == "dynamic-dim":
        onnx.save(model(linear_graph(second="features")), out)
    elif case == "fixed-batch":
        onnx.save(model(linear_graph(batch=3)), out)
    elif case == "foreign-domain":
        onnx.save(model(linear_graph(), opset=1, domain="com.microsoft"), out)
    elif case == "opset12":
        onnx.save(model(linear_graph(), opset=12), out)
    elif case in ("external", "missing-external"):
        m = model(linear_graph())
        onnx.save_model(m, out, save_as_external_data=True, all_tensors_to_one_file=True,
                        location="weights.bin", size_threshold=0)
        if case == "missing-external":
            os.remove(os.path.join(os.path.dirname(out), "weights.bin"))
    else:
        sys.exit(f"unknown case {case}")


if __name__ == "__main__":
    main(*sys.argv[1:])
