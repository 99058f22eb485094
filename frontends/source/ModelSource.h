// A model as the compiler reads it: dtc's own format, an ONNX export (told apart by content),
// translated into dtc's format with the batch fixed, or a Hugging Face folder (config.json),
// built as the model it describes.
#pragma once

#include <cstdint>
#include <string>

#include "llvm/Support/Error.h"

#include "hf/HfFolder.h"
#include "model/ModelFile.h"
#include "onnx/OnnxTranslator.h"

namespace dtc {

// `onnx` applies to ONNX files only and `folder` to folders; a dtc model given ONNX-only
// options (a loss, a target) is an error, and so is a file given a folder's (--ctx).
// `described` (when given) receives what the compile should say: for a folder what was built
// ("llama, 2 layers, ..."), for an export what its translation decided (one line each).
llvm::Expected<ModelFile> readModelSource(const std::string& path,
                                          const onnx_import::TranslateOptions& onnx,
                                          const hf::FolderOptions& folder = {},
                                          std::string* described = nullptr);

// Whether the file at `path` holds an ONNX model rather than a dtc model (false when it cannot
// be read, or is a folder: the reader then says why).
bool isOnnxFile(const std::string& path);

}  // namespace dtc
