"""Hugging Face checkpoints in and out: a folder transformers' LlamaForCausalLM.save_pretrained
wrote (one model.safetensors, or shards with model.safetensors.index.json) starts a `dtc zoo
llama` run with `dtrun --init DIR`; `dtrun --save DIR --format hf` writes config.json and
model.safetensors that from_pretrained loads.

- round trip, 0 steps: transformers' model -> --init -> --save --format hf -> from_pretrained:
  logits equal (1e-6 relative to their largest);
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
from transformers import LlamaConfig, LlamaForCausalLM

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import run, tool, write_tokens  # noqa: E402

V, T, L, H, K, C, FFN = 64, 16, 2, 4, 2, 32, 96


def config():
    return LlamaConfig(vocab_size=V, hidden_size=C, intermediate_size=FFN, num_hidden_layers=L,
                       num_attention_heads=H, num_key_value_heads=K, max_position_embeddings=T,
                       rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                       attn_implementation="eager")


def logits_of(model, idx):
    with torch.no_grad():
        return model(input_ids=torch.from_numpy(idx)).logits.numpy()


def relative(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def expect_error(args, needle):
    out = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and needle in lines[0], (out.returncode, out.stderr)
    print(f"refused: {lines[0]}")


def main():
    torch.manual_seed(0)
    torch.set_num_threads(2)
    rng = np.random.default_rng(2)
    with tempfile.TemporaryDirectory() as work:
        path = lambda name: os.path.join(work, name)
        source = LlamaForCausalLM(config()).eval()
        source.save_pretrained(path("hf"), safe_serialization=True)
        source.save_pretrained(path("hf-sharded"), safe_serialization=True, max_shard_size="40KB")
        shards = sorted(f for f in os.listdir(path("hf-sharded")) if f.endswith(".safetensors"))
        assert len(shards) > 1 and os.path.exists(path("hf-sharded/model.safetensors.index.json")), shards
        idx = rng.integers(0, V, (8, T)).astype(np.int64)  # two whole batches for --predict
        expected = logits_of(source, idx)

        run(tool("dtc"), "zoo", "llama", "--vocab", V, "--ctx", T, "--layers", L, "--heads", H,
            "--kv-heads", K, "--embd", C, "-o", path("llama.dtm"))
        run(tool("dtc"), "compile", path("llama.dtm"), "-o", path("llama.dtp"), "--batch", 4,
            "--optimizer", "adamw", "--lr", 3e-3)
        for folder in ("hf", "hf-sharded"):
            out = path(f"{folder}-again")
            run(tool("dtrun"), path("llama.dtp"), "--init", path(folder), "--steps", 0, "--save", out,
                "--format", "hf")
            assert json.load(open(os.path.join(out, "config.json")))["num_key_value_heads"] == K
            again = LlamaForCausalLM.from_pretrained(out).eval()
            err = relative(logits_of(again, idx), expected)
            print(f"round trip from {folder} ({len(os.listdir(path(folder)))} files): logits rel err {err:.2e}")
            assert err <= 1e-6, err

        # Ten steps from the checkpoint; dtc's logits over `idx` against transformers' from the
        # saved folder.
        tokens = ((np.arange(4000) * 7 + rng.integers(0, 3, 4000)) % V).astype(np.int64)
        write_tokens(path("train.bin"), tokens)
        os.makedirs(path("probe"))
        np.save(path("probe/idx.npy"), idx)
        np.save(path("probe/targets.npy"), np.roll(idx, -1, axis=1))
        run(tool("dtrun"), path("llama.dtp"), "--init", path("hf"), "--data", path("train.bin"), "--steps", 10,
            "--save", path("trained"), "--format", "hf", "--predict", path("predicted"), "--eval", path("probe"))
        ours = np.load(path("predicted/logits.npy"))
        trained = LlamaForCausalLM.from_pretrained(path("trained")).eval()
        theirs = logits_of(trained, idx)
        err = relative(ours, theirs)
        moved = relative(theirs, expected)
        print(f"after 10 steps: dtc's logits vs transformers' from the saved folder: rel err {err:.2e} "
              f"(the steps moved them by {moved:.2e})")
        assert err <= 1e-5 and moved > 1e-3, (err, moved)

        # Bad input.
        wrong = dict(json.load(open(path("hf/config.json"))), num_key_value_heads=4)
        os.makedirs(path("hf-wrong"))
        json.dump(wrong, open(path("hf-wrong/config.json"), "w"))
        os.link(path("hf/model.safetensors"), path("hf-wrong/model.safetensors"))
        expect_error([tool("dtrun"), path("llama.dtp"), "--init", path("hf-wrong"), "--steps", 0],
                     "config.json: num_key_value_heads is 4, the model's 2")
        os.remove(os.path.join(path("hf-sharded"), shards[-1]))
        expect_error([tool("dtrun"), path("llama.dtp"), "--init", path("hf-sharded"), "--steps", 0],
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
