"""A measured profile's attention curves and per-type element costs reach the prediction: the
same bf16 plan predicted with the profile, and with copies that drop the attention curves (then
attention runs at the GEMM rate), the fused projection's attention curves (then it runs at the
unpacked attention's rate) or the casts' costs (then casts cost their bytes), must price
attention and cast differently, and nothing else."""
import copy
import json
import os
import subprocess
import sys

dtc, profile_path, plan, work = sys.argv[1:5]
profile = json.load(open(profile_path))


def kernels(p, name):
    path = os.path.join(work, name + ".json")
    json.dump(p, open(path, "w"))
    out = subprocess.run([dtc, "inspect", plan, "--profile", path, "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["prediction"]["stages"][0]["kernels_s"]


whole = kernels(profile, "whole")
no_attention = copy.deepcopy(profile)
for key in ("attention_flops_per_s", "attention_grad_flops_per_s", "qkv_attention_flops_per_s",
            "qkv_attention_grad_flops_per_s", "attention_head_dim_factor",
            "attention_grad_head_dim_factor"):
    no_attention.pop(key, None)
gemm_rate = kernels(no_attention, "no-attention")
# Attention on the fused projection has curves of its own (the kernels that run it may be
# others); without them it is priced as the unpacked attention.
no_qkv = copy.deepcopy(profile)
for key in ("qkv_attention_flops_per_s", "qkv_attention_grad_flops_per_s"):
    no_qkv.pop(key)
unpacked_rate = kernels(no_qkv, "no-qkv")
# The curves are measured at head dimension 64; the factors scale them to the plan's head
# dimension: halved everywhere, the unpacked attention's steps are priced slower.
halved = copy.deepcopy(profile)
for key in ("attention_head_dim_factor", "attention_grad_head_dim_factor"):
    for points in halved[key].values():
        for point in points:
            point[1] /= 2
slower = kernels(halved, "halved-head-dim")
# A cast is priced at the larger of its measured per-element cost and its bytes at the memory
# bandwidth; calibrated on a busy machine, the bandwidth can come out low enough that the bytes
# win. Tenfold element costs keep the measured ones the price, so dropping them must show.
costly = copy.deepcopy(profile)
for key in ("cast", "cast@bf16"):
    costly["element_s"][key] *= 10
measured = kernels(costly, "costly-cast")
no_cast = copy.deepcopy(profile)
for key in ("cast", "cast@bf16"):
    no_cast["element_s"].pop(key)
bytes_only = kernels(no_cast, "no-cast")


def only_differs(a, b, names):
    return all((a[k] != b[k]) == (k in names) for k in a)


print("causal_attention priced at the attention curve:",
      only_differs(whole, gemm_rate, {"causal_attention", "causal_attention_grad",
                                      "causal_attention_qkv", "causal_attention_qkv_grad"}))
print("cast priced at its measured cost:", only_differs(measured, bytes_only, {"cast"}))
print("attention on the fused projection priced at its own curve:",
      only_differs(whole, unpacked_rate, {"causal_attention_qkv", "causal_attention_qkv_grad"}))
print("attention priced by its head dimension:",
      only_differs(whole, slower, {"causal_attention", "causal_attention_grad"})
      and all(slower[k] > whole[k] for k in ("causal_attention", "causal_attention_grad")
              if k in whole))
