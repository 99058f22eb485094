// A model's stack of identical layers (a transformer's blocks), found by node names, and the same
// model cut to fewer of them. `dtc explore` prices a deep model from a shallow copy: every layer
// of a stack computes the same thing on the same shapes, so one layer's cost is every layer's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/ModelFile.h"

namespace dtc {

// The layer a node or tensor name belongs to: the name up to its first all-digit component
// ("transformer.h.3.attn.c_attn" -> "transformer.h.3", "/layers.2/mlp/MatMul" -> "/layers.2");
// "" for names outside any layer (embeddings, the final norm, the head, the loss).
std::string layerOf(const std::string& name);

struct LayerStack {
  std::vector<std::string> layers;      // in model order: "transformer.h.0", ...
  std::vector<std::string> firstNodes;  // each layer's first node (a pipeline cut before it)
  bool nodesBefore = false;             // the model has nodes before the stack (an embedding)
  std::string nodeAfter;                // the first node after the stack (a head); empty if none
  int64_t size() const { return static_cast<int64_t>(layers.size()); }
};

// The model's layers when they form a stack: consecutive runs of nodes with the same op types,
// attributes and parameter shapes, each reading only the one tensor the layer before it wrote
// (besides parameters and tensors from before the stack), the model after the stack reading only
// the last layer's. nullopt, with `why`, otherwise.
std::optional<LayerStack> findLayerStack(const model::Model& model, std::string* why = nullptr);

// The model with only the stack's first `keep` layers (1 <= keep <= layers): what followed the
// last layer reads the last kept one's output; the dropped layers' parameters are gone.
llvm::Expected<ModelFile> keepLayers(const ModelFile& model, const LayerStack& stack, int64_t keep);

}  // namespace dtc
