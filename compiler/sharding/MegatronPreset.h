// Megatron's tensor-parallel splits of a GPT-2 model, as --shard specs over its parameter names.
#pragma once

#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"

namespace dtc {

// The specs splitting over mesh axis `axis`: by nanoGPT's names (*.attn.c_attn.weight, ...) when
// the model has them; otherwise by the block's shape, found in the graph under any names (an
// ONNX export's): the linear layer whose output splits into q, k and v, the one after attention,
// the one feeding the GELU and the one after it. Empty when neither finds a block.
std::vector<std::string> megatronSpecs(mlir::ModuleOp module, const std::string& axis);

}  // namespace dtc
