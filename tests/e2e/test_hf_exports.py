"""Hugging Face models as users export them: transformers' own GPT2LMHeadModel,
Qwen2ForCausalLM, LlamaForCausalLM (grouped-query attention), MistralForCausalLM, PhiForCausalLM (partial rotary,
parallel attention and MLP) and ViTForImageClassification (tiny configs, no dropout),
exported unedited by torch.onnx.export in training mode with the loss inside
(`model(input_ids, labels=labels).loss`: the labels shifted by a Cast and a Slice on int64 data;
Llama's rotary tables computed from a frequency buffer by MatMul, Cos and Sin, folded when
compiling); GPT-2 and BERT (masked LM) on right-padded batches, their attention_mask an int64
input cast to float inside. dtc trains each 10 AdamW steps against transformers training the
same module on the same batches: losses within 1e-5 relative, weights 1e-4; dp=2, tp=2 (the
default preset: GPT-2's Conv1D layout, Qwen2's and Llama's blocks by structure) and pp=2 equal one
device (1e-5). Qwen2's, Llama's and Mistral's RMSNorm, SwiGLU and rotary embeddings, spelled out by the exporter,
train as dtc's fused ops; the causal LMs' attention (an additive causal mask in eager
attention) trains as flash-style attention under --fused-attention, equal to the unfused step;
grouped-query attention (Qwen2 and Llama 4 over 2 heads, Mistral 8 over 2) reads its key/value
heads unrepeated, on one device, on tp=2 (from the device's own projections, no transposes) and
on cp=2.

Runs under scripts/setup.sh's virtual environment (.deps/hf-venv)."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from transformers import (BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          MistralConfig, MistralForCausalLM, PhiConfig,
                          PhiForCausalLM, Qwen2Config, Qwen2ForCausalLM, ViTConfig,
                          ViTForImageClassification)

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import tool  # noqa: E402
from test_onnx_parity import BATCH, compare, dtc_run, export, same_initial_weights, torch_reference  # noqa: E402

V, T, CLASSES = 64, 8, 5


class WithLoss(torch.nn.Module):
    """What a training script calls: the model's own loss on its named inputs."""

    def __init__(self, model, names):
        super().__init__()
        self.m, self.names = model, names

    def forward(self, *inputs):
        return self.m(**dict(zip(self.names, inputs))).loss


def gpt2():
    return GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=T, n_embd=32, n_layer=2, n_head=4,
                                      attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0))


def cases(rng, n):
    """(name, model, its inputs by name, compile flags): causal LMs shift the labels themselves; a padded batch
    masks its padding (attention_mask 0, labels -100); ViT classifies."""
    ids = rng.integers(0, V, (n, T)).astype(np.int64)
    lm = {"input_ids": ids, "labels": ids}
    # Right padding: each sequence keeps 4 to 8 tokens.
    keep = rng.integers(4, T + 1, n)
    mask = (np.arange(T)[None, :] < keep[:, None]).astype(np.int64)
    padded = {"input_ids": ids, "attention_mask": mask, "labels": np.where(mask == 1, ids, -100)}
    yield "gpt2", gpt2(), lm, []
    yield "gpt2-padded", gpt2(), padded, []
    # BERT's word embedding has padding_idx 0 (its row never trains), which the export drops:
    # --padding-idx gives it back.
    yield "bert-padded", BertForMaskedLM(BertConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
                                                    num_hidden_layers=2, num_attention_heads=4,
                                                    max_position_embeddings=T, hidden_dropout_prob=0.0,
                                                    attention_probs_dropout_prob=0.0)), padded, [
        "--padding-idx", "m.bert.embeddings.word_embeddings.weight=0"]
    yield "qwen2", Qwen2ForCausalLM(Qwen2Config(vocab_size=V, hidden_size=32, intermediate_size=64,
                                                num_hidden_layers=2, num_attention_heads=4,
                                                num_key_value_heads=2, max_position_embeddings=T,
                                                attn_implementation="eager")), lm, []
    yield "llama", LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
                                                num_hidden_layers=2, num_attention_heads=4,
                                                num_key_value_heads=2, max_position_embeddings=T,
                                                attn_implementation="eager")), lm, []
    # Mistral: Llama's blocks; its sliding-window mask is built with bitwise_or, which torch 1.13's
    # exporter cannot write, so the window is off (a window at least the context is the same mask).
    # Groups of 4 query heads per key/value head (Llama 3's and Mistral 7B's ratio).
    yield "mistral", MistralForCausalLM(MistralConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
                                                      num_hidden_layers=2, num_attention_heads=8,
                                                      num_key_value_heads=2, max_position_embeddings=T,
                                                      sliding_window=None, attn_implementation="eager")), lm, []
    # Phi: rotary embeddings on part of each head, attention and MLP side by side.
    yield "phi", PhiForCausalLM(PhiConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
                                          num_hidden_layers=2, num_attention_heads=4,
                                          max_position_embeddings=T, attn_implementation="eager",
                                          resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0)), lm, []
    # ViT: patches by a convolution, a class token, a classifier on it.
    vit = ViTForImageClassification(ViTConfig(image_size=8, patch_size=4, num_channels=3, hidden_size=32,
                                              intermediate_size=64, num_hidden_layers=2,
                                              num_attention_heads=4, num_labels=CLASSES,
                                              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    yield "vit", vit, {"pixel_values": rng.standard_normal((n, 3, 8, 8)).astype(np.float32),
                       "labels": rng.integers(0, CLASSES, n).astype(np.int64)}, []


def without_noise(name, ours, ref):
    """`ref` without the tensors both runs leave at rounding noise: attention's key bias has no
    gradient (softmax ignores what it adds to every score), and a relative error of noise only
    magnifies it."""
    kept = {}
    for k, v in ref.items():
        if np.abs(v).max() < 1e-6:
            assert np.abs(ours[k]).max() < 1e-6, f"{name}: {k} moved from zero"
        else:
            kept[k] = v
    return kept


def op_counts(plan):
    """The training step's fused Llama blocks and what they replace, by kind."""
    info = json.loads(subprocess.run([tool("dtc"), "inspect", plan, "--json"], check=True, capture_output=True,
                                     text=True).stdout)
    step = next(f for f in info["functions"] if f["name"] == "train_step")
    return {k: n for k, n in step["op_counts"].items() if k in ("rms_norm", "swiglu", "rotary", "pow", "sigmoid", "silu")}


def attention_ops(plan):
    """The training step's attention ops, by kind."""
    info = json.loads(subprocess.run([tool("dtc"), "inspect", plan, "--json"], check=True, capture_output=True,
                                     text=True).stdout)
    step = next(f for f in info["functions"] if f["name"] == "train_step")
    return {k: n for k, n in step["op_counts"].items()
            if k in ("causal_attention", "causal_attention_qkv", "softmax", "causal_softmax", "broadcast",
                     "transpose")}


def main():
    torch.manual_seed(0)
    torch.set_num_threads(2)
    rng = np.random.default_rng(4)
    with tempfile.TemporaryDirectory() as work:
        n = 48
        flags = ["--optimizer", "adamw", "--lr", "0.003", "--eps", "1e-4"]
        for name, model, inputs, extra in cases(rng, n):
            torch.manual_seed(0)
            names = list(inputs)
            module = WithLoss(model, names)
            data = os.path.join(work, f"{name}-data")
            os.makedirs(data)
            for k, v in inputs.items():
                np.save(os.path.join(data, f"{k}.npy"), v)
            path = os.path.join(work, f"{name}.onnx")
            export(module, tuple(torch.from_numpy(v[:2]) for v in inputs.values()), path, names, ["loss"], names)
            init, final, losses = dtc_run(path, work, name, flags + extra, data)
            same_initial_weights(name, module, init)
            opt = torch.optim.AdamW(module.parameters(), lr=0.003, eps=1e-4)
            loss_of = lambda rows: module(*(torch.from_numpy(v[rows]) for v in inputs.values()))  # noqa: E731
            ref_losses, ref_final = torch_reference(module, opt, n, loss_of)
            compare(f"{name} against transformers", losses, ref_losses, final,
                    without_noise(name, final, ref_final), 1e-4)
            if name in ("qwen2", "llama", "mistral"):
                fused = op_counts(os.path.join(work, f"{name}.dtp"))
                print(f"{name}: {fused}")
                assert fused == {"rms_norm": 5, "swiglu": 2, "rotary": 4}, fused
            if name in ("gpt2", "qwen2", "llama", "mistral", "phi"):
                # The eager attention's additive causal mask is recognised: flash-style attention
                # (CUDA's default) takes the export's attention whole.
                _, final2, losses2 = dtc_run(path, work, f"{name}-fused", flags + extra + ["--fused-attention"], data)
                fused = attention_ops(os.path.join(work, f"{name}-fused.dtp"))
                fused.pop("transpose", None)
                # Grouped-query attention reads its key/value heads as they are: the export's
                # repeat_kv (an expand to every query head) is gone.
                assert sum(fused.values()) == 2 and set(fused) <= {"causal_attention", "causal_attention_qkv"}, fused
                compare(f"{name} fused attention against unfused", losses2, losses, final2,
                        without_noise(name, final2, final), 1e-5)
            if name in ("qwen2", "llama", "mistral"):
                # Each tensor-parallel device keeps its share of the key/value heads, grouped, and
                # attention reads q, k and v where the device's projections wrote them: the
                # export's transposes are gone with the head-major layout.
                _, final2, losses2 = dtc_run(path, work, f"{name}-fused-tp2",
                                             flags + extra + ["--fused-attention", "--mesh", "tp=2"], data, devices=2)
                fused = attention_ops(os.path.join(work, f"{name}-fused-tp2.dtp"))
                assert fused == {"causal_attention_qkv": 2}, fused
                compare(f"{name} fused attention tp=2 against one device", losses2, losses, final2,
                        without_noise(name, final2, final), 1e-5)
                # Context parallelism: each of 2 devices holds half of every sequence (the rotary
                # tables and the mask the export computes split with it), in order: the export
                # shifts the labels by a slice along the sequence, which the load-balanced order
                # would break (refused in one line).
                _, final2, losses2 = dtc_run(path, work, f"{name}-fused-cp2",
                                             flags + extra + ["--fused-attention", "--mesh", "cp=2", "--no-cp-load-balance"],
                                             data, devices=2)
                compare(f"{name} fused attention cp=2 against one device", losses2, losses, final2,
                        without_noise(name, final2, final), 1e-5)
            for mesh, more in (("dp=2", []), ("tp=2", []), ("pp=2", ["--microbatches", "2"])):
                _, final2, losses2 = dtc_run(path, work, f"{name}-{mesh}", flags + extra + ["--mesh", mesh] + more,
                                             data, devices=2)
                compare(f"{name} {mesh} against one device", losses2, losses, final2,
                        without_noise(name, final2, final), 1e-5)
        # --padding-idx's bad input: one line naming the flag.
        bert = os.path.join(work, "bert-padded.onnx")
        table = "m.bert.embeddings.word_embeddings.weight"
        for spec, needle in ((f"{table}=999", "the table has 64 rows"),
                             ("nosuch=0", "no 2-D float initializer (an embedding table) has that name"),
                             (table, "--padding-idx wants TABLE=ROW")):
            out = subprocess.run([tool("dtc"), "compile", bert, "-o", os.path.join(work, "x.dtp"), "--batch", "8",
                                  "--padding-idx", spec], capture_output=True, text=True)
            lines = out.stderr.strip().splitlines()
            assert out.returncode == 2 and len(lines) == 1 and needle in lines[0], out.stderr
            print(f"refused: {lines[0]}")
    assert BATCH == 8
    print("hf exports: ok")


if __name__ == "__main__":
    main()
