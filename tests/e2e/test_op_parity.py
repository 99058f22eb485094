"""Every op type against PyTorch, forward and backward, through the whole stack: a one-op model
(JSON -> flatc -> dtc compile -> dtrun), trained one step of SGD with lr 1 so that the saved
parameters give the gradients (g = p_before - p_after). The loss must match PyTorch's to 1e-5
relative and every gradient to 1e-4 of its largest entry; BatchNorm's running statistics too."""
import json
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import (dropout_key, dropout_scale, epoch_permutation, load_safetensors,  # noqa: E402
                         read_log, run, tool)

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SCHEMA = os.path.join(ROOT, "frontends", "model", "model.fbs")
B, SEED = 4, 3


def ints(name, v):
    return {"name": name, "kind": "ints", "ints": list(v)}


def real(name, v):
    return {"name": name, "kind": "float", "f": v}


def text(name, v):
    return {"name": name, "kind": "string", "s": v}


def integer(name, v):
    return {"name": name, "kind": "int", "i": v}


# name: (params {name: shape}, node (op_type, inputs, attributes), torch forward(params, data)
#        -> output, extra data inputs {name: (dtype, values)})
def cases(rng):
    ids = rng.integers(0, 10, (B, 3))
    labels = rng.integers(0, 5, B)
    return {
        "Linear": ({"x": [B, 5], "w": [3, 5], "b": [3]}, ("Linear", ["x", "w", "b"], []),
                   lambda p, d: F.linear(p["x"], p["w"], p["b"]), {}),
        "MatMul_batched": ({"a": [B, 3, 4], "m": [B, 4, 2]}, ("MatMul", ["a", "m"], []),
                           lambda p, d: p["a"] @ p["m"], {}),
        "MatMul_transpose_b": ({"a": [B, 3], "m": [5, 3]}, ("MatMul", ["a", "m"], [integer("transpose_b", 1)]),
                               lambda p, d: p["a"] @ p["m"].t(), {}),
        "Add_broadcast": ({"a": [B, 3, 4], "c": [4]}, ("Add", ["a", "c"], []), lambda p, d: p["a"] + p["c"], {}),
        "Sub": ({"a": [B, 3], "c": [B, 3]}, ("Sub", ["a", "c"], []), lambda p, d: p["a"] - p["c"], {}),
        "Mul_broadcast": ({"a": [B, 3], "c": [1, 3]}, ("Mul", ["a", "c"], []), lambda p, d: p["a"] * p["c"], {}),
        "Relu": ({"x": [B, 6]}, ("Relu", ["x"], []), lambda p, d: F.relu(p["x"]), {}),
        "Tanh": ({"x": [B, 6]}, ("Tanh", ["x"], []), lambda p, d: torch.tanh(p["x"]), {}),
        "Sigmoid": ({"x": [B, 6]}, ("Sigmoid", ["x"], []), lambda p, d: torch.sigmoid(p["x"]), {}),
        "Silu": ({"x": [B, 6]}, ("Silu", ["x"], []), lambda p, d: F.silu(p["x"]), {}),
        "Gelu": ({"x": [B, 6]}, ("Gelu", ["x"], []), lambda p, d: F.gelu(p["x"]), {}),
        "Gelu_tanh": ({"x": [B, 6]}, ("Gelu", ["x"], [text("approximate", "tanh")]),
                      lambda p, d: F.gelu(p["x"], approximate="tanh"), {}),
        "ReduceSum": ({"x": [B, 3, 4]}, ("ReduceSum", ["x"], [ints("axes", [2])]),
                      lambda p, d: p["x"].sum(dim=2), {}),
        "Reshape": ({"x": [B, 6]}, ("Reshape", ["x"], [ints("shape", [-1, 2, 3])]),
                    lambda p, d: p["x"].reshape(-1, 2, 3), {}),
        "Transpose": ({"x": [B, 3, 4]}, ("Transpose", ["x"], [ints("perm", [0, 2, 1])]),
                      lambda p, d: p["x"].permute(0, 2, 1), {}),
        "LayerNorm": ({"x": [B, 6], "w": [6], "b": [6]}, ("LayerNorm", ["x", "w", "b"], [real("eps", 1e-5)]),
                      lambda p, d: F.layer_norm(p["x"], (6,), p["w"], p["b"], 1e-5), {}),
        "Embedding": ({"table": [10, 4]}, ("Embedding", ["ids", "table"], []),
                      lambda p, d: F.embedding(d["ids"], p["table"]), {"ids": ("i64", ids)}),
        "CausalSoftmax": ({"x": [B, 4, 4]}, ("CausalSoftmax", ["x"], [real("scale", 0.7)]),
                          lambda p, d: torch.softmax((0.7 * p["x"]).masked_fill(
                              torch.ones(4, 4, dtype=torch.bool).triu(1), float("-inf")), dim=-1), {}),
        "Softmax": ({"x": [B, 5]}, ("Softmax", ["x"], [real("scale", 0.7)]),
                    lambda p, d: torch.softmax(0.7 * p["x"], dim=-1), {}),
        "Softmax_3d": ({"x": [B, 2, 5]}, ("Softmax", ["x"], []), lambda p, d: torch.softmax(p["x"], dim=-1), {}),
        "LogSoftmax": ({"x": [B, 2, 5]}, ("LogSoftmax", ["x"], [real("scale", 0.7)]),
                       lambda p, d: F.log_softmax(0.7 * p["x"], dim=-1), {}),
        "Scale": ({"x": [B, 3]}, ("Scale", ["x"], [real("factor", -0.25)]), lambda p, d: -0.25 * p["x"], {}),
        "Exp": ({"x": [B, 3]}, ("Exp", ["x"], []), lambda p, d: torch.exp(p["x"]), {}),
        "Log": ({"x": [B, 3]}, ("Log", ["x"], []), lambda p, d: torch.log(p["x"]), {}),
        "Sqrt": ({"x": [B, 3]}, ("Sqrt", ["x"], []), lambda p, d: torch.sqrt(p["x"]), {}),
        "Reciprocal": ({"x": [B, 3]}, ("Reciprocal", ["x"], []), lambda p, d: torch.reciprocal(p["x"]), {}),
        "Erf": ({"x": [B, 3]}, ("Erf", ["x"], []), lambda p, d: torch.erf(p["x"]), {}),
        "Abs": ({"x": [B, 3]}, ("Abs", ["x"], []), lambda p, d: torch.abs(p["x"]), {}),
        "Softplus": ({"x": [B, 7]}, ("Softplus", ["x"], []), lambda p, d: F.softplus(p["x"]), {}),
        "Pow": ({"x": [B, 3]}, ("Pow", ["x"], [real("exponent", 3.0)]), lambda p, d: p["x"] ** 3, {}),
        # The mask dtrun draws at step 0 (seed SEED), computed here from its definition.
        "Dropout": ({"x": [B, 64]}, ("Dropout", ["x"], [real("ratio", 0.3)]),
                    lambda p, d: p["x"] * torch.from_numpy(dropout_scale(SEED, 0, dropout_key("out"), (B, 64), 0.3)),
                    {}),
        "Div_broadcast": ({"a": [B, 3, 4], "c": [4]}, ("Div", ["a", "c"], []), lambda p, d: p["a"] / p["c"], {}),
        "Conv": ({"x": [B, 2, 5, 5], "w": [3, 2, 3, 3], "b": [3]},
                 ("Conv", ["x", "w", "b"], [ints("stride", [2, 1]), ints("padding", [1, 1])]),
                 lambda p, d: F.conv2d(p["x"], p["w"], p["b"], stride=(2, 1), padding=1), {}),
        "MaxPool": ({"x": [B, 2, 4, 6]}, ("MaxPool", ["x"], [ints("kernel", [2, 2]), ints("stride", [2, 2])]),
                    lambda p, d: F.max_pool2d(p["x"], 2), {}),
        "Split": ({"x": [B, 9]}, [("Split", ["x"], [integer("axis", 1)], ["p0", "p1", "p2"]),
                                  ("Mul", ["p0", "p2"], [], ["out"])],
                  lambda p, d: p["x"][:, 0:3] * p["x"][:, 6:9], {}),
        # Pieces of different lengths, one unused (its gradient is zero), joined in another order.
        "Split_sizes_Concat": ({"x": [B, 9]},
                               [("Split", ["x"], [integer("axis", 1), ints("sizes", [2, 3, 4])], ["p0", "p1", "p2"]),
                                ("Concat", ["p2", "p0"], [integer("axis", -1)], ["out"])],
                               lambda p, d: torch.cat([p["x"][:, 5:9], p["x"][:, 0:2]], dim=-1), {}),
        "BatchNormalization": ({"x": [B, 3, 2, 2], "w": [3], "b": [3], "rm": [3], "rv": [3]},
                               ("BatchNormalization", ["x", "w", "b", "rm", "rv"],
                                [real("eps", 1e-5), real("momentum", 0.1)]),
                               lambda p, d: F.batch_norm(p["x"], p["rm"], p["rv"], p["w"], p["b"],
                                                         training=True, momentum=0.1, eps=1e-5), {}),
        "SoftmaxCrossEntropy": ({"logits": [B, 5]}, ("SoftmaxCrossEntropy", ["logits", "labels"], []),
                                lambda p, d: F.cross_entropy(p["logits"], d["labels"]), {"labels": ("i64", labels)}),
        # Rows labelled 2 add nothing; the op still divides by all rows (LabelFraction rescales).
        "SoftmaxCrossEntropy_ignore": ({"logits": [B, 5]},
                                       ("SoftmaxCrossEntropy", ["logits", "labels"], [integer("ignore_index", 2)]),
                                       lambda p, d: F.cross_entropy(p["logits"], d["labels"], ignore_index=2,
                                                                    reduction="sum") / B,
                                       {"labels": ("i64", labels)}),
        "NLLLoss": ({"x": [B, 5]}, ("NLLLoss", ["x", "labels"], []),
                    lambda p, d: F.nll_loss(p["x"], d["labels"]), {"labels": ("i64", labels)}),
        "NLLLoss_ignore": ({"x": [B, 5]}, ("NLLLoss", ["x", "labels"], [integer("ignore_index", 2)]),
                           lambda p, d: F.nll_loss(p["x"], d["labels"], ignore_index=2, reduction="sum") / B,
                           {"labels": ("i64", labels)}),
        # Class weights scale each row's term; the op still divides by all rows (LabelFraction
        # with the same weights is the weighted mean's divisor).
        "NLLLoss_weighted": ({"x": [B, 5], "cw": [5]}, ("NLLLoss", ["x", "labels", "cw"], [integer("ignore_index", 2)]),
                             lambda p, d: F.nll_loss(p["x"], d["labels"], weight=p["cw"], ignore_index=2,
                                                     reduction="sum") / B,
                             {"labels": ("i64", labels)}),
        "NLLLoss_per_row": ({"x": [B, 5], "cw": [5]},
                            [("NLLLoss", ["x", "labels", "cw"], [text("reduction", "none"), integer("ignore_index", 2)],
                              ["out"])],
                            lambda p, d: F.nll_loss(p["x"], d["labels"], weight=p["cw"], ignore_index=2,
                                                    reduction="none"),
                            {"labels": ("i64", labels)}),
        "NLLLoss_per_position": ({"x": [B, 3, 5]},
                                 [("NLLLoss", ["x", "ids"], [text("reduction", "none")], ["out"])],
                                 lambda p, d: F.nll_loss(p["x"].transpose(1, 2), d["ids"] % 5, reduction="none"),
                                 {"ids": ("i64", ids % 5)}),
    }


# Inputs that must be positive: logarithms, roots, divisors.
POSITIVE = {"Log": ["x"], "Sqrt": ["x"], "Reciprocal": ["x"], "Div_broadcast": ["c"], "NLLLoss_weighted": ["cw"],
            "NLLLoss_per_row": ["cw"]}

# Buffers: not trainable. BatchNorm's running statistics are updated by the forward pass; class
# weights stay.
BUFFERS = {"rm", "rv", "cw"}


def model_json(name, params, values, node, data, out_shape):
    if isinstance(node, tuple):
        op, inputs, attrs = node
        node = [(op, inputs, attrs, ["loss" if op in ("SoftmaxCrossEntropy", "NLLLoss") else "out"])]
    is_loss = node[-1][3] == ["loss"]
    graph_inputs = [{"name": k, "dtype": "i64", "shape": [-1] + list(v.shape[1:])} for k, (_, v) in data.items()]
    nodes = [{"name": f"{name}{i}", "op_type": op, "inputs": inputs, "outputs": outputs, "attributes": attrs}
             for i, (op, inputs, attrs, outputs) in enumerate(node)]
    if not is_loss:
        graph_inputs.append({"name": "target", "dtype": "f32", "shape": [-1] + list(out_shape[1:])})
        nodes.append({"name": "mse", "op_type": "MSELoss", "inputs": ["out", "target"], "outputs": ["loss"]})
    inits = [{"info": {"name": k, "shape": list(shape)}, "float_data": values[k].ravel().tolist(),
              "trainable": k not in BUFFERS} for k, shape in params.items()]
    return {"version": 1, "graph": {"inputs": graph_inputs, "initializers": inits, "nodes": nodes,
                                    "outputs": ["loss"], "loss": "loss"}}


def check(name, case, rng, work):
    params, node, forward, data = case
    values = {k: rng.uniform(-1, 1, shape).astype(np.float32) for k, shape in params.items()}
    for k in POSITIVE.get(name, ()):  # the op's domain, away from its singular point
        values[k] = np.abs(values[k]) + 0.5
    if "rv" in values:
        values["rv"] = np.abs(values["rv"]) + 0.5  # a variance
    tp = {k: torch.tensor(v.copy(), requires_grad=k not in BUFFERS) for k, v in values.items()}
    td = {k: torch.from_numpy(v.astype(np.int64)) for k, (_, v) in data.items()}
    out = forward(tp, td)
    target = rng.standard_normal(tuple(out.shape)).astype(np.float32) if out.dim() > 0 else None
    # dtrun visits the B rows in the order of epoch 0's permutation: feed PyTorch the same rows.
    perm = epoch_permutation(B, SEED, 0)
    d = os.path.join(work, name)
    os.makedirs(d)
    for k, (_, v) in data.items():
        np.save(os.path.join(d, f"{k}.npy"), v.astype(np.int64)[np.argsort(perm)])
    if target is not None:
        np.save(os.path.join(d, "target.npy"), target[np.argsort(perm)])
        loss = F.mse_loss(out, torch.from_numpy(target))
    else:
        loss = out
    loss.backward()
    with open(os.path.join(d, "m.json"), "w") as f:
        json.dump(model_json(name, params, values, node, data, tuple(out.shape)), f)
    run("flatc", "-b", "-o", d, SCHEMA, os.path.join(d, "m.json"))
    run(tool("dtc"), "compile", os.path.join(d, "m.dtm"), "-o", os.path.join(d, "m.dtp"), "--batch", B,
        "--optimizer", "sgd", "--lr", 1)
    run(tool("dtrun"), os.path.join(d, "m.dtp"), "--data", d, "--steps", 1, "--seed", SEED, "--log",
        os.path.join(d, "log.jsonl"), "--save", d)
    final = load_safetensors(os.path.join(d, "model.safetensors"))
    ours_loss = read_log(os.path.join(d, "log.jsonl"))[0]["loss"]
    loss_err = abs(ours_loss - loss.item()) / abs(loss.item())
    grad_err = stats_err = 0.0
    for k, v in values.items():
        if k in BUFFERS:  # PyTorch updated them in place during the forward pass
            ref = tp[k].detach().numpy()
            stats_err = max(stats_err, np.abs(final[k] - ref).max() / np.abs(ref).max())
            continue
        g = tp[k].grad.numpy()
        ours = v - final[k]  # SGD, lr 1: p' = p - g
        grad_err = max(grad_err, np.abs(ours - g).max() / max(np.abs(g).max(), 1e-6))
    print(f"{name:22s} loss rel err {loss_err:.2e}  grad rel err {grad_err:.2e}"
          + (f"  running stats rel err {stats_err:.2e}" if BUFFERS & set(values) else ""))
    assert stats_err <= 1e-5, f"{name}: running statistics mismatch {stats_err}"
    assert loss_err <= 1e-5, f"{name}: loss {ours_loss} vs {loss.item()}"
    assert grad_err <= 1e-4, f"{name}: gradient mismatch {grad_err}"


def main():
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as work:
        for name, case in cases(rng).items():
            check(name, case, rng, work)
    print("op parity: ok")


if __name__ == "__main__":
    main()
