// The readers of a Hugging Face model folder's JSON files, from wherever a user got them: the
// first byte picks model.safetensors.index.json (even: checkpoint::parseHfWeightMap) or
// config.json (odd: checkpoint::compareHfConfig against a Llama's config, as dtrun --init
// checks it); the rest is the file's text. An error has a one-line message; a weight map that
// parses names only plain file names in the folder, each with at least one tensor.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "checkpoint/hf_folder.h"

#include "fuzz_support.h"

namespace {

// dtc zoo llama's config (the plan carries it; --init compares the folder's against it).
constexpr const char* kLlamaConfig =
    R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","vocab_size":64,)"
    R"("hidden_size":32,"intermediate_size":64,"num_hidden_layers":2,"num_attention_heads":4,)"
    R"("num_key_value_heads":2,"max_position_embeddings":16,"rms_norm_eps":1e-05,)"
    R"("rope_theta":10000.0,"tie_word_embeddings":false,"attention_bias":false,)"
    R"("hidden_act":"silu","torch_dtype":"float32"})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto parsed = dtc::checkpoint::parseHfWeightMap(text, "model.safetensors.index.json");
    if (!parsed.ok()) {
      requireOneLine(parsed.status().message());
      return 0;
    }
    ++dtcFuzzAccepted;
    require(!parsed->empty());
    for (const auto& [file, names] : *parsed) {
      require(!file.empty() && file[0] != '.' && file.find('/') == std::string::npos);
      require(!names.empty());
    }
    return 0;
  }
  const dtc::Status compared = dtc::checkpoint::compareHfConfig(kLlamaConfig, text, "config.json");
  if (!compared.ok()) {
    requireOneLine(compared.message());
    return 0;
  }
  ++dtcFuzzAccepted;
  return 0;
}
