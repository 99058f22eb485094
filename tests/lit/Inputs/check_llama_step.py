"""What a Llama-family bf16 CUDA step must hold for the GPU's speed, from `dtc inspect --json` on
the measured H100 profile: no k/v repeat (broadcast) and no transposes, at most 2 casts outside
the multi-tensor kernels, one multi-tensor AdamW, attention read from the projections (on cuDNN's
path for 16-bit operands) once a layer each way, the predicted share of peak FLOP/s, and the
device memory the plan asks for (arena, state and workspace) against an 80 GB GPU."""
import json
import sys

info = json.load(open(sys.argv[1]))
layers = int(sys.argv[2])
step = next(f for f in info["functions"] if f["name"] == "train_step")
ops = step["op_counts"]
prediction = info["prediction"]
memory = step["arena_bytes"] + info["state_bytes"] + info["workspace_bytes"]
print(f"steps {len(step['steps'])}, casts {ops.get('cast', 0)}, transposes {ops.get('transpose', 0)}, "
      f"predicted {prediction['step_s'] * 1e3:.0f} ms ({prediction['utilisation']:.0%} of peak), "
      f"{memory / 1e9:.1f} GB")
print("k/v repeats:", ops.get("broadcast", 0))
print("transposes:", ops.get("transpose", 0))
print("casts <= 2:", ops.get("cast", 0) <= 2)
print("optimizer:", ops.get("multi_tensor_adamw", 0), "multi-tensor,", ops.get("adamw_update", 0), "per tensor")
print("attention on the projections:", ops.get("causal_attention_qkv", 0) == layers and
      ops.get("causal_attention_qkv_grad", 0) == layers and ops.get("causal_attention", 0) == 0)
print(">= 40% of peak:", prediction["utilisation"] >= 0.40)
print("fits in 80 GB:", memory <= 80e9)
