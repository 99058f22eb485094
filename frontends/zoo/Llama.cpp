#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "zoo/Attention.h"
#include "zoo/Moe.h"
#include "zoo/Zoo.h"

namespace dtc::zoo {

int64_t defaultLlamaFfn(int64_t embd) {
  // 2/3 of 4C, rounded up to a multiple of 16: Meta's rule for Llama's MLP at a small multiple.
  const int64_t twoThirds = (8 * embd + 2) / 3;
  return (twoThirds + 15) / 16 * 16;
}

std::string validateLlama(const LlamaOptions& o) {
  if (o.vocab <= 0 || o.ctx <= 0 || o.layers <= 0 || o.heads <= 0 || o.kvHeads <= 0 ||
      o.embd <= 0 || o.ffn <= 0 || o.headDim < 0)
    return "vocab, ctx, layers, heads, kv-heads, embd and ffn must be positive";
  if (o.headDim == 0 && o.embd % o.heads != 0)
    return "--heads " + std::to_string(o.heads) + " does not divide --embd " +
           std::to_string(o.embd) + " (each head gets embd/heads channels)";
  if (o.heads % o.kvHeads != 0)
    return "--kv-heads " + std::to_string(o.kvHeads) + " does not divide --heads " +
           std::to_string(o.heads) + " (each key/value head serves heads/kv-heads query heads)";
  const int64_t d = o.headDim ? o.headDim : o.embd / o.heads;
  if (d % 2 != 0)
    return "a head's size (" + std::string(o.headDim ? "head_dim = " : "embd/heads = ") +
           std::to_string(d) + ") must be even: rotary embeddings turn its channels in pairs";
  if (!(o.ropeTheta > 0)) return "--rope-theta must be > 0";
  if (!(o.rmsEps > 0)) return "--rms-eps must be > 0";
  if (o.maxPositions != 0 && o.maxPositions < o.ctx)
    return "the context (" + std::to_string(o.ctx) + ") is longer than the model's " +
           std::to_string(o.maxPositions) + " positions";
  if (o.paddingIdx < -1 || o.paddingIdx >= o.vocab)
    return "the padding row " + std::to_string(o.paddingIdx) + " is outside the vocabulary of " +
           std::to_string(o.vocab);
  if (!(o.attentionDropout >= 0 && o.attentionDropout < 1))
    return "the attention dropout must be in [0, 1)";
  if (std::string error = validateRope(o.rope, d); !error.empty()) return error;
  return validateMoe(o.moe);
}

namespace {

// Whether transformers' MixtralForCausalLM computes what the experts compute: every block
// sparse, a softmax router whose k weights are renormalised, and a capacity of every token
// (Mixtral drops none).
bool mixtralShaped(const MoeOptions& m) {
  return m.enabled() && m.every == 1 && m.normalize && m.score == "softmax" &&
         m.capacityFactor * static_cast<double>(m.topK) >= static_cast<double>(m.experts);
}

// transformers' LlamaConfig (or MixtralConfig) for these options (config.json's text).
std::string hfConfig(const LlamaOptions& o) {
  auto real = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", v);
    return std::string(text);
  };
  auto integer = [](int64_t v) { return std::to_string(v); };
  const bool moe = o.moe.enabled();
  std::string text =
      std::string("{\"architectures\": [\"") +
      (moe ? "MixtralForCausalLM\"], \"model_type\": \"mixtral\", "
           : "LlamaForCausalLM\"], \"model_type\": \"llama\", ") +
      "\"vocab_size\": " + integer(o.vocab) + ", \"hidden_size\": " + integer(o.embd) +
      ", \"intermediate_size\": " + integer(o.ffn) +
      ", \"num_hidden_layers\": " + integer(o.layers) +
      ", \"num_attention_heads\": " + integer(o.heads) +
      ", \"num_key_value_heads\": " + integer(o.kvHeads) +
      ", \"max_position_embeddings\": " + integer(o.maxPositions ? o.maxPositions : o.ctx) +
      ", \"rms_norm_eps\": " + real(o.rmsEps) + ", \"rope_theta\": " + real(o.ropeTheta) +
      ", \"tie_word_embeddings\": " + (o.tieEmbeddings ? "true" : "false") +
      ", \"hidden_act\": \"silu\", \"rope_scaling\": null, \"attention_dropout\": 0.0, "
      "\"pad_token_id\": null, ";
  if (moe)
    text += "\"num_local_experts\": " + integer(o.moe.experts) +
            ", \"num_experts_per_tok\": " + integer(o.moe.topK) +
            ", \"output_router_logits\": false, \"sliding_window\": null, ";
  else
    text += "\"attention_bias\": false, \"mlp_bias\": false, ";
  return text + "\"initializer_range\": " + real(o.initStd) + ", \"torch_dtype\": \"float32\"}";
}

std::vector<uint8_t> floatBytes(const std::vector<float>& values) {
  std::vector<uint8_t> raw(values.size() * sizeof(float));
  std::memcpy(raw.data(), values.data(), raw.size());
  return raw;
}

}  // namespace

std::vector<uint8_t> buildLlama(const LlamaOptions& o) {
  ModelBuilder b("llama");
  const int64_t C = o.embd, T = o.ctx, H = o.heads, K = o.kvHeads, F = o.ffn;
  const int64_t D = o.headDim ? o.headDim : C / H;
  b.input("idx", model::DType::i64, {-1, T});
  b.input("targets", model::DType::i64, {-1, T});
  // transformers' _init_weights: N(0, initializer_range) for linears and the embedding (its
  // padding row zero), biases zero, RMSNorm weights 1.
  const double std = o.initStd;
  auto linear = [&](const std::string& name, int64_t out, int64_t in, bool bias = false) {
    b.normalParameter(name + ".weight", {out, in}, 0.0, std, o.seed);
    if (bias) b.constantParameter(name + ".bias", {out}, 0.0);
  };
  auto project = [&](const std::string& name, const std::string& x, const std::string& y,
                     bool bias) {
    std::vector<std::string> inputs = {x, name + ".weight"};
    if (bias) inputs.push_back(name + ".bias");
    b.node(name, "Linear", inputs, {y});
  };
  // RMSNorm as LlamaRMSNorm: x / sqrt(mean(x²) + eps), times its weight (one fused op).
  auto rmsNorm = [&](const std::string& name, const std::string& x, const std::string& y) {
    b.constantParameter(name + ".weight", {C}, 1.0);
    b.node(name, "RMSNorm", {x, name + ".weight"}, {y}, {Attr::real("eps", o.rmsEps)});
  };
  // Rotary tables as LlamaRotaryEmbedding's, under the config's rope scaling: [T, D],
  // constants of the model, not tensors of its state.
  const int64_t positions = o.maxPositions ? o.maxPositions : T;
  std::vector<float> cosines, sines;
  ropeTables(ropeInverseFrequencies(o.rope, o.ropeTheta, D, positions), T,
             ropeAttentionFactor(o.rope, positions), cosines, sines);
  b.valuesParameter("rope_cos", {T, D}, floatBytes(cosines), false, true);
  b.valuesParameter("rope_sin", {T, D}, floatBytes(sines), false, true);
  // x·cos + rotate_half(x)·sin, rotate_half(x) = [-x₂, x₁] over the head's halves.
  auto rotary = [&](const std::string& name, const std::string& x, const std::string& y) {
    b.node(name + ".halves", "Split", {x}, {name + ".x1", name + ".x2"},
           {Attr::integer("axis", 3), Attr::ints("sizes", {D / 2, D / 2})});
    b.node(name + ".negate", "Scale", {name + ".x2"}, {name + ".neg_x2"},
           {Attr::real("factor", -1.0)});
    b.node(name + ".rotate", "Concat", {name + ".neg_x2", name + ".x1"}, {name + ".rot"},
           {Attr::integer("axis", 3)});
    b.node(name + ".cos", "Mul", {x, "rope_cos"}, {name + ".xc"});
    b.node(name + ".sin", "Mul", {name + ".rot", "rope_sin"}, {name + ".rs"});
    b.node(name, "Add", {name + ".xc", name + ".rs"}, {y});
  };
  // [B, T, heads·D] -> [B, heads, T, D].
  auto splitHeads = [&](const std::string& name, const std::string& x, int64_t heads,
                        const std::string& y) {
    b.node(name + ".heads", "Reshape", {x}, {name + ".bthd"},
           {Attr::ints("shape", {-1, T, heads, D})});
    b.node(name + ".transpose", "Transpose", {name + ".bthd"}, {y},
           {Attr::ints("perm", {0, 2, 1, 3})});
  };
  // repeat_kv: each of the K heads serves H/K query heads, in order.
  auto repeatKv = [&](const std::string& name, const std::string& x, const std::string& y) {
    if (K == H) {
      b.node(name, "Reshape", {x}, {y}, {Attr::ints("shape", {-1, H, T, D})});
      return;
    }
    b.node(name + ".unsqueeze", "Reshape", {x}, {name + ".bk1td"},
           {Attr::ints("shape", {-1, K, 1, T, D})});
    b.node(name + ".expand", "Expand", {name + ".bk1td"}, {name + ".bkrtd"},
           {Attr::ints("shape", {1, K, H / K, T, D})});
    b.node(name, "Reshape", {name + ".bkrtd"}, {y}, {Attr::ints("shape", {-1, H, T, D})});
  };

  b.normalParameter(
      "model.embed_tokens.weight", {o.vocab, C}, 0.0, std, o.seed,
      o.tieEmbeddings ? std::vector<std::string>{"lm_head.weight"} : std::vector<std::string>{});
  std::vector<NodeAttr> embedding;
  if (o.paddingIdx >= 0) embedding.push_back(Attr::integer("padding_idx", o.paddingIdx));
  b.node("model.embed_tokens", "Embedding", {"idx", "model.embed_tokens.weight"}, {"h0"},
         embedding);
  std::string x = "h0";
  std::vector<std::string> routerLosses;  // the MoE layers' terms of the training loss
  for (int64_t l = 0; l < o.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l), a = p + ".self_attn", m = p + ".mlp";
    linear(a + ".q_proj", H * D, C, o.qkvBias);
    linear(a + ".k_proj", K * D, C, o.qkvBias);
    linear(a + ".v_proj", K * D, C, o.qkvBias);
    linear(a + ".o_proj", C, H * D, o.outputBias);
    // A mixture of experts as Mixtral's block_sparse_moe (its router `gate`), the experts'
    // SwiGLU weights stacked [E, in, out]; Mixtral's checkpoints hold each expert's apart, as
    // w1 (gate), w3 (up) and w2 (down), [out, in].
    const bool moe = o.moe.atBlock(l);
    const std::string sparse = p + ".block_sparse_moe", experts = sparse + ".experts";
    if (moe) {
      const int64_t E = o.moe.experts;
      b.normalParameter(sparse + ".gate.weight", {E, C}, 0.0, std, o.seed);
      for (auto [ours, theirs, in, out] :
           {std::tuple{".gate_proj", ".w1", C, F}, std::tuple{".up_proj", ".w3", C, F},
            std::tuple{".down_proj", ".w2", F, C}}) {
        b.normalParameter(experts + ours + ".weight", {E, in, out}, 0.0, std, o.seed);
        std::vector<ExternalPart> parts;
        for (int64_t e = 0; e < E; ++e)
          parts.push_back({experts + "." + std::to_string(e) + theirs + ".weight", e, true});
        b.setExternal(experts + ours + ".weight", std::move(parts));
      }
    } else {
      linear(m + ".gate_proj", F, C, o.mlpBias);
      linear(m + ".up_proj", F, C, o.mlpBias);
      linear(m + ".down_proj", C, F, o.mlpBias);
    }

    rmsNorm(p + ".input_layernorm", x, p + ".attn_in");
    for (const char* proj : {".q_proj", ".k_proj", ".v_proj"})
      project(a + proj, p + ".attn_in", a + proj + ".out", o.qkvBias);
    splitHeads(a + ".q", a + ".q_proj.out", H, a + ".q.bhtd");
    splitHeads(a + ".k", a + ".k_proj.out", K, a + ".k.bktd");
    splitHeads(a + ".v", a + ".v_proj.out", K, a + ".v.bktd");
    rotary(a + ".q_rotary", a + ".q.bhtd", a + ".q.rot");
    rotary(a + ".k_rotary", a + ".k.bktd", a + ".k.rot");
    repeatKv(a + ".k_repeat", a + ".k.rot", a + ".k.bhtd");
    repeatKv(a + ".v_repeat", a + ".v.bktd", a + ".v.bhtd");
    causalAttention(b, a, a + ".q.rot", a + ".k.bhtd", a + ".v.bhtd", T, H, D, a + ".ctx",
                    {1.0 / std::sqrt(static_cast<double>(D)), o.attentionDropout});
    project(a + ".o_proj", a + ".ctx", a + ".out", o.outputBias);
    b.node(p + ".residual_1", "Add", {x, a + ".out"}, {p + ".h1"});

    rmsNorm(p + ".post_attention_layernorm", p + ".h1", p + ".mlp_in");
    std::string mlpOut = m + ".out";
    if (moe) {
      b.node(
          sparse, "MixtureOfExperts",
          {p + ".mlp_in", sparse + ".gate.weight", experts + ".gate_proj.weight",
           experts + ".up_proj.weight", experts + ".down_proj.weight"},
          {sparse + ".out", sparse + ".aux_loss", sparse + ".z_loss"},
          {Attr::integer("top_k", o.moe.topK), Attr::real("capacity_factor", o.moe.capacityFactor),
           Attr::integer("normalize", o.moe.normalize), Attr::text("activation", "swiglu"),
           Attr::text("score", o.moe.score)});
      routerLossTerms(b, o.moe, sparse, routerLosses);
      mlpOut = sparse + ".out";
    } else {
      project(m + ".gate_proj", p + ".mlp_in", m + ".gate", o.mlpBias);
      project(m + ".up_proj", p + ".mlp_in", m + ".up", o.mlpBias);
      b.node(m + ".act", "SwiGLU", {m + ".gate", m + ".up"}, {m + ".gated"});
      project(m + ".down_proj", m + ".gated", m + ".out", o.mlpBias);
    }
    b.node(p + ".residual_2", "Add", {p + ".h1", mlpOut}, {p + ".out"});
    x = p + ".out";
  }
  rmsNorm("model.norm", x, "hf");
  const std::string head = o.tieEmbeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  if (!o.tieEmbeddings) linear("lm_head", o.vocab, C);
  b.node("lm_head", "Linear", {"hf", head}, {"logits"});
  trainingLoss(b, routerLosses);
  b.setOutputs({"loss", "logits"}, "loss", "", "targets");
  // A mixture whose routing transformers' Mixtral does not compute (drops, sigmoid scores, dense
  // blocks between) has no config of it.
  if (!o.hf.config.empty()) {
    b.setHfConfig(o.hf.config);
    b.setHfGenerationConfig(o.hf.generationConfig);
  } else if (!o.moe.enabled() || mixtralShaped(o.moe)) {
    b.setHfConfig(hfConfig(o));
  }
  return b.finish();
}

}  // namespace dtc::zoo
