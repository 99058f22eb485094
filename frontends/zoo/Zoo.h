// The built-in models (`dtc zoo`), written with the model builder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/ModelBuilder.h"
#include "zoo/Rotary.h"

namespace dtc::zoo {

// Node attributes, as the zoo's builders spell them.
using Attr = NodeAttr;

// The Hugging Face files a model built from a folder carries as they were (config.json's and
// generation_config.json's text), in place of the config the builder would write.
struct HfTexts {
  std::string config;
  std::string generationConfig;
};

struct MlpOptions {
  int64_t input = 784;
  std::vector<int64_t> hidden = {256, 128};
  int64_t classes = 10;
  uint64_t seed = 0;
};

// Linear -> ReLU -> ... -> Linear with cross-entropy loss; parameters named fc0.weight,
// fc0.bias, ... in PyTorch's [out, in] layout with nn.Linear's default initialisation.
std::vector<uint8_t> buildMlp(const MlpOptions& options);

// Mixture-of-experts MLPs (GShard/Switch routing with a capacity per expert): every `every`-th
// block's MLP (blocks 0, N, 2N, ...) becomes `experts` MLPs behind a softmax router that sends
// each token to its `topK` best. The training loss adds auxWeight · Switch's load-balancing loss
// and zWeight · the router z-loss of every such layer.
struct MoeOptions {
  int64_t experts = 0;  // 0: every MLP dense
  int64_t topK = 2;
  double capacityFactor = 1.25;
  int64_t every = 1;
  bool normalize = true;          // the k weights renormalised to sum to 1 (Mixtral)
  std::string score = "softmax";  // the router's scores: softmax, or sigmoid (DeepSeek-V3)
  double auxWeight = 0.01;
  double zWeight = 0.001;
  bool enabled() const { return experts > 0; }
  bool atBlock(int64_t layer) const { return enabled() && layer % every == 0; }
};

// "" when valid, else the reason (top-k within the experts, a positive capacity factor...).
std::string validateMoe(const MoeOptions& options);

struct GptOptions {
  int64_t vocab = 256;
  int64_t ctx = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t embd = 64;
  uint64_t seed = 0;
  // Hugging Face's GPT2LMHeadModel layout: Conv1D weights [in, out] (x·W + b), and its config,
  // so that --init reads and --save --format hf writes its checkpoints as they are.
  bool hfLayout = false;
  MoeOptions moe;
  // As transformers' GPT2Config can set them (the defaults are nanoGPT's: no dropout, GELU's
  // tanh form, a head tied to the token embedding).
  int64_t positions = 0;                // rows of the position embedding (n_positions; 0: ctx)
  int64_t inner = 0;                    // the MLP's width (n_inner; 0: 4·embd)
  std::string activation = "gelu_new";  // gelu_new, gelu_pytorch_tanh, gelu, relu, silu, tanh
  double lnEps = 1e-5;
  double embdDropout = 0, attnDropout = 0, residDropout = 0;
  bool scaleAttnWeights = true;      // scores over sqrt(head size)
  bool scaleByInverseLayer = false;  // and over the layer's number (1-based)
  bool tieEmbeddings = true;
  double initStd = 0.02;
  HfTexts hf;
};

// Checks the options (heads must divide the embedding...): "" when valid, else the reason.
std::string validateGpt(const GptOptions& options);

struct ConvNetOptions {
  int64_t classes = 10;
  uint64_t seed = 0;
};

// The classic two-block MNIST ConvNet: [Conv2d(5, pad 2) -> BatchNorm2d -> ReLU -> MaxPool2d(2)]
// x 2 (16 then 32 channels) -> flatten -> Linear(7·7·32, classes), named as PyTorch's
// nn.Sequential (layer1.0.weight, layer1.1.running_mean, ..., fc.weight) with PyTorch's
// default initialisation. Input: `input` [N, 784] (28×28 images, reshaped inside).
std::vector<uint8_t> buildConvNet(const ConvNetOptions& options);

// GPT-2 as nanoGPT's model.py (biases on, no dropout, LM head tied to the token embedding),
// with its parameter names, layouts and initialisation; inputs idx and targets [B, T] (int64).
std::vector<uint8_t> buildGpt(const GptOptions& options);

struct LlamaOptions {
  int64_t vocab = 256;
  int64_t ctx = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kvHeads = 4;  // key/value heads: fewer than `heads` is grouped-query attention
  int64_t embd = 64;
  int64_t ffn = 176;  // the SwiGLU MLP's inner size
  double ropeTheta = 10000.0;
  double rmsEps = 1e-6;
  bool tieEmbeddings = false;  // the LM head reads the token embedding
  uint64_t seed = 0;
  MoeOptions moe;  // SwiGLU experts of --ffn each, as Mixtral's block_sparse_moe
  // As transformers' Llama-family configs can set them.
  int64_t headDim = 0;      // 0: embd/heads (Mistral's head_dim)
  bool qkvBias = false;     // q, k and v projections with biases (Qwen2; Llama's attention_bias)
  bool outputBias = false;  // the output projection too (Llama's attention_bias)
  bool mlpBias = false;     // gate, up and down projections with biases (Llama's mlp_bias)
  RopeScaling rope;
  int64_t maxPositions = 0;  // max_position_embeddings, which rope scaling reads (0: ctx)
  int64_t paddingIdx = -1;   // nn.Embedding's padding_idx (pad_token_id): that row never trains
  double attentionDropout = 0;
  double initStd = 0.02;  // initializer_range
  HfTexts hf;
};

// transformers' LlamaConfig default for an embedding size: 8/3 of it, rounded up to 16 (as
// Meta's llama sizes their MLP: 2/3 of 4C).
int64_t defaultLlamaFfn(int64_t embd);

// "" when valid, else the reason (kv heads must divide heads, heads the embedding, the head's
// size must be even for rotary embeddings...).
std::string validateLlama(const LlamaOptions& options);

// A Llama-family causal LM as transformers' LlamaForCausalLM: RMSNorm, rotary position
// embeddings, grouped-query attention (each key/value head serves heads/kv-heads query heads),
// a SwiGLU MLP, no biases, a tied or untied head; parameter names, layouts and initialisation as
// its state dict (model.layers.0.self_attn.q_proj.weight ...). Inputs idx and targets [B, T]
// (int64: the labels already shifted, as nanoGPT's).
std::vector<uint8_t> buildLlama(const LlamaOptions& options);

}  // namespace dtc::zoo
