// dtc import: an ONNX export as a dtc model file (.dtm) that compiles at any batch.
#pragma once

#include <cstdint>
#include <vector>

#include "llvm/Support/Error.h"

#include "onnx/OnnxTranslator.h"

namespace dtc::onnx_import {

// The dtc model file contents for `model`, batch-free: the translation at two batches
// (options.batch, default 2, and one more) tells which folded Reshape dimensions are the batch's,
// written as -1. An export with a fixed batch gives the model at that batch.
llvm::Expected<std::vector<uint8_t>> importOnnx(const OnnxModel& model, TranslateOptions options);

}  // namespace dtc::onnx_import
