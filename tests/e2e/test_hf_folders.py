"""Models from their Hugging Face folders: a tiny save_pretrained folder of each family a user
downloads (no ONNX), compiled with `dtc compile DIR` and started with `dtrun --init DIR` and no
other flag:

- Llama 3.1 (rope_scaling llama3, grouped-query attention, a pad_token_id: padding_idx), Qwen2
  (q/k/v biases, a tied head), Mistral (head_dim apart from hidden/heads), Mixtral (per-expert
  tensors read into dtc's stacked experts) and GPT-2 (Conv1D weights, more positions than the
  window), each trained on windows of 16 tokens of a model with 64 positions;
- logits equal transformers' within 1e-5 (relative to their largest);
- 10 AdamW steps equal transformers training the same folder within 1e-5 (losses, relative) on
  one device, tp=2 and dp=2 (Mixtral also ep=2);
- `--save --format hf` then from_pretrained: every config key equal to the source's
  (generation_config.json too), logits within 1e-5; `--save-dtype bf16` writes bfloat16
  tensors and says torch_dtype bfloat16; dtrun reads its own `--save` folder back;
- bad input: one line and exit 2 before any step (a setting dtc does not implement, a window
  longer than the model's positions or its sliding window, an unknown rope_type, a folder
  without config.json, a zoo model that does not match a folder's rope_scaling).

Runs under scripts/setup.sh's virtual environment (.deps/hf-venv)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from transformers import (AutoConfig, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          MistralConfig, MistralForCausalLM, MixtralConfig, MixtralForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM)

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import (expect_error, load_safetensors, read_log, relative, run, tool,  # noqa: E402
                         window_offsets, windows, write_tokens)

V, T, POSITIONS, B, STEPS, DATA_SEED = 64, 16, 64, 4, 10, 5
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]
OPTIM = ["--optimizer", "adamw", "--lr", 3e-3, "--eps", 1e-4, "--weight-decay", 0.1]
LLAMA_SHAPE = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=POSITIONS,
                   attn_implementation="eager")

FAMILIES = {
    # A rope scaled as Llama 3.1's (its original context shorter than the window, so that the
    # scaling changes the tables), padding row 3.
    "llama31": (LlamaForCausalLM, LlamaConfig(
        **LLAMA_SHAPE, rope_theta=500000.0, pad_token_id=3, bos_token_id=1, eos_token_id=2,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8})),
    "qwen2": (Qwen2ForCausalLM, Qwen2Config(**LLAMA_SHAPE, tie_word_embeddings=True,
                                            use_sliding_window=False)),
    "mistral": (MistralForCausalLM, MistralConfig(**LLAMA_SHAPE, head_dim=16, sliding_window=32)),
    "mixtral": (MixtralForCausalLM, MixtralConfig(**LLAMA_SHAPE, num_local_experts=4,
                                                  num_experts_per_tok=2, sliding_window=None)),
    "gpt2": (GPT2LMHeadModel, GPT2Config(vocab_size=V, n_positions=POSITIONS, n_embd=32, n_layer=2,
                                         n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                         bos_token_id=0, eos_token_id=1)),
}
LAYOUTS = {"tp2": (["--mesh", "tp=2"], 2), "dp2": (["--mesh", "dp=2"], 2)}


def logits_of(model, idx):
    with torch.no_grad():
        return model(input_ids=torch.from_numpy(idx)).logits.numpy()


def make_folder(cls, config, path):
    """A freshly initialised model whose biases and norms are moved off their initial values (so
    that a loader that skipped them would show), saved as transformers saves it."""
    model = cls(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(path, safe_serialization=True)
    return model.eval()


def transformers_losses(cls, folder, tokens):
    """transformers training the folder's model 10 AdamW steps on dtrun's windows."""
    model = cls.from_pretrained(folder)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, eps=1e-4, weight_decay=0.1)
    losses = []
    for step in range(STEPS):
        idx, tgt = map(torch.from_numpy, windows(tokens, window_offsets(len(tokens), B, T, DATA_SEED, step), T))
        opt.zero_grad()
        logits = model(input_ids=idx).logits
        loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def config_dict(folder):
    """from_pretrained's config, without what only names the file's tensors."""
    return {k: v for k, v in AutoConfig.from_pretrained(folder).to_dict().items()
            if k not in ("_name_or_path", "torch_dtype")}


def family(work, name, cls, config, tokens, data, idx, probe):
    path = lambda f: os.path.join(work, f"{name}-{f}")  # noqa: E731
    folder = path("hf")
    source = make_folder(cls, config, folder)
    expected = logits_of(source, idx)
    plan = path("model.dtp")
    out = run(tool("dtc"), "compile", folder, "-o", plan, "--batch", B, "--ctx", T, *OPTIM).stdout
    assert f"a window of {T} of {POSITIONS} positions" in out, out
    run(tool("dtrun"), plan, "--init", folder, "--predict", path("predicted"), "--eval", probe)
    err = relative(np.load(path("predicted/logits.npy")), expected)
    print(f"{name}: logits from the folder vs transformers': rel err {err:.2e}")
    assert err <= 1e-5, err

    reference = transformers_losses(cls, folder, tokens)
    layouts = dict(LAYOUTS)
    if name == "mixtral":
        layouts["ep2"] = (["--mesh", "ep=2"], 2)
    runs = {"single": ([], 1)}
    runs.update(layouts)
    for layout, (flags, devices) in runs.items():
        layout_plan = plan if layout == "single" else path(f"{layout}.dtp")
        if layout != "single":
            run(tool("dtc"), "compile", folder, "-o", layout_plan, "--batch", B, "--ctx", T, *OPTIM, *flags)
        log = path(f"{layout}.jsonl")
        cmd = [tool("dtrun"), layout_plan, "--init", folder, "--data", data, "--steps", STEPS, "--seed", DATA_SEED,
               "--log", log, "--threads", 1]
        if layout == "single":
            cmd += ["--save", path("trained"), "--format", "hf", "--predict", path("trained-logits"),
                    "--eval", probe]
        run(*(MPIRUN + [devices] + cmd if devices > 1 else cmd))
        losses = [e["loss"] for e in read_log(log)]
        err = max(abs(a - b) / abs(b) for a, b in zip(losses, reference))
        print(f"{name} {layout}: losses {losses[0]:.5f} -> {losses[-1]:.5f}; vs transformers: max rel err {err:.2e}")
        assert len(losses) == STEPS and err <= 1e-5, (losses, reference)
        assert losses[-1] < losses[0], losses

    # The trained folder as transformers reads it: the source's config, dtc's logits; config.json
    # is the source's, byte for byte.
    assert config_dict(path("trained")) == config_dict(folder), (config_dict(path("trained")), config_dict(folder))
    assert open(path("trained/config.json")).read() == open(f"{folder}/config.json").read()
    assert json.load(open(path("trained/generation_config.json"))) == json.load(open(f"{folder}/generation_config.json"))
    trained = cls.from_pretrained(path("trained")).eval()
    err = relative(np.load(path("trained-logits/logits.npy")), logits_of(trained, idx))
    moved = relative(logits_of(trained, idx), expected)
    print(f"{name}: --save --format hf after training: from_pretrained's logits vs dtc's rel err {err:.2e} "
          f"(training moved them {moved:.2e})")
    assert err <= 1e-5 and moved > 1e-3, (err, moved)
    # Saved untrained: the source again, as from_pretrained loads it.
    run(tool("dtrun"), plan, "--init", folder, "--steps", 0, "--save", path("again"), "--format", "hf")
    err = relative(logits_of(cls.from_pretrained(path("again")).eval(), idx), expected)
    assert err <= 1e-6, err
    return plan, folder


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory() as work:
        path = lambda f: os.path.join(work, f)  # noqa: E731
        tokens = ((np.arange(4000) * 7 + rng.integers(0, 3, 4000)) % V).astype(np.int64)
        data = path("train.bin")
        write_tokens(data, tokens)
        idx = rng.integers(0, V, (2 * B, T)).astype(np.int64)
        os.makedirs(path("probe"))
        np.save(path("probe/idx.npy"), idx)
        np.save(path("probe/targets.npy"), np.roll(idx, -1, axis=1))
        plans = {}
        for name, (cls, config) in FAMILIES.items():
            plans[name] = family(work, name, cls, config, tokens, data, idx, path("probe"))

        # Every rope_scaling transformers computes: the logits of a window of 16 tokens of a model
        # of 64 positions whose original context was 8.
        for scaling in ({"rope_type": "linear", "factor": 4.0}, {"rope_type": "dynamic", "factor": 4.0},
                        {"rope_type": "yarn", "factor": 8.0, "beta_fast": 16.0, "beta_slow": 2.0},
                        {"rope_type": "longrope", "long_factor": list(np.linspace(1.0, 6.0, 4)),
                         "short_factor": [1.0, 1.1, 1.2, 1.3], "factor": 8.0, "attention_factor": 1.2}):
            name = f"rope-{scaling['rope_type']}"
            config = LlamaConfig(**LLAMA_SHAPE, rope_scaling=scaling, rope_theta=10000.0)
            folder = path(f"{name}-hf")
            expected = logits_of(make_folder(LlamaForCausalLM, config, folder), idx)
            run(tool("dtc"), "compile", folder, "-o", path(f"{name}.dtp"), "--batch", B, "--ctx", T)
            run(tool("dtrun"), path(f"{name}.dtp"), "--init", folder, "--predict", path(f"{name}-out"),
                "--eval", path("probe"))
            err = relative(np.load(path(f"{name}-out/logits.npy")), expected)
            print(f"{name}: logits vs transformers' rel err {err:.2e}")
            assert err <= 1e-5, err

        # Llama's biases (attention_bias, mlp_bias) and a tied head.
        config = LlamaConfig(**LLAMA_SHAPE, attention_bias=True, mlp_bias=True, tie_word_embeddings=True)
        biased = path("llama-biases-hf")
        expected_biased = logits_of(make_folder(LlamaForCausalLM, config, biased), idx)
        run(tool("dtc"), "compile", biased, "-o", path("biased.dtp"), "--batch", B, "--ctx", T)
        run(tool("dtrun"), path("biased.dtp"), "--init", biased, "--predict", path("biased-out"), "--eval",
            path("probe"))
        err = relative(np.load(path("biased-out/logits.npy")), expected_biased)
        print(f"llama with attention and MLP biases, tied head: logits vs transformers' rel err {err:.2e}")
        assert err <= 1e-5, err

        # bf16 as asked: tensors and torch_dtype say so; from_pretrained reads it back.
        plan, folder = plans["llama31"]
        run(tool("dtrun"), plan, "--init", folder, "--steps", 0, "--save", path("bf16"), "--format", "hf",
            "--save-dtype", "bf16")
        assert json.load(open(path("bf16/config.json")))["torch_dtype"] == "bfloat16"
        with open(path("bf16/model.safetensors"), "rb") as f:
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
        assert {v["dtype"] for k, v in header.items() if k != "__metadata__"} == {"BF16"}, header
        bf16 = LlamaForCausalLM.from_pretrained(path("bf16"), torch_dtype="auto")
        assert bf16.dtype == torch.bfloat16, bf16.dtype
        # dtrun's own --save (weights alone, Hugging Face's names or dtc's) starts a run again.
        run(tool("dtrun"), plan, "--init", folder, "--steps", 0, "--save", path("own"))
        assert sorted(os.listdir(path("own"))) == ["model.safetensors"]
        run(tool("dtrun"), plan, "--init", path("own"), "--predict", path("own-logits"), "--eval", path("probe"))
        mixtral_plan, mixtral_folder = plans["mixtral"]
        run(tool("dtrun"), mixtral_plan, "--init", mixtral_folder, "--steps", 0, "--save", path("mixtral-own"))
        assert any(".experts.gate_proj.weight" in k for k in load_safetensors(path("mixtral-own/model.safetensors")))
        run(tool("dtrun"), mixtral_plan, "--init", path("mixtral-own"), "--steps", 0)

        # Bad input, each refused in one line before a step.
        def variant(name, base, **changes):
            out = path(name)
            shutil.copytree(base, out)
            config = json.load(open(f"{out}/config.json"))
            config.update(changes)
            json.dump(config, open(f"{out}/config.json", "w"))
            return out
        dtc = [tool("dtc"), "compile"]
        expect_error(dtc + [variant("unknown-key", folder, shared_attention=True), "-o", path("x.dtp"), "--batch", 2],
                     "'shared_attention' (model_type llama) is a setting dtc does not implement")
        expect_error(dtc + [variant("yarn-typo", folder, rope_scaling={"rope_type": "ntk", "factor": 2.0}),
                            "-o", path("x.dtp"), "--batch", 2], "rope_type 'ntk' is not one dtc implements")
        expect_error(dtc + [folder, "-o", path("x.dtp"), "--batch", 2, "--ctx", POSITIONS + 1],
                     f"--ctx {POSITIONS + 1} is longer than the model's max_position_embeddings {POSITIONS}")
        expect_error(dtc + [plans["mistral"][1], "-o", path("x.dtp"), "--batch", 2, "--ctx", 48],
                     "sliding_window 32 is shorter than the window of 48 tokens")
        expect_error(dtc + [variant("act", folder, hidden_act="gelu"), "-o", path("x.dtp"), "--batch", 2],
                     "hidden_act is 'gelu'")
        os.makedirs(path("empty"))
        expect_error(dtc + [path("empty"), "-o", path("x.dtp"), "--batch", 2], "no config.json")
        expect_error([tool("dtc"), "compile", plans["gpt2"][0], "-o", path("x.dtp"), "--batch", 2, "--ctx", 8],
                     "--ctx sets the window of a model built from its Hugging Face folder")
        assert not os.path.exists(path("x.dtp"))
        # A zoo Llama of the same shape ignores nothing of a Llama 3.1 folder: its rope scaling
        # is refused, where it once loaded silently.
        run(tool("dtc"), "zoo", "llama", "--vocab", V, "--ctx", T, "--layers", 2, "--heads", 4, "--kv-heads", 2,
            "--embd", 32, "--ffn", 48, "--rope-theta", 500000, "-o", path("zoo.dtm"))
        run(tool("dtc"), "compile", path("zoo.dtm"), "-o", path("zoo.dtp"), "--batch", B)
        expect_error([tool("dtrun"), path("zoo.dtp"), "--init", folder, "--steps", 0], "config.json: rope_scaling is")
        unscaled = variant("unscaled", folder, rope_scaling=None)
        expect_error([tool("dtrun"), path("zoo.dtp"), "--init", unscaled, "--steps", 0],
                     "config.json: pad_token_id is 3, the model's null")
        run(tool("dtrun"), path("zoo.dtp"), "--init", variant("plain", unscaled, pad_token_id=None), "--steps", 0)
        # A zoo mixture of experts that drops no token is Mixtral: saved as its folder, which
        # transformers' MixtralForCausalLM loads with dtc's logits.
        run(tool("dtc"), "zoo", "llama", "--vocab", V, "--ctx", T, "--layers", 2, "--heads", 4, "--kv-heads", 2,
            "--embd", 32, "--ffn", 48, "--experts", 4, "--top-k", 2, "--capacity-factor", 2, "-o", path("moe.dtm"))
        run(tool("dtc"), "compile", path("moe.dtm"), "-o", path("moe.dtp"), "--batch", B)
        run(tool("dtrun"), path("moe.dtp"), "--steps", 0, "--save", path("moe-hf"), "--format", "hf",
            "--predict", path("moe-logits"), "--eval", path("probe"))
        moe = MixtralForCausalLM.from_pretrained(path("moe-hf"), attn_implementation="eager").eval()
        err = relative(np.load(path("moe-logits/logits.npy")), logits_of(moe, idx))
        print(f"dtc zoo llama --experts saved --format hf: MixtralForCausalLM's logits vs dtc's rel err {err:.2e}")
        assert err <= 1e-5, err
        run(tool("dtc"), "zoo", "llama", "--vocab", V, "--ctx", T, "--layers", 2, "--heads", 4, "--embd", 32,
            "--experts", 4, "-o", path("moe-drops.dtm"))
        run(tool("dtc"), "compile", path("moe-drops.dtm"), "-o", path("moe-drops.dtp"), "--batch", B)
        expect_error([tool("dtrun"), path("moe-drops.dtp"), "--steps", 0, "--save", path("x"), "--format", "hf"],
                     "carries no Hugging Face config")
        # GPT-2's end-of-text token is the vocabulary's last (not GPT-2's 50256 past it).
        run(tool("dtc"), "zoo", "gpt", "--layout", "hf", "--vocab", 300, "--ctx", T, "--layers", 1, "--heads", 2,
            "--embd", 16, "-o", path("g300.dtm"))
        run(tool("dtc"), "compile", path("g300.dtm"), "-o", path("g300.dtp"), "--batch", 2)
        run(tool("dtrun"), path("g300.dtp"), "--steps", 0, "--save", path("g300"), "--format", "hf")
        saved = AutoConfig.from_pretrained(path("g300"))
        assert saved.eos_token_id == saved.bos_token_id == 299, (saved.bos_token_id, saved.eos_token_id)
        # dtc zoo --from writes the same model as a model file.
        out = run(tool("dtc"), "zoo", "--from", folder, "--ctx", T, "-o", path("from.dtm")).stdout
        assert "rope llama3" in out, out
    print("hf folders: ok")


if __name__ == "__main__":
    main()
