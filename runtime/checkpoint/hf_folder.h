// A Hugging Face model folder, as save_pretrained writes it: config.json, and the weights in
// model.safetensors or in shards that model.safetensors.index.json maps each tensor to. dtrun
// --init reads one, dtrun --save DIR --format hf writes one that from_pretrained loads.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/status.h"

namespace dtc::checkpoint {

// The folder's weight files, each with the tensor names it holds (empty: all of them). Missing
// files, an unreadable index, and an index naming a file outside the folder are errors naming
// the file.
struct WeightFile {
  std::string path;
  std::set<std::string> names;
};
StatusOr<std::vector<WeightFile>> hfWeightFiles(const std::string& dir);
// The tensors of each file an index's text (model.safetensors.index.json, at `path`) maps them
// to: a weight_map of tensor names to plain file names in the folder.
StatusOr<std::map<std::string, std::set<std::string>>> parseHfWeightMap(std::string_view text,
                                                                        const std::string& path);

// The folder's config.json against the model's (`modelConfig`, the plan's text; "" when the
// model carries none, when only the weights are checked): each setting the model's config
// states must have the same value there, e.g. "DIR/config.json: num_key_value_heads is 4, the
// model's 2". A missing tie_word_embeddings is transformers' default, true. A folder without
// config.json (dtrun --save without --format hf) has only its weights checked.
Status checkHfConfig(const std::string& modelConfig, const std::string& dir);
// The same, for the text of a config.json at `path`.
Status compareHfConfig(const std::string& modelConfig, std::string_view text,
                       const std::string& path);

// The torch_dtype a model's config states ("" for none).
std::string hfTorchDtype(const std::string& modelConfig);

// DIR/config.json with the model's config, every key as it was but torch_dtype, which names the
// saved tensors' type (bfloat16...), laid out as save_pretrained writes it (keys sorted, two
// spaces); and DIR/generation_config.json when the model carries one. Each is written to a
// temporary name, then renamed; the config must not be empty.
Status writeHfConfig(const std::string& modelConfig, const std::string& generationConfig,
                     const std::string& torchDtype, const std::string& dir);

// How save_pretrained spreads weights over files of at most `maxBytes` (its max_shard_size):
// `groupBytes` are the bytes of each group of tensors that stays in one file (a weight and its
// tied names), in the model's order. The next file starts where a group would take the current
// one past `maxBytes`; a group larger than that has a file of its own. Returns each group's
// file, numbered in the order the files are completed, as save_pretrained numbers them.
std::vector<size_t> assignHfShards(const std::vector<uint64_t>& groupBytes, uint64_t maxBytes);
// "model.safetensors" when there is one file, else "model-00002-of-00005.safetensors".
std::string hfWeightFileName(size_t index, size_t count);
// Completes a save of `fileCount` weight files into DIR (named by hfWeightFileName): with
// several, DIR/model.safetensors.index.json, {"metadata": {"total_size": N}, "weight_map":
// {tensor name: file name}} (written to a temporary name, then renamed). Then the weight files
// of an earlier save into DIR that this one did not write go (model.safetensors, the index,
// shards): loaders would read them (transformers prefers model.safetensors, dtrun --init the
// index). So do the temporaries of a save that died before renaming them.
Status finishHfWeights(const std::string& dir, size_t fileCount, uint64_t totalBytes,
                       const std::map<std::string, std::string>& weightMap);

}  // namespace dtc::checkpoint
