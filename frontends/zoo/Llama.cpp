#include <cmath>
#include <cstdio>
#include <cstring>

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
      o.embd <= 0 || o.ffn <= 0)
    return "vocab, ctx, layers, heads, kv-heads, embd and ffn must be positive";
  if (o.embd % o.heads != 0)
    return "--heads " + std::to_string(o.heads) + " does not divide --embd " +
           std::to_string(o.embd) + " (each head gets embd/heads channels)";
  if (o.heads % o.kvHeads != 0)
    return "--kv-heads " + std::to_string(o.kvHeads) + " does not divide --heads " +
           std::to_string(o.heads) + " (each key/value head serves heads/kv-heads query heads)";
  if ((o.embd / o.heads) % 2 != 0)
    return "a head's size (embd/heads = " + std::to_string(o.embd / o.heads) +
           ") must be even: rotary embeddings turn its channels in pairs";
  if (!(o.ropeTheta > 0)) return "--rope-theta must be > 0";
  if (!(o.rmsEps > 0)) return "--rms-eps must be > 0";
  return validateMoe(o.moe);
}

namespace {

// transformers' LlamaConfig for these options (config.json's text).
std::string hfConfig(const LlamaOptions& o) {
  auto real = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", v);
    return std::string(text);
  };
  auto integer = [](int64_t v) { return std::to_string(v); };
  return "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
         "\"vocab_size\": " +
         integer(o.vocab) + ", \"hidden_size\": " + integer(o.embd) +
         ", \"intermediate_size\": " + integer(o.ffn) +
         ", \"num_hidden_layers\": " + integer(o.layers) +
         ", \"num_attention_heads\": " + integer(o.heads) +
         ", \"num_key_value_heads\": " + integer(o.kvHeads) +
         ", \"max_position_embeddings\": " + integer(o.ctx) +
         ", \"rms_norm_eps\": " + real(o.rmsEps) + ", \"rope_theta\": " + real(o.ropeTheta) +
         ", \"tie_word_embeddings\": " + (o.tieEmbeddings ? "true" : "false") +
         ", \"hidden_act\": \"silu\", \"attention_bias\": false, \"mlp_bias\": false, "
         "\"initializer_range\": 0.02, \"torch_dtype\": \"float32\"}";
}

std::vector<uint8_t> floatBytes(const std::vector<float>& values) {
  std::vector<uint8_t> raw(values.size() * sizeof(float));
  std::memcpy(raw.data(), values.data(), raw.size());
  return raw;
}

}  // namespace

std::vector<uint8_t> buildLlama(const LlamaOptions& o) {
  ModelBuilder b("llama");
  const int64_t C = o.embd, T = o.ctx, H = o.heads, K = o.kvHeads, D = C / H, F = o.ffn;
  b.input("idx", model::DType::i64, {-1, T});
  b.input("targets", model::DType::i64, {-1, T});
  // transformers' _init_weights: N(0, initializer_range 0.02) for linears and the embedding,
  // RMSNorm weights 1.
  const double std = 0.02;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    b.normalParameter(name + ".weight", {out, in}, 0.0, std, o.seed);
  };
  // RMSNorm as LlamaRMSNorm: x / sqrt(mean(x²) + eps), times its weight (one fused op).
  auto rmsNorm = [&](const std::string& name, const std::string& x, const std::string& y) {
    b.constantParameter(name + ".weight", {C}, 1.0);
    b.node(name, "RMSNorm", {x, name + ".weight"}, {y}, {Attr::real("eps", o.rmsEps)});
  };
  // Rotary tables as LlamaRotaryEmbedding's: angle t·θ^(-2i/D) for channel pair i, the D/2
  // angles twice over ([T, D]); constants of the model, not tensors of its state.
  std::vector<float> cosines(T * D), sines(T * D);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < D / 2; ++i) {
      const float inverse = static_cast<float>(
          1.0 / std::pow(o.ropeTheta, static_cast<double>(2 * i) / static_cast<double>(D)));
      const float angle = static_cast<float>(t) * inverse;
      for (int64_t half : {int64_t{0}, D / 2}) {
        cosines[t * D + i + half] = std::cos(angle);
        sines[t * D + i + half] = std::sin(angle);
      }
    }
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
  b.node("model.embed_tokens", "Embedding", {"idx", "model.embed_tokens.weight"}, {"h0"});
  std::string x = "h0";
  std::vector<std::string> routerLosses;  // the MoE layers, whose losses join the training loss
  for (int64_t l = 0; l < o.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l), a = p + ".self_attn", m = p + ".mlp";
    linear(a + ".q_proj", H * D, C);
    linear(a + ".k_proj", K * D, C);
    linear(a + ".v_proj", K * D, C);
    linear(a + ".o_proj", C, H * D);
    // A mixture of experts as Mixtral's block_sparse_moe (its router `gate`), the experts'
    // SwiGLU weights stacked [E, in, out].
    const bool moe = o.moe.atBlock(l);
    const std::string sparse = p + ".block_sparse_moe", experts = sparse + ".experts";
    if (moe) {
      const int64_t E = o.moe.experts;
      b.normalParameter(sparse + ".gate.weight", {E, C}, 0.0, std, o.seed);
      b.normalParameter(experts + ".gate_proj.weight", {E, C, F}, 0.0, std, o.seed);
      b.normalParameter(experts + ".up_proj.weight", {E, C, F}, 0.0, std, o.seed);
      b.normalParameter(experts + ".down_proj.weight", {E, F, C}, 0.0, std, o.seed);
    } else {
      linear(m + ".gate_proj", F, C);
      linear(m + ".up_proj", F, C);
      linear(m + ".down_proj", C, F);
    }

    rmsNorm(p + ".input_layernorm", x, p + ".attn_in");
    for (const char* proj : {".q_proj", ".k_proj", ".v_proj"})
      b.node(a + proj, "Linear", {p + ".attn_in", a + proj + ".weight"}, {a + proj + ".out"});
    splitHeads(a + ".q", a + ".q_proj.out", H, a + ".q.bhtd");
    splitHeads(a + ".k", a + ".k_proj.out", K, a + ".k.bktd");
    splitHeads(a + ".v", a + ".v_proj.out", K, a + ".v.bktd");
    rotary(a + ".q_rotary", a + ".q.bhtd", a + ".q.rot");
    rotary(a + ".k_rotary", a + ".k.bktd", a + ".k.rot");
    repeatKv(a + ".k_repeat", a + ".k.rot", a + ".k.bhtd");
    repeatKv(a + ".v_repeat", a + ".v.bktd", a + ".v.bhtd");
    causalAttention(b, a, a + ".q.rot", a + ".k.bhtd", a + ".v.bhtd", T, H, D, a + ".ctx");
    b.node(a + ".o_proj", "Linear", {a + ".ctx", a + ".o_proj.weight"}, {a + ".out"});
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
      routerLosses.push_back(sparse);
      mlpOut = sparse + ".out";
    } else {
      b.node(m + ".gate_proj", "Linear", {p + ".mlp_in", m + ".gate_proj.weight"}, {m + ".gate"});
      b.node(m + ".up_proj", "Linear", {p + ".mlp_in", m + ".up_proj.weight"}, {m + ".up"});
      b.node(m + ".act", "SwiGLU", {m + ".gate", m + ".up"}, {m + ".gated"});
      b.node(m + ".down_proj", "Linear", {m + ".gated", m + ".down_proj.weight"}, {m + ".out"});
    }
    b.node(p + ".residual_2", "Add", {p + ".h1", mlpOut}, {p + ".out"});
    x = p + ".out";
  }
  rmsNorm("model.norm", x, "hf");
  const std::string head = o.tieEmbeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  if (!o.tieEmbeddings) linear("lm_head", o.vocab, C);
  b.node("lm_head", "Linear", {"hf", head}, {"logits"});
  trainingLoss(b, o.moe, routerLosses);
  b.setOutputs({"loss", "logits"}, "loss", "", "targets");
  // transformers' Mixtral keeps each expert's weights apart: no config for the stacked layout.
  if (!o.moe.enabled()) b.setHfConfig(hfConfig(o));
  return b.finish();
}

}  // namespace dtc::zoo
