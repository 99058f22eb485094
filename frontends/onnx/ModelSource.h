// A model file as the compiler reads it: dtc's own format, or an ONNX export (told apart by
// content), translated into dtc's format with the batch fixed.
#pragma once

#include <cstdint>
#include <string>

#include "llvm/Support/Error.h"

#include "flatbuffers/ModelFile.h"
#include "onnx/OnnxTranslator.h"

namespace dtc {

// `onnx` applies to ONNX files only; a dtc model given ONNX-only options (a loss, a target) is
// an error.
llvm::Expected<ModelFile> readModelSource(const std::string& path,
                                          const onnx_import::TranslateOptions& onnx);

// Whether the file at `path` holds an ONNX model rather than a dtc model (false when it cannot
// be read: the reader then says why).
bool isOnnxFile(const std::string& path);

}  // namespace dtc
