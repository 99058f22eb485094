// Megatron's tensor-parallel splits of a transformer (GPT-2's or Llama's blocks), as --shard specs
// over its parameter names.
#pragma once

#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"

namespace dtc {

// The specs splitting over mesh axis `axis` of `tp` devices: by nanoGPT's names
// (*.attn.c_attn.weight, ...) when the model has them; otherwise by the block's shape, found in
// the graph under any names (an ONNX export's, Llama's): the linear layers into attention (one
// split into q, k and v, or three reshaped into heads), the one after attention, the MLP's
// (into a GELU, or SwiGLU's gate and up) and the one after it. Empty when neither finds a block.
// `chosen`, when given, says how the blocks were found and in which layout.
std::vector<std::string> megatronSpecs(mlir::ModuleOp module, const std::string& axis, int64_t tp,
                                       std::string* chosen = nullptr);

}  // namespace dtc
