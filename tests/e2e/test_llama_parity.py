"""Llama parity with transformers: `dtc zoo llama` (grouped-query attention: 4 query heads over 2
key/value heads; untied and tied heads) against transformers' own LlamaForCausalLM (eager
attention) holding the same initial weights (saved by dtrun, loaded with load_state_dict(strict)),
on the same token windows for 10 AdamW steps: losses within 1e-5 relative, final weights within
1e-4 (max |diff| / max |w| per tensor; eps 1e-4, as test_gpt_parity.py explains).

Then every layout trains as one device (1e-5, test_data_parallel.py's check): dp=2, ZeRO-3,
pp=2, full recomputation, tp=2 with the key/value heads split over tp by --shard (Megatron's
column and row splits of the projections and the MLP), and the default tensor-parallel preset,
which finds those splits by the blocks' structure (with sequence parallelism, and at tp=4, where
the 2 key/value heads do not divide and stay whole).

Runs under the virtual environment scripts/setup.sh makes (.deps/hf-venv: transformers pinned,
Debian's torch)."""
import json
import os
import re
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM

sys.path.insert(0, os.path.dirname(__file__))
from dtc_harness import dtc_train, run, tool, weight_error, window_offsets, windows, write_tokens  # noqa: E402
from test_data_parallel import compare  # noqa: E402

V, T, L, H, K, C = 64, 16, 2, 4, 2, 32
B, STEPS, SEED, DATA_SEED = 4, 10, 3, 5
FFN = 96  # dtc's default for C = 32: 2/3 of 4C rounded up to 16s


def hf_model(tied, dtype):
    config = LlamaConfig(vocab_size=V, hidden_size=C, intermediate_size=FFN, num_hidden_layers=L,
                         num_attention_heads=H, num_key_value_heads=K, max_position_embeddings=T,
                         rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=tied,
                         attention_bias=False, attn_implementation="eager")
    return LlamaForCausalLM(config).to(dtype)


def torch_run(init, tokens, tied, dtype=torch.float32):
    model = hf_model(tied, dtype)
    state = {k: torch.from_numpy(v.copy()).to(dtype) for k, v in init.items()}
    if tied:
        state.setdefault("lm_head.weight", state["model.embed_tokens.weight"])
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, f"dtc saved tensors transformers does not have: {unexpected}"
    # Rotary tables are buffers transformers computes, not state it loads.
    assert all("rotary_emb" in k for k in missing), f"dtc did not save: {missing}"
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, eps=1e-4, weight_decay=0.1)
    losses = []
    for step in range(STEPS):
        idx, tgt = map(torch.from_numpy, windows(tokens, window_offsets(len(tokens), B, T, DATA_SEED, step), T))
        opt.zero_grad()
        logits = model(input_ids=idx).logits
        loss = F.cross_entropy(logits.reshape(-1, V).float(), tgt.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    final = {k: v.detach().to(torch.float64).numpy() for k, v in model.state_dict().items()
             if "rotary_emb" not in k}
    return losses, final


def check_against_transformers(name, model, tokens, work, data, tied):
    init, final, losses, _ = dtc_train(model, work, name, B, ["--optimizer", "adamw", "--lr", 3e-3, "--eps", 1e-4,
                                                             "--weight-decay", 0.1], data, STEPS, DATA_SEED)
    ref_losses, ref_final = torch_run(init, tokens, tied)
    if tied:  # transformers lists the tied tensor under both names; dtc's file under the first
        assert np.array_equal(ref_final["lm_head.weight"], ref_final["model.embed_tokens.weight"])
        ref_final.pop("lm_head.weight")
        final.pop("lm_head.weight", None)
    assert sorted(final) == sorted(ref_final), f"names differ: {sorted(set(final) ^ set(ref_final))}"
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
    weight_err = weight_error(final, ref_final)
    print(f"{name}: losses {losses[0]:.6f} -> {losses[-1]:.6f}; vs transformers' LlamaForCausalLM: max loss "
          f"rel err {loss_err:.3e}, max weight rel err {weight_err:.3e}")
    assert loss_err <= 1e-5, f"{name}: loss mismatch {losses} vs {ref_losses}"
    assert weight_err <= 1e-4, f"{name}: weight mismatch {weight_err}"
    assert losses[-1] < losses[0], f"{name}: loss did not fall"


def mixtral_run(init, tokens, experts, k):
    """transformers' MixtralForCausalLM (dropless top-k routing, renormalised, no router losses)
    from dtc's weights: each expert's w1 (gate), w3 (up), w2 (down) [out, in] are the slices of
    dtc's stacked [E, in, out] tensors, transposed."""
    config = MixtralConfig(vocab_size=V, hidden_size=C, intermediate_size=FFN, num_hidden_layers=L,
                           num_attention_heads=H, num_key_value_heads=K, max_position_embeddings=T,
                           rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                           num_local_experts=experts, num_experts_per_tok=k, router_aux_loss_coef=0.0,
                           sliding_window=None, attn_implementation="eager")
    model = MixtralForCausalLM(config)
    stacked = re.compile(r"(.*\.block_sparse_moe\.experts)\.(gate|up|down)_proj\.weight")
    names = {"gate": "w1", "up": "w3", "down": "w2"}
    state = {}
    for name, value in init.items():
        match = stacked.fullmatch(name)
        if not match:
            state[name] = torch.from_numpy(value.copy())
            continue
        for e in range(experts):
            state[f"{match.group(1)}.{e}.{names[match.group(2)]}.weight"] = torch.from_numpy(value[e].T.copy())
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all("rotary_emb" in n for n in missing), (missing, unexpected)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, eps=1e-4, weight_decay=0.1)
    losses = []
    for step in range(STEPS):
        idx, tgt = map(torch.from_numpy, windows(tokens, window_offsets(len(tokens), B, T, DATA_SEED, step), T))
        opt.zero_grad()
        loss = F.cross_entropy(model(input_ids=idx).logits.reshape(-1, V), tgt.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    final = {}
    for name, value in model.state_dict().items():
        if "rotary_emb" in name:
            continue
        match = re.fullmatch(r"(.*\.block_sparse_moe\.experts)\.(\d+)\.(w1|w2|w3)\.weight", name)
        if not match:
            final[name] = value.detach().to(torch.float64).numpy()
            continue
        ours = {v: n for n, v in names.items()}[match.group(3)]
        final.setdefault(f"{match.group(1)}.{ours}_proj.weight", {})[int(match.group(2))] = value.detach().T
    for name, value in final.items():
        if isinstance(value, dict):
            final[name] = torch.stack([value[e] for e in range(experts)]).to(torch.float64).numpy()
    return losses, final


def check_against_mixtral(model, tokens, work, data, experts, k):
    """`dtc zoo llama --experts` against transformers' Mixtral: a capacity of every token (no
    drops, as Mixtral's dropless routing) and no router losses in the training loss."""
    init, final, losses, _ = dtc_train(model, work, "mixtral", B, ["--optimizer", "adamw", "--lr", 3e-3, "--eps", 1e-4,
                                                                   "--weight-decay", 0.1], data, STEPS, DATA_SEED)
    ref_losses, ref_final = mixtral_run(init, tokens, experts, k)
    assert sorted(final) == sorted(ref_final), f"names differ: {sorted(set(final) ^ set(ref_final))}"
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
    weight_err = weight_error(final, ref_final)
    print(f"llama --experts {experts} --top-k {k}: losses {losses[0]:.6f} -> {losses[-1]:.6f}; vs transformers' "
          f"MixtralForCausalLM: max loss rel err {loss_err:.3e}, max weight rel err {weight_err:.3e}")
    assert loss_err <= 1e-5, f"mixtral: loss mismatch {losses} vs {ref_losses}"
    assert weight_err <= 1e-4, f"mixtral: weight mismatch {weight_err}"


def tp_shards():
    """Megatron's splits for Llama, given by hand: q/k/v and gate/up by output rows (whole heads:
    the 2 key/value heads go one to a rank), o and down by input columns."""
    flags = []
    for proj in ("q_proj", "k_proj", "v_proj"):
        flags += ["--shard", f"model.layers.*.self_attn.{proj}.weight=tp,-"]
    flags += ["--shard", "model.layers.*.self_attn.o_proj.weight=-,tp"]
    for proj in ("gate_proj", "up_proj"):
        flags += ["--shard", f"model.layers.*.mlp.{proj}.weight=tp,-"]
    flags += ["--shard", "model.layers.*.mlp.down_proj.weight=-,tp"]
    return flags


def train_step_counts(plan):
    info = json.loads(run(tool("dtc"), "inspect", plan, "--json").stdout)
    return next(f for f in info["functions"] if f["name"] == "train_step")["op_counts"]


def train_step_casts(plan):
    return train_step_counts(plan).get("cast", 0)


def check_sixteen_bit_storage(work, data):
    """bf16 storage of RMSNorm, SwiGLU and rotary (and their gradients) beside the contractions:
    the casts around them fold into the ops, which widen what they read and round what they
    write, so the step computes the very same bits with fewer passes over memory; attention
    reads q, k and v from their three projections (the layout ops and transposes gone, rotary
    embeddings applied on the projections' rows). Another shape than the parity runs (6 query
    heads over 3 key/value heads, width 48, context 12): the CPU plan with flash attention, and
    the CUDA plan run on the CPU's kernels (cpu-staged), each against itself with
    --no-fold-casts (which also keeps attention on [B, H, T, D] heads)."""
    model = os.path.join(work, "llama-6x3.dtm")
    run(tool("dtc"), "zoo", "llama", "--vocab", V, "--ctx", 12, "--layers", L, "--heads", 6, "--kv-heads", 3,
        "--embd", 48, "--seed", 4, "-o", model)
    optim = ["--optimizer", "adamw", "--lr", 3e-3, "--eps", 1e-4, "--precision", "bf16"]
    for name, flags, extra in (("bf16-fused-attention", ["--fused-attention"], ()),
                               ("bf16-cuda-plan", ["--device", "cuda"], ("--device", "cpu-staged"))):
        _, final, losses, _ = dtc_train(model, work, name, B, optim + flags, data, STEPS, DATA_SEED, device=extra)
        _, unfolded, unfolded_losses, _ = dtc_train(model, work, name + "-unfolded", B,
                                                    optim + flags + ["--no-fold-casts"], data, STEPS, DATA_SEED,
                                                    device=extra)
        assert unfolded_losses == losses and all(np.array_equal(unfolded[k], final[k]) for k in final), \
            f"{name}: folding the casts into the Llama blocks changed the results"
        folded, kept = (train_step_casts(os.path.join(work, f"{n}.dtp")) for n in (name, name + "-unfolded"))
        # Each layer's RMSNorms, SwiGLU, rotary embeddings and their gradients read and write
        # bf16 (at least 10 casts a layer gone).
        assert folded + 10 * L <= kept, f"{name}: {folded} casts with folding, {kept} without"
        # Attention reads q, k and v (3 of 6 heads' k/v, ungrouped) where their projections
        # wrote them, the rotary steps on those rows: no transpose is left.
        counts = train_step_counts(os.path.join(work, f"{name}.dtp"))
        assert counts.get("transpose", 0) == 0 and counts.get("causal_attention_qkv") == L and \
            counts.get("causal_attention_qkv_grad") == L, f"{name}: {counts}"
        print(f"{name}: bit-identical with --no-fold-casts; casts {kept} -> {folded}, no transposes")


def check_residual_norms(work, data):
    """The residual adds joined to the RMSNorms beside them: add_rms_norm forward, and backward
    rms_norm_grad_add summing the q, k, v (and gate, up) projections' input gradients as it reads
    them and adding the residual stream's gradient. Bit for bit the plan without the fusions, in
    f32 and bf16 (where the widening casts into the adds and the sum's narrowing cast go too),
    on the 6/3-head shape check_sixteen_bit_storage made."""
    model = os.path.join(work, "llama-6x3.dtm")
    for precision in ("fp32", "bf16"):
        optim = ["--optimizer", "adamw", "--lr", 3e-3, "--eps", 1e-4, "--precision", precision,
                 "--fused-attention"]
        name = f"residual-norms-{precision}"
        _, fused, fused_losses, _ = dtc_train(model, work, name, B, optim + ["--fuse-epilogues"], data, STEPS,
                                              DATA_SEED)
        _, plain, plain_losses, _ = dtc_train(model, work, name + "-plain", B, optim, data, STEPS, DATA_SEED)
        assert fused_losses == plain_losses and all(np.array_equal(plain[k], fused[k]) for k in fused), \
            f"{name}: joining the residual adds to the RMSNorms changed the results"
        counts, unfused = (train_step_counts(os.path.join(work, f"{n}.dtp")) for n in (name, name + "-plain"))
        # Each layer's two norms, forward and backward (the final norm reads no residual add).
        assert counts.get("add_rms_norm") == 2 * L and counts.get("rms_norm_grad_add") == 2 * L, counts
        # The one add left is AdamW's step count.
        assert counts.get("add", 0) == 1, f"{name}: adds left beside the fused norms: {counts}"
        if precision == "bf16":
            # 2 widenings forward, 5 widenings and 2 narrowings backward, a layer.
            assert counts["cast"] + 9 * L <= unfused["cast"], f"{name}: casts {unfused['cast']} -> {counts['cast']}"
        print(f"{name}: bit-identical with the adds apart; casts {unfused.get('cast', 0)} -> "
              f"{counts.get('cast', 0)}, adds {unfused.get('add', 0)} -> {counts.get('add', 0)}")


def main():
    torch.set_num_threads(2)
    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    tokens = ((np.arange(4000) * 7 + rng.integers(0, 3, 4000)) % V).astype(np.int64)
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "train.bin")
        write_tokens(data, tokens)
        shape = ["--vocab", V, "--ctx", T, "--layers", L, "--heads", H, "--kv-heads", K, "--embd", C,
                 "--seed", SEED]
        model, tied = os.path.join(work, "llama.dtm"), os.path.join(work, "llama-tied.dtm")
        run(tool("dtc"), "zoo", "llama", *shape, "-o", model)
        run(tool("dtc"), "zoo", "llama", *shape, "--tie-embeddings", "-o", tied)
        check_against_transformers("llama-gqa", model, tokens, work, data, tied=False)
        check_against_transformers("llama-gqa-tied", tied, tokens, work, data, tied=True)
        check_sixteen_bit_storage(work, data)
        check_residual_norms(work, data)
        optim = ["--optimizer", "adamw", "--lr", 3e-3, "--eps", 1e-4, "--weight-decay", 0.1]
        compare("llama", model, work, 8, optim, data, STEPS, DATA_SEED, [
            ("dp2", ["--mesh", "dp=2"], 2),
            ("dp2-zero3", ["--mesh", "dp=2", "--zero", 3], 2),
            ("pp2", ["--mesh", "pp=2", "--microbatches", 4], 2),
            ("recompute-full", ["--recompute", "full"], 1),
            ("tp2", ["--mesh", "tp=2", *tp_shards()], 2),
            ("dp2-tp2", ["--mesh", "dp=2,tp=2", *tp_shards()], 4),
            # The default preset finds the same splits by structure (and splits the vocabulary).
            ("tp2-preset", ["--mesh", "tp=2"], 2),
            ("tp2-preset-sequence-parallel", ["--mesh", "tp=2", "--sequence-parallel"], 2),
            # Full recomputation runs each block's forward again: the preset counts it once.
            ("tp2-preset-recompute-full", ["--mesh", "tp=2", "--sequence-parallel", "--recompute", "full"], 2),
            # 2 key/value heads over 4 devices: k and v stay whole, each device slices its heads.
            ("tp4-preset-kv-whole", ["--mesh", "tp=4"], 4),
        ])
        experts = os.path.join(work, "llama-moe.dtm")
        run(tool("dtc"), "zoo", "llama", *shape, "--experts", 4, "--top-k", 2, "--capacity-factor", 2,
            "--aux-loss-weight", 0, "--z-loss-weight", 0, "-o", experts)
        check_against_mixtral(experts, tokens, work, data, 4, 2)
        compare("llama-moe", experts, work, 8, optim, data, STEPS, DATA_SEED, [
            ("ep2", ["--mesh", "ep=2"], 2),
            ("dp2-ep2", ["--mesh", "dp=2,ep=2"], 4),
            # The preset finds the blocks by structure, each expert's SwiGLU MLP split over tp.
            ("ep2-tp2-preset", ["--mesh", "ep=2,tp=2"], 4),
            ("tp2-preset-recompute-full", ["--mesh", "tp=2", "--recompute", "full"], 2),
        ])
    print("llama parity: ok")


if __name__ == "__main__":
    main()
