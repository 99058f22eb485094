#include <cmath>
#include <map>

#include "zoo/Attention.h"
#include "zoo/Moe.h"
#include "zoo/Zoo.h"

namespace dtc::zoo {

std::string validateGpt(const GptOptions& o) {
  if (o.vocab <= 0 || o.ctx <= 0 || o.layers <= 0 || o.heads <= 0 || o.embd <= 0)
    return "vocab, ctx, layers, heads and embd must be positive";
  if (o.embd % o.heads != 0)
    return "--heads " + std::to_string(o.heads) + " does not divide --embd " +
           std::to_string(o.embd) + " (each head gets embd/heads channels)";
  if (o.moe.enabled() && o.hfLayout)
    return "--layout hf has no mixture-of-experts form (transformers' GPT-2 has dense MLPs)";
  if (o.positions != 0 && o.positions < o.ctx)
    return "the context (" + std::to_string(o.ctx) + ") is longer than the model's " +
           std::to_string(o.positions) + " positions";
  if (o.inner < 0) return "the MLP's width must be positive";
  const std::string& a = o.activation;
  if (a != "gelu_new" && a != "gelu_pytorch_tanh" && a != "gelu_fast" && a != "gelu" &&
      a != "relu" && a != "silu" && a != "swish" && a != "tanh")
    return "activation '" + a + "' is not one dtc implements (gelu_new, gelu_pytorch_tanh, " +
           "gelu_fast, gelu, relu, silu, tanh)";
  for (double p : {o.embdDropout, o.attnDropout, o.residDropout})
    if (!(p >= 0 && p < 1)) return "dropout probabilities must be in [0, 1)";
  if (!(o.lnEps > 0)) return "the LayerNorm epsilon must be > 0";
  if (o.moe.enabled() && !o.tieEmbeddings)
    return "a mixture-of-experts GPT ties its head to the token embedding";
  return validateMoe(o.moe);
}

// transformers' GPT2Config for the model: the settings that decide its tensors and its arithmetic.
// (The zoo's own options: a model from a folder carries that folder's config instead. GPT-2's
// end-of-text token is its vocabulary's last, as 50256 is of 50257.)
std::string gpt2Config(const GptOptions& o) {
  auto integer = [](int64_t v) { return std::to_string(v); };
  return "{\"architectures\": [\"GPT2LMHeadModel\"], \"model_type\": \"gpt2\", \"vocab_size\": " +
         integer(o.vocab) + ", \"n_positions\": " + integer(o.positions ? o.positions : o.ctx) +
         ", \"n_embd\": " + integer(o.embd) + ", \"n_layer\": " + integer(o.layers) +
         ", \"n_head\": " + integer(o.heads) +
         ", \"n_inner\": null, \"activation_function\": \"gelu_new\", "
         "\"resid_pdrop\": 0.0, \"embd_pdrop\": 0.0, \"attn_pdrop\": 0.0, "
         "\"scale_attn_weights\": true, \"scale_attn_by_inverse_layer_idx\": false, "
         "\"layer_norm_epsilon\": 1e-05, \"tie_word_embeddings\": true, "
         "\"bos_token_id\": " +
         integer(o.vocab - 1) + ", \"eos_token_id\": " + integer(o.vocab - 1) +
         ", "
         "\"initializer_range\": 0.02, \"torch_dtype\": \"float32\"}";
}

namespace {

// transformers' ACT2FN as dtc's ops: x -> y under `prefix`.
void activation(ModelBuilder& b, const std::string& kind, const std::string& prefix,
                const std::string& x, const std::string& y) {
  if (kind == "gelu_new" || kind == "gelu_pytorch_tanh" || kind == "gelu_fast")
    b.node(prefix, "Gelu", {x}, {y}, {Attr::text("approximate", "tanh")});
  else if (kind == "gelu")
    b.node(prefix, "Gelu", {x}, {y});
  else if (kind == "relu")
    b.node(prefix, "Relu", {x}, {y});
  else if (kind == "tanh")
    b.node(prefix, "Tanh", {x}, {y});
  else
    b.node(prefix, "Silu", {x}, {y});
}

// F.dropout(x, p) in training (nothing at p = 0): `x` renamed to what follows.
std::string dropout(ModelBuilder& b, const std::string& name, const std::string& x, double p) {
  if (p <= 0) return x;
  b.node(name, "Dropout", {x}, {name + ".out"}, {Attr::real("ratio", p)});
  return name + ".out";
}

}  // namespace

std::vector<uint8_t> buildGpt(const GptOptions& o) {
  ModelBuilder b("gpt");
  const int64_t C = o.embd, T = o.ctx, H = o.heads, D = C / H;
  const int64_t P = o.positions ? o.positions : T, M = o.inner ? o.inner : 4 * C;
  b.input("idx", model::DType::i64, {-1, T});
  b.input("targets", model::DType::i64, {-1, T});
  // GPT-2: N(0, 0.02) everywhere, residual projections N(0, 0.02/sqrt(2L)), biases 0,
  // LayerNorm weight 1 and bias 0 (nanoGPT's _init_weights; transformers' for the config's
  // initializer_range).
  const double std = o.initStd, residualStd = o.initStd / std::sqrt(2.0 * o.layers);
  std::map<std::string, std::pair<int64_t, int64_t>> widths;  // each projection's (in, out)
  auto linear = [&](const std::string& prefix, int64_t out, int64_t in, double s) {
    const std::vector<int64_t> shape =
        o.hfLayout ? std::vector<int64_t>{in, out} : std::vector<int64_t>{out, in};
    b.normalParameter(prefix + ".weight", shape, 0.0, s, o.seed);
    b.constantParameter(prefix + ".bias", {out}, 0.0);
    widths[prefix] = {in, out};
  };
  // y = x·Wᵀ + b (nn.Linear), or in Hugging Face's Conv1D layout y = x·W + b over the rows
  // [B·T, in] (as its addmm computes it).
  auto project = [&](const std::string& prefix, const std::string& x, const std::string& y) {
    const std::string w = prefix + ".weight", bias = prefix + ".bias";
    if (!o.hfLayout) {
      b.node(prefix, "Linear", {x, w, bias}, {y});
      return;
    }
    const auto [in, out] = widths.at(prefix);
    b.node(prefix + ".rows", "Reshape", {x}, {prefix + ".x2"}, {Attr::ints("shape", {-1, in})});
    b.node(prefix + ".matmul", "MatMul", {prefix + ".x2", w}, {prefix + ".xw"});
    b.node(prefix + ".add_bias", "Add", {prefix + ".xw", bias}, {prefix + ".y2"});
    b.node(prefix, "Reshape", {prefix + ".y2"}, {y}, {Attr::ints("shape", {-1, T, out})});
  };
  auto layerNorm = [&](const std::string& prefix) {
    b.constantParameter(prefix + ".weight", {C}, 1.0);
    b.constantParameter(prefix + ".bias", {C}, 0.0);
  };
  auto ln = [&](const std::string& prefix, const std::string& x, const std::string& y) {
    b.node(prefix, "LayerNorm", {x, prefix + ".weight", prefix + ".bias"}, {y},
           {Attr::real("eps", o.lnEps)});
  };

  // nanoGPT ties lm_head.weight to it: its state_dict lists the tensor under both names.
  b.normalParameter(
      "transformer.wte.weight", {o.vocab, C}, 0.0, std, o.seed,
      o.tieEmbeddings ? std::vector<std::string>{"lm_head.weight"} : std::vector<std::string>{});
  b.normalParameter("transformer.wpe.weight", {P, C}, 0.0, std, o.seed);
  b.node("transformer.wte", "Embedding", {"idx", "transformer.wte.weight"}, {"tok_emb"});
  std::string positions = "transformer.wpe.weight";
  if (P > T) {  // a window shorter than the model's positions reads their first T rows
    b.node("transformer.wpe.window", "Split", {positions},
           {"transformer.wpe.rows", "transformer.wpe.unused"},
           {Attr::integer("axis", 0), Attr::ints("sizes", {T, P - T})});
    positions = "transformer.wpe.rows";
  }
  b.node("transformer.wpe", "Add", {"tok_emb", positions}, {"x0"});
  std::string x = dropout(b, "transformer.drop", "x0", o.embdDropout);
  std::vector<std::string> routerLosses;  // the MoE layers' terms of the training loss
  for (int64_t l = 0; l < o.layers; ++l) {
    std::string p = "transformer.h." + std::to_string(l), a = p + ".attn", m = p + ".mlp";
    layerNorm(p + ".ln_1");
    linear(a + ".c_attn", 3 * C, C, std);
    linear(a + ".c_proj", C, C, residualStd);
    layerNorm(p + ".ln_2");
    const bool moe = o.moe.atBlock(l);
    if (moe) {
      // The router as Mixtral's gate [E, C]; the experts' weights stacked [E, in, out].
      const int64_t E = o.moe.experts;
      b.normalParameter(m + ".gate.weight", {E, C}, 0.0, std, o.seed);
      b.normalParameter(m + ".experts.c_fc.weight", {E, C, M}, 0.0, std, o.seed);
      b.constantParameter(m + ".experts.c_fc.bias", {E, M}, 0.0);
      b.normalParameter(m + ".experts.c_proj.weight", {E, M, C}, 0.0, residualStd, o.seed);
      b.constantParameter(m + ".experts.c_proj.bias", {E, C}, 0.0);
    } else {
      linear(m + ".c_fc", M, C, std);
      linear(m + ".c_proj", C, M, residualStd);
    }

    ln(p + ".ln_1", x, p + ".ln_1.out");
    project(a + ".c_attn", p + ".ln_1.out", a + ".qkv");
    b.node(a + ".split", "Split", {a + ".qkv"}, {a + ".q", a + ".k", a + ".v"},
           {Attr::integer("axis", 2)});
    for (const char* t : {".q", ".k", ".v"}) {
      b.node(a + t + ".heads", "Reshape", {a + t}, {a + t + ".bthd"},
             {Attr::ints("shape", {-1, T, H, D})});
      b.node(a + t + ".transpose", "Transpose", {a + t + ".bthd"}, {a + t + ".bhtd"},
             {Attr::ints("perm", {0, 2, 1, 3})});
    }
    // GPT2Attention: scores over sqrt(D) (scale_attn_weights), and over the layer's number
    // (scale_attn_by_inverse_layer_idx).
    double scale = o.scaleAttnWeights ? 1.0 / std::sqrt(static_cast<double>(D)) : 1.0;
    if (o.scaleByInverseLayer) scale /= static_cast<double>(l + 1);
    causalAttention(b, a, a + ".q.bhtd", a + ".k.bhtd", a + ".v.bhtd", T, H, D, a + ".ctx",
                    {scale, o.attnDropout});
    project(a + ".c_proj", a + ".ctx", a + ".proj");
    const std::string attnOut = dropout(b, a + ".resid_dropout", a + ".proj", o.residDropout);
    b.node(p + ".residual_1", "Add", {x, attnOut}, {p + ".x1"});
    ln(p + ".ln_2", p + ".x1", p + ".ln_2.out");
    std::string mlpOut = m + ".out";
    if (moe) {
      const std::string e = m + ".experts";
      b.node(
          m, "MixtureOfExperts",
          {p + ".ln_2.out", m + ".gate.weight", e + ".c_fc.weight", e + ".c_fc.bias",
           e + ".c_proj.weight", e + ".c_proj.bias"},
          {m + ".out", m + ".aux_loss", m + ".z_loss"},
          {Attr::integer("top_k", o.moe.topK), Attr::real("capacity_factor", o.moe.capacityFactor),
           Attr::integer("normalize", o.moe.normalize), Attr::text("activation", "gelu_tanh"),
           Attr::text("score", o.moe.score)});
      routerLossTerms(b, o.moe, m, routerLosses);
    } else {
      project(m + ".c_fc", p + ".ln_2.out", m + ".fc");
      activation(b, o.activation, m + ".act", m + ".fc", m + ".act");
      project(m + ".c_proj", m + ".act", m + ".proj");
      mlpOut = dropout(b, m + ".dropout", m + ".proj", o.residDropout);
    }
    b.node(p + ".residual_2", "Add", {p + ".x1", mlpOut}, {p + ".out"});
    x = p + ".out";
  }
  layerNorm("transformer.ln_f");
  ln("transformer.ln_f", x, "xf");
  // The LM head is tied to the token embedding (nanoGPT: lm_head.weight = wte.weight) unless
  // the config unties it.
  if (!o.tieEmbeddings) b.normalParameter("lm_head.weight", {o.vocab, C}, 0.0, std, o.seed);
  b.node("lm_head", "Linear", {"xf", o.tieEmbeddings ? "transformer.wte.weight" : "lm_head.weight"},
         {"logits"});
  trainingLoss(b, routerLosses);
  b.setOutputs({"loss", "logits"}, "loss", "", "targets");
  if (!o.hf.config.empty()) {
    b.setHfConfig(o.hf.config);
    b.setHfGenerationConfig(o.hf.generationConfig);
  } else if (o.hfLayout) {
    b.setHfConfig(gpt2Config(o));
  }
  return b.finish();
}

}  // namespace dtc::zoo
