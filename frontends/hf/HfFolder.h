// A model from its Hugging Face folder: config.json read as transformers reads it, and the model
// it describes built in dtc's model format, carrying the folder's config.json and
// generation_config.json as they are (dtrun --init DIR reads its weights, --save --format hf
// writes the folder back).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"

namespace dtc::hf {

struct FolderOptions {
  int64_t ctx = 0;    // the training window (0: the model's max_position_embeddings)
  uint64_t seed = 0;  // the parameters' initialisation, for training from scratch
};

// Whether `path` is a folder holding a config.json.
bool isModelFolder(const std::string& path);

// What the folder's model is built with: the window it trains on, and what said so.
struct FolderModel {
  std::vector<uint8_t> bytes;  // the model file
  int64_t ctx = 0;
  std::string summary;  // "llama, 2 layers, a window of 16 of 128 positions"
};

// The model `dir/config.json` describes: LlamaForCausalLM (every rope_scaling transformers
// computes), MistralForCausalLM, Qwen2ForCausalLM, MixtralForCausalLM and GPT2LMHeadModel. A
// setting dtc does not implement is an error naming it, and so is a window longer than the
// model's positions or its sliding window.
StatusOr<FolderModel> buildFolderModel(const std::string& dir, const FolderOptions& options);

}  // namespace dtc::hf
