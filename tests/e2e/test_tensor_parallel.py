"""Tensor parallelism from user annotations (`--mesh tp=N --shard PATTERN=SPEC`): Megatron's
column-then-row split of the MLPs and of attention (by heads), alone and on a dp x tp mesh with
ZeRO-1, must train exactly as the single-device plan: losses and final weights within 1e-5 (as test_data_parallel.py).
Propagation derives every other sharding (biases, activations, gradients, optimizer state)
from the weight annotations; the partitioner inserts the row-parallel all-reduces."""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from test_data_parallel import compare, make_models  # noqa: E402

MLP_TP = ["--shard", "fc0.weight=tp,-", "--shard", "fc0.bias=tp", "--shard", "fc1.weight=-,tp"]
GPT_MLP_TP = ["--shard", "transformer.h.*.mlp.c_fc.weight=tp,-",
              "--shard", "transformer.h.*.mlp.c_fc.bias=tp",
              "--shard", "transformer.h.*.mlp.c_proj.weight=-,tp"]
# Megatron: attention split by heads too. The fused q/k/v weight [3C, C] is three chunks (q, k,
# v), each split over tp by rows (heads): "3xtp".
GPT_MEGATRON = GPT_MLP_TP + ["--shard", "transformer.h.*.attn.c_attn.weight=3xtp,-",
                             "--shard", "transformer.h.*.attn.c_attn.bias=3xtp",
                             "--shard", "transformer.h.*.attn.c_proj.weight=-,tp"]


def configs(shard):
    return [("tp2", ["--mesh", "tp=2"] + shard, 2),
            ("tp4", ["--mesh", "tp=4"] + shard, 4),
            ("dp2-tp2", ["--mesh", "dp=2,tp=2"] + shard, 4),
            ("tp2-dp2-zero1", ["--mesh", "tp=2,dp=2", "--zero", 1] + shard, 4),
            ("dp2-tp2-zero2", ["--mesh", "dp=2,tp=2", "--zero", 2] + shard, 4),
            ("dp2-tp2-zero3", ["--mesh", "dp=2,tp=2", "--zero", 3] + shard, 4)]


def main():
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as work:
        m = make_models(work, rng)
        compare("mlp", m["mlp"], work, 32, ["--optimizer", "adamw", "--lr", 2e-3, "--eps", 1e-4],
                m["data"], 6, 3, configs(MLP_TP), ("--eval", m["data"]))

        # SGD: AdamW's division by sqrt(v) + eps turns the rounding noise of near-zero bias
        # gradients (sums that cancel) into lr-sized differences, which says nothing about TP.
        sgd = ["--optimizer", "sgd", "--lr", 0.05, "--momentum", 0.9]
        compare("gpt-mlp-tp", m["gpt"], work, 8, sgd, m["tokens"], 6, 5, configs(GPT_MLP_TP)[:1])
        compare("gpt", m["gpt"], work, 8, sgd, m["tokens"], 6, 5,
                configs(GPT_MEGATRON) + [("tp2-preset", ["--mesh", "tp=2", "--no-vocab-parallel"], 2),
                                         ("tp2-sp", ["--mesh", "tp=2", "--sequence-parallel"], 2),
                                         ("dp2-tp2-sp", ["--mesh", "dp=2,tp=2", "--sequence-parallel"], 4),
                                         ("tp2-vocab", ["--mesh", "tp=2", "--vocab-parallel"], 2),
                                         ("tp4-vocab-sp", ["--mesh", "tp=4", "--vocab-parallel",
                                                           "--sequence-parallel"], 4),
                                         ("dp2-tp2-vocab-zero1", ["--mesh", "dp=2,tp=2",
                                                                  "--vocab-parallel", "--zero", 1], 4),
                                         ("dp2-tp2-preset-zero3", ["--mesh", "dp=2,tp=2", "--zero", 3], 4)])

        # ConvNet: layer 1 split by output channels (its BatchNorm follows: per-channel
        # statistics need no communication), layer 2 by input channels (row-parallel): one
        # all-reduce of layer 2's output per step.
        conv_tp = ["--shard", "layer1.0.weight=tp,-,-,-", "--shard", "layer1.0.bias=tp",
                   "--shard", "layer2.0.weight=-,tp,-,-"]
        compare("convnet", m["convnet"], work, 16, ["--optimizer", "sgd", "--lr", 0.02, "--momentum", 0.9],
                m["cdata"], 4, 7, [("tp2", ["--mesh", "tp=2"] + conv_tp, 2),
                                   ("dp2-tp2", ["--mesh", "dp=2,tp=2"] + conv_tp, 4)], ("--eval", m["cdata"]))
    print("tensor parallel parity: ok")


if __name__ == "__main__":
    main()
