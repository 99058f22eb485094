"""Writes variants of a tiny hand-written model as JSON for the bad-input tests.
usage: make_model_json.py OUTDIR NAME.json VARIANT"""
import copy
import json
import os
import sys

BASE = {
    "version": 1,
    "graph": {
        "inputs": [{"name": "input", "dtype": "f32", "shape": [-1, 4]},
                   {"name": "target", "dtype": "i64", "shape": [-1]}],
        "initializers": [
            {"info": {"name": "fc.weight", "shape": [3, 4]},
             "init": {"kind": "uniform", "a": -0.5, "b": 0.5, "seed": 1}},
            {"info": {"name": "fc.bias", "shape": [3]}, "float_data": [0.1, 0.0, -0.1]},
        ],
        "nodes": [
            {"name": "fc", "op_type": "Linear", "inputs": ["input", "fc.weight", "fc.bias"],
             "outputs": ["logits"]},
            {"name": "loss", "op_type": "SoftmaxCrossEntropy", "inputs": ["logits", "target"],
             "outputs": ["loss"]},
        ],
        "outputs": ["loss", "logits"],
        "loss": "loss", "predictions": "logits", "targets": "target",
    },
}


def variant(name):
    m = copy.deepcopy(BASE)
    g = m["graph"]
    if name == "base":
        pass
    elif name == "linear_weight_transposed":
        g["initializers"][0]["info"]["shape"] = [4, 3]
    elif name == "unknown_op":
        g["nodes"][0]["op_type"] = "Conv7d"
    elif name == "dangling_input":
        g["nodes"][0]["inputs"][0] = "hidden_typo"
    elif name == "no_loss":
        del g["loss"]
    elif name == "unknown_attribute":
        g["nodes"].insert(1, {"name": "act", "op_type": "Gelu", "inputs": ["logits"], "outputs": ["act"],
                              "attributes": [{"name": "approx", "kind": "string", "s": "tanh"}]})
        g["nodes"][2]["inputs"][0] = "act"
    elif name == "attribute_of_none":
        g["nodes"][0]["attributes"] = [{"name": "transpose_b", "kind": "int", "i": 1}]
    elif name == "short_float_data":
        g["initializers"][1]["float_data"] = [0.1, 0.2]
    else:
        raise SystemExit(f"unknown variant {name}")
    return m


if __name__ == "__main__":
    out, file, name = sys.argv[1:4]
    with open(os.path.join(out, file), "w") as f:
        json.dump(variant(name), f)
