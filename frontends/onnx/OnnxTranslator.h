// ONNX in: an exported model translated into dtc's own model format, which the one importer
// (frontends/model/ModelImporter) then turns into the graph dialect. See
// docs/design.md ("ONNX in") for what becomes what.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "llvm/Support/Error.h"

#include "onnx/OnnxModel.h"

namespace dtc::onnx_import {

struct TranslateOptions {
  // The batch every data input's dynamic first dimension takes (the import batch: dtc compile's
  // --batch over its micro-batches); shape subgraphs are folded with it.
  int64_t batch = 0;
  // What the training step minimises: "" (the model's one scalar float output), the name of an
  // output, or "cross-entropy" / "mse" on the model's one output against `target`, a data input
  // the translation adds (int64 class labels [N], or the output's shape).
  std::string loss;
  std::string target;
  // Train an export made in evaluation mode as it is (its folded constants as parameters)
  // rather than refuse it.
  bool acceptEvalExport = false;
  // Globs over initializer names: float tensors on the loss path that are buffers (kept and
  // saved, not trained). ONNX does not mark a module's buffers; without this they would train.
  std::vector<std::string> buffers;
  // nn.Embedding's padding_idx by table (initializer) name: the exporter drops it, and without it
  // that row would train.
  std::map<std::string, int64_t> paddingIdx;
  // A table not named there whose one zero row is its padding_idx, as nn.Embedding initialises
  // the row and never trains it (--padding-idx none: off).
  bool inferPaddingIdx = true;
};

// --padding-idx NAME=ROW flags (repeatable) into `options` (paddingIdx; "none": no inferred
// rows); an error names the malformed one.
llvm::Error parsePaddingIdx(const std::vector<std::string>& specs, TranslateOptions& options);

// The ONNX op types translated on their own (others fold, or run only inside fused patterns).
std::vector<std::string> translatedOps();

// The dtc model file contents for `model`. Every unsupported node is named in one error.
// `notes` (when given) receives what the translation decided that the export did not say (a
// padding row found by its zeros), one line each.
llvm::Expected<std::vector<uint8_t>> translateOnnx(const OnnxModel& model,
                                                   const TranslateOptions& options,
                                                   std::vector<std::string>* notes = nullptr);

}  // namespace dtc::onnx_import
