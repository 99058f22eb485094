"""The decoder and encoder families of transformers 4.44 beyond the ones test_hf_exports.py
covers, exported unedited as docs/onnx.md says (`model(input_ids=ids, labels=labels).loss` in
training mode, tiny configs, no dropout), train 5 AdamW steps at parity with transformers
training the same module on the same batches: losses within 1e-5 relative, and the initial
weights dtrun saves are the module's. What each needs: positions and masks from shapes folded
(OPT, BLOOM, GPT-Neo), loops and sequences folded (GPT-J's and CodeGen's rotary tables), slices
with steps, MatMul batch dimensions broadcast (Falcon), padding rows found by their zeros
(Gemma, Phi-3, OPT, DistilBERT, RoBERTa), integer arithmetic on the token ids (RoBERTa's
position ids), Mixtral's routing as dtc's mixture-of-experts op (also dp=2, ep=2, tp=2 against
one device).

Runs under scripts/setup.sh's virtual environment (.deps/hf-venv)."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers as tf

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import batches, load_safetensors, read_log, run, tool  # noqa: E402

V, T, N, BATCH, STEPS, SEED = 64, 8, 48, 8, 5, 5
FLAGS = ["--optimizer", "adamw", "--lr", "0.003", "--eps", "1e-4"]


def families():
    """(name, model, inputs) for each family: a causal LM's labels are its ids (the shift is
    inside), a masked LM's are the ids with -100 where nothing is predicted."""
    yield "gpt_neox", tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=T, hidden_dropout=0.0, attention_dropout=0.0, attn_implementation="eager"))
    yield "opt", tf.OPTForCausalLM(tf.OPTConfig(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=4,
        max_position_embeddings=T, dropout=0.0, attention_dropout=0.0, word_embed_proj_dim=32, pad_token_id=1))
    yield "gemma", tf.GemmaForCausalLM(tf.GemmaConfig(
        vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=T, attn_implementation="eager",
        hidden_activation="gelu_pytorch_tanh"))
    yield "phi3", tf.Phi3ForCausalLM(tf.Phi3Config(
        vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=T, original_max_position_embeddings=T, resid_pdrop=0.0,
        embd_pdrop=0.0, attention_dropout=0.0, attn_implementation="eager", pad_token_id=0))
    yield "stablelm", tf.StableLmForCausalLM(tf.StableLmConfig(
        vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=T, hidden_dropout=0.0, attention_dropout=0.0,
        attn_implementation="eager"))
    yield "gptj", tf.GPTJForCausalLM(tf.GPTJConfig(
        vocab_size=V, n_positions=T, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0))
    yield "bloom", tf.BloomForCausalLM(tf.BloomConfig(
        vocab_size=V, hidden_size=32, n_layer=2, n_head=4, hidden_dropout=0.0, attention_dropout=0.0))
    yield "falcon", tf.FalconForCausalLM(tf.FalconConfig(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, multi_query=True,
        hidden_dropout=0.0, attention_dropout=0.0, max_position_embeddings=T, new_decoder_architecture=False,
        parallel_attn=True, bias=False, alibi=False))
    yield "roberta", tf.RobertaForMaskedLM(tf.RobertaConfig(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=T + 2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    yield "distilbert", tf.DistilBertForMaskedLM(tf.DistilBertConfig(
        vocab_size=V, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=T, dropout=0.0,
        attention_dropout=0.0))
    yield "codegen", tf.CodeGenForCausalLM(tf.CodeGenConfig(
        vocab_size=V, n_positions=T, n_ctx=T, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0))
    yield "gpt_neo", tf.GPTNeoForCausalLM(tf.GPTNeoConfig(
        vocab_size=V, max_position_embeddings=T, hidden_size=32, num_layers=2, attention_types=[[["global", "local"], 1]],
        num_heads=4, window_size=4, embed_dropout=0.0, attention_dropout=0.0, resid_dropout=0.0))
    yield "mixtral", tf.MixtralForCausalLM(tf.MixtralConfig(
        vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=T, num_local_experts=4, num_experts_per_tok=2,
        attn_implementation="eager"))


class WithLoss(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, input_ids, labels):
        return self.m(input_ids=input_ids, labels=labels).loss


def inputs_of(name, rng):
    ids = rng.integers(0, V, (N, T)).astype(np.int64)  # the padding rows too
    if name in ("roberta", "distilbert"):  # a masked LM predicts a quarter of the positions
        return ids, np.where(rng.random((N, T)) < 0.25, ids, -100).astype(np.int64)
    return ids, ids


def dtc_run(path, work, name, data, mesh=None):
    plan = os.path.join(work, f"{name}{'-' + mesh if mesh else ''}.dtp")
    extra = ["--mesh", mesh] if mesh else []
    out = subprocess.run([str(a) for a in [tool("dtc"), "compile", path, "-o", plan, "--batch", BATCH, *FLAGS,
                                           *extra]], capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip()
    log = os.path.join(work, f"{name}{'-' + mesh if mesh else ''}.jsonl")
    train = [tool("dtrun"), plan, "--data", data, "--steps", STEPS, "--seed", SEED, "--log", log, "--threads", 1]
    if mesh:  # two devices: the losses only
        run("mpirun", "--allow-run-as-root", "--oversubscribe", "-np", 2, *train)
        return ([e["loss"] for e in read_log(log)], None), out.stdout
    run(tool("dtrun"), plan, "--steps", 0, "--save", os.path.join(work, f"{name}-init"))
    run(*train)
    init = load_safetensors(os.path.join(work, f"{name}-init", "model.safetensors"))
    return ([e["loss"] for e in read_log(log)], init), out.stdout


# Layouts beyond one device, against one device: Mixtral's routing as dtc's mixture-of-experts
# op, its experts split over ep or over tp by the preset.
LAYOUTS = {"mixtral": ["dp=2", "ep=2", "tp=2"], "falcon": ["dp=2"], "gptj": ["dp=2"]}


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rng = np.random.default_rng(5)
    only = sys.argv[1:]
    with tempfile.TemporaryDirectory() as work:
        for name, model in families():
            if only and name not in only:
                continue
            torch.manual_seed(0)
            module = WithLoss(model).train()
            ids, labels = inputs_of(name, rng)
            data = os.path.join(work, f"{name}-data")
            os.makedirs(data)
            np.save(os.path.join(data, "input_ids.npy"), ids)
            np.save(os.path.join(data, "labels.npy"), labels)
            path = os.path.join(work, f"{name}.onnx")
            torch.onnx.export(module, (torch.from_numpy(ids[:2]), torch.from_numpy(labels[:2])), path,
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                              input_names=["input_ids", "labels"], output_names=["loss"],
                              dynamic_axes={"input_ids": {0: "batch"}, "labels": {0: "batch"}}, opset_version=14)
            result, said = dtc_run(path, work, name, data)
            assert result is not None, f"{name}: {said}"
            losses, init = result
            state = {k: v.detach().numpy() for k, v in module.state_dict().items()}
            for key, value in init.items():
                assert key in state and np.array_equal(value, state[key]), f"{name}: '{key}' is not the module's"
            opt = torch.optim.AdamW(module.parameters(), lr=0.003, eps=1e-4)
            ref = []
            for rows in batches(N, BATCH, SEED, STEPS):
                opt.zero_grad()
                loss = module(torch.from_numpy(ids[rows]), torch.from_numpy(labels[rows]))
                loss.backward()
                opt.step()
                ref.append(loss.item())
            err = max(abs(a - b) / abs(b) for a, b in zip(losses, ref))
            note = "; ".join(line[5:] for line in said.splitlines() if "padding_idx" in line)
            print(f"{name}: losses {losses[0]:.6f} -> {losses[-1]:.6f}; vs transformers max rel err {err:.2e}"
                  + (f" ({note})" if note else ""))
            assert err <= 1e-5, f"{name}: {losses} vs {ref}"
            for mesh in LAYOUTS.get(name, []):
                result, said = dtc_run(path, work, name, data, mesh)
                assert result, f"{name} {mesh}: {said}"
                partitioned, _ = result
                err = max(abs(a - b) / abs(b) for a, b in zip(partitioned, losses))
                print(f"{name} {mesh}: vs one device max rel err {err:.2e}")
                assert err <= 1e-5, f"{name} {mesh}: {partitioned} vs {losses}"
    print("hf families: ok")


if __name__ == "__main__":
    main()
