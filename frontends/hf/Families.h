// Each model family's config.json read into the zoo builder's options (frontends/zoo): one
// reader a family, each accounting for every key its configuration class takes.
#pragma once

#include <cstdint>

#include "hf/HfConfig.h"
#include "zoo/Zoo.h"

namespace dtc::hf {

// The window a model trains on: `requested` (0: the model's `positions`), at most `positions`.
StatusOr<int64_t> trainingWindow(const ConfigReader& config, int64_t requested, int64_t positions,
                                 const char* positionsKey);

// llama, mistral, qwen2 and mixtral configs.
StatusOr<zoo::LlamaOptions> readLlamaFamily(ConfigReader& config, int64_t ctx);
// gpt2 configs.
StatusOr<zoo::GptOptions> readGpt2(ConfigReader& config, int64_t ctx);

// The architecture transformers builds for a family's causal LM ("LlamaForCausalLM"); the
// config's `architectures`, when given, must name it.
Status checkArchitecture(ConfigReader& config, const std::string& architecture);

}  // namespace dtc::hf
