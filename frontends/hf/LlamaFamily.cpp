// LlamaConfig, MistralConfig, Qwen2Config and MixtralConfig (transformers' configuration_*.py):
// one decoder with RMSNorm, rotary embeddings, grouped-query attention and SwiGLU MLPs, which
// the families set apart by a few settings.
#include <cmath>

#include "hf/Families.h"

namespace dtc::hf {
namespace {

// rope_scaling as transformers' rope_config_validation reads it: `rope_type` (or the older
// `type`) and the keys of that type, no others.
Status readRopeScaling(ConfigReader& config, zoo::RopeScaling& rope) {
  const io::Json* scaling = config.value("rope_scaling");
  if (!scaling || scaling->isNull()) return Status::Ok();
  if (!scaling->isObject()) return config.error("rope_scaling must be an object or null");
  const io::Json* type = scaling->find("rope_type");
  if (!type) type = scaling->find("type");
  if (!type || !type->isString()) return config.error("rope_scaling has no rope_type");
  rope.type = type->asString();
  auto number = [&](const char* key, double& field) -> Status {
    const io::Json* v = scaling->find(key);
    if (!v || v->isNull()) return Status::Ok();
    if (!v->isNumber())
      return config.error(std::string("rope_scaling.") + key + " must be a number");
    field = v->asDouble();
    return Status::Ok();
  };
  auto factors = [&](const char* key, std::vector<double>& field) -> Status {
    const io::Json* v = scaling->find(key);
    if (!v || !v->isArray()) return Status::Ok();
    for (const io::Json& f : v->asArray()) {
      if (!f.isNumber())
        return config.error(std::string("rope_scaling.") + key + " must hold numbers");
      field.push_back(f.asDouble());
    }
    return Status::Ok();
  };
  double original = 0;
  DTC_RETURN_IF_ERROR(number("factor", rope.factor));
  DTC_RETURN_IF_ERROR(number("low_freq_factor", rope.lowFreqFactor));
  DTC_RETURN_IF_ERROR(number("high_freq_factor", rope.highFreqFactor));
  DTC_RETURN_IF_ERROR(number("original_max_position_embeddings", original));
  DTC_RETURN_IF_ERROR(number("attention_factor", rope.attentionFactor));
  DTC_RETURN_IF_ERROR(number("beta_fast", rope.betaFast));
  DTC_RETURN_IF_ERROR(number("beta_slow", rope.betaSlow));
  DTC_RETURN_IF_ERROR(factors("long_factor", rope.longFactor));
  DTC_RETURN_IF_ERROR(factors("short_factor", rope.shortFactor));
  rope.originalMaxPositions = static_cast<int64_t>(original);
  // The keys each type takes (transformers' _validate_*_parameters).
  std::set<std::string> allowed = {"rope_type", "type", "factor"};
  if (rope.type == "llama3")
    allowed.insert({"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"});
  if (rope.type == "yarn") allowed.insert({"attention_factor", "beta_fast", "beta_slow"});
  if (rope.type == "longrope") allowed.insert({"long_factor", "short_factor", "attention_factor"});
  if (rope.type == "default") allowed = {"rope_type", "type"};
  for (const auto& [key, v] : scaling->members())
    if (!allowed.count(key))
      return config.error("rope_scaling." + key + " is not a setting of rope_type '" + rope.type +
                          "' that dtc implements");
  return Status::Ok();
}

// nn.Embedding's padding_idx from pad_token_id (negative: from the end, as nn.Embedding takes it).
StatusOr<int64_t> paddingRow(ConfigReader& config, int64_t vocab) {
  const io::Json* pad = config.value("pad_token_id");
  if (!pad || pad->isNull()) return int64_t{-1};
  if (!pad->isInteger()) return config.error("pad_token_id must be an integer or null");
  const int64_t row = pad->asInt() < 0 ? pad->asInt() + vocab : pad->asInt();
  if (row < 0 || row >= vocab)
    return config.error("pad_token_id " + std::to_string(pad->asInt()) +
                        " is outside the vocabulary of " + std::to_string(vocab));
  return row;
}

}  // namespace

StatusOr<zoo::LlamaOptions> readLlamaFamily(ConfigReader& c, int64_t ctx) {
  const std::string& type = c.modelType();
  const bool llama = type == "llama", mistral = type == "mistral", qwen2 = type == "qwen2",
             mixtral = type == "mixtral";
  DTC_RETURN_IF_ERROR(checkArchitecture(c, llama     ? "LlamaForCausalLM"
                                           : mistral ? "MistralForCausalLM"
                                           : qwen2   ? "Qwen2ForCausalLM"
                                                     : "MixtralForCausalLM"));
  DTC_RETURN_IF_ERROR(readCommonKeys(c));
  zoo::LlamaOptions o;
  // Each class's defaults, where config.json leaves a setting out.
  DTC_ASSIGN_OR_RETURN(o.vocab, c.integer("vocab_size", llama ? 32000 : qwen2 ? 151936 : 32000));
  DTC_ASSIGN_OR_RETURN(o.embd, c.integer("hidden_size", 4096));
  DTC_ASSIGN_OR_RETURN(o.ffn, c.integer("intermediate_size", llama   ? 11008
                                                             : qwen2 ? 22016
                                                                     : 14336));
  DTC_ASSIGN_OR_RETURN(o.layers, c.integer("num_hidden_layers", 32));
  DTC_ASSIGN_OR_RETURN(o.heads, c.integer("num_attention_heads", 32));
  DTC_ASSIGN_OR_RETURN(o.kvHeads,
                       c.integer("num_key_value_heads", llama || qwen2 ? o.heads : int64_t{8}));
  DTC_ASSIGN_OR_RETURN(std::string act, c.text("hidden_act", "silu"));
  if (act != "silu")
    return c.error("hidden_act is '" + act + "': dtc's Llama-family MLP is SwiGLU (silu)");
  int64_t positions = 0;
  DTC_ASSIGN_OR_RETURN(positions, c.integer("max_position_embeddings", llama   ? 2048
                                                                       : qwen2 ? 32768
                                                                               : 131072));
  DTC_ASSIGN_OR_RETURN(o.initStd, c.number("initializer_range", 0.02));
  DTC_ASSIGN_OR_RETURN(o.rmsEps, c.number("rms_norm_eps", mixtral ? 1e-5 : 1e-6));
  DTC_ASSIGN_OR_RETURN(o.tieEmbeddings, c.boolean("tie_word_embeddings", false));
  DTC_ASSIGN_OR_RETURN(o.ropeTheta, c.number("rope_theta", mixtral ? 1e6 : 10000.0));
  DTC_ASSIGN_OR_RETURN(o.attentionDropout, c.number("attention_dropout", 0.0));
  DTC_ASSIGN_OR_RETURN(o.paddingIdx, paddingRow(c, o.vocab));
  if (llama) {
    DTC_RETURN_IF_ERROR(readRopeScaling(c, o.rope));
    DTC_ASSIGN_OR_RETURN(o.qkvBias, c.boolean("attention_bias", false));
    o.outputBias = o.qkvBias;
    DTC_ASSIGN_OR_RETURN(o.mlpBias, c.boolean("mlp_bias", false));
    // Tensor-parallel pretraining's slices of each projection: the same products.
    c.inert({"pretraining_tp"});
  }
  if (qwen2) o.qkvBias = true;
  // transformers 4.44's Llama ignores head_dim; later versions (and Mistral) size heads by it.
  if (c.has("head_dim") || mistral) {
    DTC_ASSIGN_OR_RETURN(o.headDim, c.integer("head_dim", o.heads > 0 ? o.embd / o.heads : 0));
  }
  // A sliding window the family's attention applies (Mistral's, Mixtral's; Qwen2's when
  // use_sliding_window): exact only where the training window fits inside it.
  int64_t window = 0;
  if (mistral || mixtral || qwen2) {
    bool applies = true;
    if (qwen2) {
      int64_t below = 0;
      DTC_ASSIGN_OR_RETURN(applies, c.boolean("use_sliding_window", false));
      DTC_ASSIGN_OR_RETURN(below, c.integer("max_window_layers", 28));
      applies = applies && below < o.layers;  // the layers from max_window_layers on
    }
    // A missing key is the class's default: 4096, or none for Mixtral.
    const io::Json* sliding = c.value("sliding_window");
    int64_t w = sliding ? 0 : mixtral ? 0 : 4096;
    if (sliding && !sliding->isNull()) {
      if (!sliding->isInteger() || sliding->asInt() <= 0)
        return c.error("sliding_window must be a positive integer or null");
      w = sliding->asInt();
    }
    if (applies) window = w;
  }
  if (mixtral) {
    DTC_ASSIGN_OR_RETURN(o.moe.experts, c.integer("num_local_experts", 8));
    DTC_ASSIGN_OR_RETURN(o.moe.topK, c.integer("num_experts_per_tok", 2));
    DTC_ASSIGN_OR_RETURN(bool routerLoss, c.boolean("output_router_logits", false));
    if (routerLoss)
      return c.error(
          "output_router_logits is true: Mixtral's load-balancing loss over every layer's "
          "routing at once is not implemented (dtc's is per layer)");
    c.inert({"router_aux_loss_coef"});  // read only with output_router_logits
    DTC_ASSIGN_OR_RETURN(double jitter, c.number("router_jitter_noise", 0.0));
    if (jitter != 0)
      return c.error("router_jitter_noise is not 0: random router inputs are not implemented");
    if (o.moe.experts < 1 || o.moe.topK < 1 || o.moe.topK > o.moe.experts)
      return c.error("num_experts_per_tok must be in [1, num_local_experts]");
    // Mixtral drops no token: a capacity of every token of the sequence, and no router loss.
    o.moe.capacityFactor = static_cast<double>(o.moe.experts) / static_cast<double>(o.moe.topK);
    o.moe.auxWeight = 0;
    o.moe.zWeight = 0;
  }
  DTC_ASSIGN_OR_RETURN(
      o.ctx, trainingWindow(c, window > 0 && window < positions && ctx == 0 ? window : ctx,
                            positions, "max_position_embeddings"));
  if (window > 0 && o.ctx > window)
    return c.error("sliding_window " + std::to_string(window) + " is shorter than the window of " +
                   std::to_string(o.ctx) +
                   " tokens: dtc has no sliding-window attention (train with --ctx at most " +
                   std::to_string(window) + ")");
  o.maxPositions = positions;
  if (std::string error = zoo::validateLlama(o); !error.empty()) return c.error(error);
  return o;
}

}  // namespace dtc::hf
