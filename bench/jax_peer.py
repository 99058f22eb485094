"""The JAX (XLA on the CPU) side of the CPU benchmarks: the same model, initial weights (dtrun's,
from a safetensors file under PyTorch's names), batches and AdamW (as torch.optim.AdamW
defines it) as dtrun and PyTorch, the whole step one jitted function. Runs under the virtual
environment bench/jax_env.sh makes; the caller pins its threads (taskset). Prints one JSON
object: the first step's loss and the median milliseconds of the timed steps.

  jax_peer.py --model mlp|convnet|gpt --weights F.safetensors --batches F.npz --warmup W
              --steps S [--gpt L,H,C,T,V]
The npz holds, for mlp and convnet, x [N, 784], y [N] and idx [W+S, B] (the rows of each step);
for gpt, tokens [N] and offsets [W+S, B] (each sequence's first token)."""
import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
import safetensors_np  # noqa: E402

LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 1e-3, 0.9, 0.999, 1e-8, 0.01


def cross_entropy(logits, labels):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=-1))


def linear(p, name, x, bias=True):
    y = x @ p[name + ".weight"].T  # PyTorch's [out, in]
    return y + p[name + ".bias"] if bias else y


def mlp_loss(p, x, y):
    h = jax.nn.relu(linear(p, "fc0", x))
    h = jax.nn.relu(linear(p, "fc1", h))
    return cross_entropy(linear(p, "fc2", h), y)


def conv_block(p, name, x):
    """Conv2d(5×5, padding 2) → BatchNorm2d (training: the batch's statistics, eps 1e-5) → ReLU →
    MaxPool2d(2), on NCHW with PyTorch's OIHW weights."""
    x = jax.lax.conv_general_dilated(x, p[name + ".0.weight"], (1, 1), ((2, 2), (2, 2)),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    x = x + p[name + ".0.bias"][None, :, None, None]
    mean = x.mean((0, 2, 3), keepdims=True)
    var = ((x - mean) ** 2).mean((0, 2, 3), keepdims=True)
    x = (x - mean) / jnp.sqrt(var + 1e-5) * p[name + ".1.weight"][None, :, None, None] + \
        p[name + ".1.bias"][None, :, None, None]
    x = jax.nn.relu(x)
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def convnet_loss(p, x, y):
    h = conv_block(p, "layer2", conv_block(p, "layer1", x.reshape(-1, 1, 28, 28)))
    return cross_entropy(linear(p, "fc", h.reshape(h.shape[0], -1)), y)


def layer_norm(p, name, x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]


def gpt_loss(p, idx, tgt, layers, heads):
    b, t = idx.shape
    x = p["transformer.wte.weight"][idx] + p["transformer.wpe.weight"][:t]
    c = x.shape[-1]
    mask = jnp.tril(jnp.ones((t, t), dtype=bool))
    for i in range(layers):
        pre = f"transformer.h.{i}."
        qkv = linear(p, pre + "attn.c_attn", layer_norm(p, pre + "ln_1", x))
        q, k, v = (z.reshape(b, t, heads, c // heads).transpose(0, 2, 1, 3) for z in jnp.split(qkv, 3, -1))
        scores = jnp.where(mask, q @ k.transpose(0, 1, 3, 2) / np.sqrt(c // heads), -jnp.inf)
        y = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, t, c)
        x = x + linear(p, pre + "attn.c_proj", y)
        h = jax.nn.gelu(linear(p, pre + "mlp.c_fc", layer_norm(p, pre + "ln_2", x)), approximate=True)
        x = x + linear(p, pre + "mlp.c_proj", h)
    logits = layer_norm(p, "transformer.ln_f", x) @ p["transformer.wte.weight"].T  # tied head
    return cross_entropy(logits.reshape(b * t, -1), tgt.reshape(-1))


def adamw(params, grads, m, v, step):
    """torch.optim.AdamW: decoupled decay, then the bias-corrected Adam step."""
    def one(p, g, m, v):
        p = p * (1 - LR * WEIGHT_DECAY)
        m = BETA1 * m + (1 - BETA1) * g
        v = BETA2 * v + (1 - BETA2) * g * g
        denom = jnp.sqrt(v) / jnp.sqrt(1 - BETA2 ** step) + EPS
        return p - (LR / (1 - BETA1 ** step)) * m / denom, m, v
    out = {k: one(params[k], grads[k], m[k], v[k]) for k in params}
    return ({k: o[0] for k, o in out.items()}, {k: o[1] for k, o in out.items()},
            {k: o[2] for k, o in out.items()})


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--model", choices=("mlp", "convnet", "gpt"), required=True)
    a.add_argument("--weights", required=True)
    a.add_argument("--batches", required=True)
    a.add_argument("--warmup", type=int, required=True)
    a.add_argument("--steps", type=int, required=True)
    a.add_argument("--gpt", default="")
    a = a.parse_args()
    weights = safetensors_np.load(a.weights)
    data = np.load(a.batches)
    if a.model in ("mlp", "convnet"):
        # BatchNorm's running statistics are buffers, not trained (the loss uses the batch's).
        params = {k: jnp.asarray(v) for k, v in weights.items() if "running_" not in k}
        loss_fn = mlp_loss if a.model == "mlp" else convnet_loss
        x, y = data["x"], data["y"]
        batch = [(jnp.asarray(x[i]), jnp.asarray(y[i])) for i in data["idx"]]
    else:
        layers, heads, _, t, _ = (int(s) for s in a.gpt.split(","))
        params = {k: jnp.asarray(v) for k, v in weights.items() if k != "lm_head.weight"}  # tied
        loss_fn = lambda p, i, g: gpt_loss(p, i, g, layers, heads)  # noqa: E731
        tokens = data["tokens"]
        batch = [(jnp.asarray(np.stack([tokens[o:o + t] for o in offs]).astype(np.int32)),
                  jnp.asarray(np.stack([tokens[o + 1:o + t + 1] for o in offs]).astype(np.int32)))
                 for offs in data["offsets"]]

    @jax.jit
    def train_step(params, m, v, step, inputs, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, inputs, targets)
        params, m, v = adamw(params, grads, m, v, step)
        return params, m, v, loss

    m = {k: jnp.zeros_like(p) for k, p in params.items()}
    v = {k: jnp.zeros_like(p) for k, p in params.items()}
    times, first = [], None
    for step, (inputs, targets) in enumerate(batch[:a.warmup + a.steps]):
        t0 = time.perf_counter()
        params, m, v, loss = train_step(params, m, v, jnp.float32(step + 1), inputs, targets)
        loss.block_until_ready()
        times.append(time.perf_counter() - t0)
        if first is None:
            first = float(loss)
    print(json.dumps({"first_loss": first, "ms": 1000.0 * float(np.median(times[a.warmup:])),
                      "jax": jax.__version__}))


if __name__ == "__main__":
    main()
