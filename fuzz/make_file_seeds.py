"""Seeds for the checkpoint and Hugging Face file fuzzers (scripts/fuzz.sh --make-seeds):
index.json of checkpoints of several layouts (fuzz/corpus/index), the headers of their rank
files and of a --save file, each after the size of its data section as 8 little-endian bytes
(fuzz/corpus/safetensors), and a Hugging Face folder's weight map and config after the byte
that picks the reader (fuzz/corpus/hf)."""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

corpus, tmp = sys.argv[1], sys.argv[2]
dtc, dtrun = os.environ["DTC"], os.environ["DTRUN"]
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]
for target in ("index", "safetensors", "hf"):
    shutil.rmtree(os.path.join(corpus, target), ignore_errors=True)
    os.makedirs(os.path.join(corpus, target))

data = os.path.join(tmp, "seed-data")
os.makedirs(data, exist_ok=True)
rng = np.random.default_rng(0)
np.save(os.path.join(data, "input.npy"), rng.standard_normal((16, 4)).astype(np.float32))
np.save(os.path.join(data, "target.npy"), rng.integers(0, 2, 16).astype(np.int64))
tokens = os.path.join(tmp, "seed-tokens.bin")
header = np.zeros(256, np.int32)
header[:3] = [20240520, 1, 4000]
with open(tokens, "wb") as f:
    f.write(header.tobytes() + rng.integers(0, 8, 4000).astype(np.uint16).tobytes())
mlp, gpt = os.path.join(tmp, "seed-mlp.dtm"), os.path.join(tmp, "seed-gpt.dtm")
subprocess.run([dtc, "zoo", "mlp", "--input", "4", "--hidden", "4", "--classes", "2", "-o", mlp], check=True)
subprocess.run([dtc, "zoo", "gpt", "--vocab", "8", "--ctx", "4", "--layers", "2", "--heads", "2", "--embd", "4",
                "-o", gpt], check=True)


def safetensors_seed(path, name):
    raw = open(path, "rb").read()
    length = struct.unpack("<Q", raw[:8])[0]
    text = raw[8:8 + length]
    with open(os.path.join(corpus, "safetensors", name), "wb") as f:
        f.write(struct.pack("<Q", len(raw) - 8 - length) + text)


layouts = [("mlp-sgd", mlp, data, 8, ["--optimizer", "sgd", "--momentum", "0.9"]),
           ("mlp-fp16", mlp, data, 8, ["--precision", "fp16"]),
           ("gpt-dp2-tp2-zero1", gpt, tokens, 4, ["--optimizer", "adamw", "--mesh", "dp=2,tp=2", "--zero", "1"]),
           ("gpt-pp2", gpt, tokens, 4, ["--mesh", "pp=2", "--microbatches", "2"]),
           ("gpt-dp2-zero3", gpt, tokens, 4, ["--optimizer", "adamw", "--mesh", "dp=2", "--zero", "3"])]
for name, model, inputs, batch, flags in layouts:
    plan = os.path.join(tmp, f"seed-{name}.dtp")
    subprocess.run([dtc, "compile", model, "-o", plan, "--batch", str(batch), *flags], check=True,
                   capture_output=True)
    devices = 1
    if "--mesh" in flags:
        for axis in flags[flags.index("--mesh") + 1].split(","):
            devices *= int(axis.split("=")[1])
    ckpt, save = os.path.join(tmp, f"seed-{name}-ck"), os.path.join(tmp, f"seed-{name}-save")
    cmd = [dtrun, plan, "--data", inputs, "--steps", "1", "--checkpoint", ckpt, "--save", save]
    subprocess.run((MPIRUN + [str(devices)] + cmd) if devices > 1 else cmd, check=True, capture_output=True)
    step = os.path.join(ckpt, "step-1")
    shutil.copy(os.path.join(step, "index.json"), os.path.join(corpus, "index", f"{name}.json"))
    for k, f in enumerate(json.load(open(os.path.join(step, "index.json")))["files"][:2]):
        safetensors_seed(os.path.join(step, f["name"]), f"{name}-rank{k}")
    safetensors_seed(os.path.join(save, "model.safetensors"), f"{name}-save")

# Hugging Face: a sharded Llama's weight map, and the config the fuzzer compares against (seeds
# must be accepted: ctest replays them as valid).
weight_map = {"metadata": {"total_size": 4096},
              "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                             "model.layers.0.self_attn.q_proj.weight": "model-00001-of-00002.safetensors",
                             "model.norm.weight": "model-00002-of-00002.safetensors",
                             "lm_head.weight": "model-00002-of-00002.safetensors"}}
config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 32,
          "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "max_position_embeddings": 16, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
          "tie_word_embeddings": False, "attention_bias": False, "hidden_act": "silu", "torch_dtype": "float32"}
with open(os.path.join(corpus, "hf", "weight-map"), "wb") as f:
    f.write(b"\x00" + json.dumps(weight_map, indent=2).encode())
with open(os.path.join(corpus, "hf", "config"), "wb") as f:
    f.write(b"\x01" + json.dumps(config, indent=2).encode())
