// GPT2Config (transformers' configuration_gpt2.py) as GPT2LMHeadModel builds it: Conv1D
// weights [in, out], learned positions, LayerNorm, a GELU MLP, the head tied to the embedding.
#include "hf/Families.h"

namespace dtc::hf {
namespace {

// GPT2Config's attribute_map: a config may name a setting by its common name instead.
StatusOr<int64_t> gptInteger(ConfigReader& c, const char* key, const char* alias,
                             int64_t fallback) {
  if (!c.has(key) && c.has(alias)) return c.integer(alias);
  c.inert({alias});
  return c.integer(key, fallback);
}

}  // namespace

StatusOr<zoo::GptOptions> readGpt2(ConfigReader& c, int64_t ctx) {
  DTC_RETURN_IF_ERROR(checkArchitecture(c, "GPT2LMHeadModel"));
  DTC_RETURN_IF_ERROR(readCommonKeys(c));
  zoo::GptOptions o;
  o.hfLayout = true;
  DTC_ASSIGN_OR_RETURN(o.vocab, c.integer("vocab_size", 50257));
  DTC_ASSIGN_OR_RETURN(o.positions, gptInteger(c, "n_positions", "max_position_embeddings", 1024));
  DTC_ASSIGN_OR_RETURN(o.embd, gptInteger(c, "n_embd", "hidden_size", 768));
  DTC_ASSIGN_OR_RETURN(o.layers, gptInteger(c, "n_layer", "num_hidden_layers", 12));
  DTC_ASSIGN_OR_RETURN(o.heads, gptInteger(c, "n_head", "num_attention_heads", 12));
  DTC_ASSIGN_OR_RETURN(o.inner, c.integer("n_inner", 0));
  DTC_ASSIGN_OR_RETURN(o.activation, c.text("activation_function", "gelu_new"));
  DTC_ASSIGN_OR_RETURN(o.residDropout, c.number("resid_pdrop", 0.1));
  DTC_ASSIGN_OR_RETURN(o.embdDropout, c.number("embd_pdrop", 0.1));
  DTC_ASSIGN_OR_RETURN(o.attnDropout, c.number("attn_pdrop", 0.1));
  DTC_ASSIGN_OR_RETURN(o.lnEps, c.number("layer_norm_epsilon", 1e-5));
  DTC_ASSIGN_OR_RETURN(o.initStd, c.number("initializer_range", 0.02));
  DTC_ASSIGN_OR_RETURN(o.scaleAttnWeights, c.boolean("scale_attn_weights", true));
  DTC_ASSIGN_OR_RETURN(o.scaleByInverseLayer, c.boolean("scale_attn_by_inverse_layer_idx", false));
  DTC_ASSIGN_OR_RETURN(o.tieEmbeddings, c.boolean("tie_word_embeddings", true));
  // GPT2DoubleHeadsModel's summary head; n_ctx is an older name of n_positions that 4.x
  // no longer reads; upcasting the scores changes only 16-bit arithmetic, which dtc keeps in
  // float32 for the softmax; GPT-2's embedding has no padding row.
  c.inert({"summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
           "summary_first_dropout", "n_ctx", "reorder_and_upcast_attn", "pad_token_id"});
  DTC_ASSIGN_OR_RETURN(o.ctx, trainingWindow(c, ctx, o.positions, "n_positions"));
  if (std::string error = zoo::validateGpt(o); !error.empty()) return c.error(error);
  return o;
}

}  // namespace dtc::hf
