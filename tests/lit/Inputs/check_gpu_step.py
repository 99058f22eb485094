"""What GPT-2 124M's bf16 CUDA step must hold for the GPU's speed, from `dtc inspect --json`
on the measured H100 profile: its step count, casts (per-tensor and multi-tensor calls),
transposes, the optimizer's kernel launches (a multi-tensor update launches once per 48 tensors,
runtime/cuda/kernels/optimizers.cu), and the predicted step."""
import json
import math
import sys

info = json.load(open(sys.argv[1]))
step = next(f for f in info["functions"] if f["name"] == "train_step")
ops = step["op_counts"]
launches = ops.get("adamw_update", 0) + sum(
    math.ceil(len(s["outputs"]) / 3 / 48) for s in step["steps"] if s["op"] == "multi_tensor_adamw")
casts = ops.get("cast", 0) + ops.get("multi_tensor_cast", 0)
predicted = info["prediction"]["step_s"]
print(f"steps {len(step['steps'])}, casts {casts}, transposes {ops.get('transpose', 0)}, "
      f"optimizer launches {launches}, predicted {predicted * 1e3:.2f} ms on {info['prediction']['profile']}")
print("steps <= 400:", len(step["steps"]) <= 400)
print("casts <= 30:", casts <= 30)
print("transposes:", ops.get("transpose", 0) + ops.get("split", 0) + ops.get("concat", 0))
print("optimizer launches <= 8:", launches <= 8)
print("predicted step <= 20 ms:", predicted <= 0.020)
