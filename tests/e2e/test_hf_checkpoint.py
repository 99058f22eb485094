"""Hugging Face checkpoints in and out: a folder transformers' GPT2LMHeadModel or
LlamaForCausalLM.save_pretrained wrote (one model.safetensors, or shards with
model.safetensors.index.json) starts a `dtc zoo gpt --layout hf` or `dtc zoo llama` run with
`dtrun --init DIR`; `dtrun --save DIR --format hf` writes config.json and
model.safetensors that from_pretrained loads.

- round trip, 0 steps: transformers' model -> --init -> --save --format hf -> from_pretrained:
  logits equal (1e-6 relative to their largest);
- --max-shard-size: shards and their index as save_pretrained writes them (for Llama, each
  tensor in the same file), that from_pretrained loads; a later save into the folder leaves
  none of the earlier one's weight files;
- after 10 AdamW steps from it: the saved folder's logits in transformers equal dtc's own
  (--predict over the same inputs);
- bad input: a folder whose config.json disagrees with the model, a missing shard, a plan whose
  model carries no config under --format hf: one-line errors naming the setting or the file.

Runs under scripts/setup.sh's virtual environment (.deps/hf-venv)."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import expect_error, relative, run, tool, write_tokens  # noqa: E402

V, T, L, H, K, C, FFN = 64, 16, 2, 4, 2, 32, 96


def config():
    return LlamaConfig(vocab_size=V, hidden_size=C, intermediate_size=FFN, num_hidden_layers=L,
                       num_attention_heads=H, num_key_value_heads=K, max_position_embeddings=T,
                       rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                       attn_implementation="eager")


def logits_of(model, idx):
    with torch.no_grad():
        return model(input_ids=torch.from_numpy(idx)).logits.numpy()


def round_trip(work, rng, name, cls, source, zoo, idx):
    """transformers' checkpoint -> --init -> 0 steps -> --save --format hf -> from_pretrained, from one
    file and from shards; then 10 AdamW steps from it against dtc's own logits. Returns the plan."""
    path = lambda f: os.path.join(work, f"{name}-{f}")  # noqa: E731
    source.save_pretrained(path("hf"), safe_serialization=True)
    source.save_pretrained(path("hf-sharded"), safe_serialization=True, max_shard_size="40KB")
    shards = sorted(f for f in os.listdir(path("hf-sharded")) if f.endswith(".safetensors"))
    assert len(shards) > 1 and os.path.exists(path("hf-sharded/model.safetensors.index.json")), shards
    expected = logits_of(source, idx)
    run(tool("dtc"), "zoo", *zoo, "-o", path("model.dtm"))
    plan = path("model.dtp")
    run(tool("dtc"), "compile", path("model.dtm"), "-o", plan, "--batch", 4, "--optimizer", "adamw", "--lr", 3e-3)
    for folder in ("hf", "hf-sharded"):
        out = path(f"{folder}-again")
        run(tool("dtrun"), plan, "--init", path(folder), "--steps", 0, "--save", out, "--format", "hf")
        again = cls.from_pretrained(out).eval()
        err = relative(logits_of(again, idx), expected)
        print(f"{name}: round trip from {folder} ({len(os.listdir(path(folder)))} files): logits rel err {err:.2e}")
        assert err <= 1e-6, err
    # Saved in shards of at most 40 KB: where save_pretrained put each tensor (for an untied
    # model; dtrun also writes a tied weight's other name, which shifts the split), and what
    # from_pretrained loads. A later save into the same folder replaces the earlier one's files.
    out = path("sharded-again")
    run(tool("dtrun"), plan, "--init", path("hf"), "--steps", 0, "--save", out, "--format", "hf",
        "--max-shard-size", "40KB")
    ours_index = json.load(open(os.path.join(out, "model.safetensors.index.json")))
    theirs_index = json.load(open(path("hf-sharded/model.safetensors.index.json")))
    ours_map, theirs_map = ours_index["weight_map"], theirs_index["weight_map"]
    # A tied weight's bytes count once, as in save_pretrained (which leaves the other name out).
    assert ours_index["metadata"]["total_size"] == theirs_index["metadata"]["total_size"], (ours_index, theirs_index)
    files = sorted(f for f in os.listdir(out) if f.endswith(".safetensors"))
    assert files == sorted(set(ours_map.values())) and len(files) > 1, (files, ours_map)
    if name == "llama":
        assert ours_map == theirs_map, (ours_map, theirs_map)
    err = relative(logits_of(cls.from_pretrained(out).eval(), idx), expected)
    print(f"{name}: --max-shard-size 40KB: {len(files)} files (transformers: {len(shards)}), "
          f"logits rel err {err:.2e}")
    assert err <= 1e-6, err
    run(tool("dtrun"), plan, "--init", out, "--steps", 0, "--save", out, "--format", "hf")
    assert sorted(os.listdir(out)) == ["config.json", "model.safetensors"], os.listdir(out)
    run(tool("dtrun"), plan, "--init", out, "--steps", 0, "--save", out, "--max-shard-size", "40KB")
    assert "model.safetensors" not in os.listdir(out) and len(os.listdir(out)) == len(files) + 2
    # Ten steps from the checkpoint; dtc's logits over `idx` against transformers' from the
    # saved folder.
    tokens = ((np.arange(4000) * 7 + rng.integers(0, 3, 4000)) % V).astype(np.int64)
    write_tokens(path("train.bin"), tokens)
    os.makedirs(path("probe"))
    np.save(path("probe/idx.npy"), idx)
    np.save(path("probe/targets.npy"), np.roll(idx, -1, axis=1))
    run(tool("dtrun"), plan, "--init", path("hf"), "--data", path("train.bin"), "--steps", 10,
        "--save", path("trained"), "--format", "hf", "--predict", path("predicted"), "--eval", path("probe"))
    ours = np.load(path("predicted/logits.npy"))
    theirs = logits_of(cls.from_pretrained(path("trained")).eval(), idx)
    err = relative(ours, theirs)
    moved = relative(theirs, expected)
    print(f"{name}: after 10 steps: dtc's logits vs transformers' from the saved folder: rel err {err:.2e} "
          f"(the steps moved them by {moved:.2e})")
    assert err <= 1e-5 and moved > 1e-3, (err, moved)
    return plan, shards


def main():
    torch.manual_seed(0)
    torch.set_num_threads(2)
    rng = np.random.default_rng(2)
    with tempfile.TemporaryDirectory() as work:
        path = lambda name: os.path.join(work, name)  # noqa: E731
        idx = rng.integers(0, V, (8, T)).astype(np.int64)  # two whole batches for --predict
        # GPT-2 as transformers' GPT2LMHeadModel stores it (Conv1D [in, out], the head tied).
        gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=T, n_embd=C, n_layer=L, n_head=H,
                                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)).eval()
        round_trip(work, rng, "gpt2", GPT2LMHeadModel, gpt2,
                   ["gpt", "--layout", "hf", "--vocab", V, "--ctx", T, "--layers", L, "--heads", H, "--embd", C], idx)
        source = LlamaForCausalLM(config()).eval()
        plan, shards = round_trip(work, rng, "llama", LlamaForCausalLM, source,
                                  ["llama", "--vocab", V, "--ctx", T, "--layers", L, "--heads", H, "--kv-heads", K,
                                   "--embd", C], idx)
        assert json.load(open(path("llama-hf-again/config.json")))["num_key_value_heads"] == K
        # Bad input.
        wrong = dict(json.load(open(path("llama-hf/config.json"))), num_key_value_heads=4)
        os.makedirs(path("hf-wrong"))
        json.dump(wrong, open(path("hf-wrong/config.json"), "w"))
        os.link(path("llama-hf/model.safetensors"), path("hf-wrong/model.safetensors"))
        expect_error([tool("dtrun"), plan, "--init", path("hf-wrong"), "--steps", 0],
                     "config.json: num_key_value_heads is 4, the model's 2")
        os.remove(os.path.join(path("llama-hf-sharded"), shards[-1]))
        expect_error([tool("dtrun"), plan, "--init", path("llama-hf-sharded"), "--steps", 0],
                     f"{shards[-1]}: missing")
        run(tool("dtc"), "zoo", "gpt", "--vocab", V, "--ctx", T, "--layers", 1, "--heads", 2, "--embd", 16,
            "-o", path("gpt.dtm"))
        run(tool("dtc"), "compile", path("gpt.dtm"), "-o", path("gpt.dtp"), "--batch", 2)
        expect_error([tool("dtrun"), path("gpt.dtp"), "--steps", 0, "--save", path("gpt-hf"), "--format", "hf"],
                     "carries no Hugging Face config")
        assert not os.path.exists(path("gpt-hf")), "a refused run left its output folder"
    print("hf checkpoints: ok")


if __name__ == "__main__":
    main()
