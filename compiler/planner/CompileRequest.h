// `dtc compile`'s flags as compile options, and the compilation they ask for; `dtc explore`
// builds every candidate through the same two, so a candidate's flags compile its plan.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "driver/Compile.h"
#include "hf/HfFolder.h"
#include "llvm/ADT/StringRef.h"
#include "mlir/IR/Location.h"
#include "onnx/OnnxTranslator.h"
#include "support/status.h"

namespace dtc {

struct CompileRequest {
  std::string model;   // the model file (dtc's format or ONNX) or Hugging Face folder
  std::string output;  // -o, where the plan goes ("" when not given)
  CompileOptions options;
  onnx_import::TranslateOptions onnx;
  hf::FolderOptions folder;   // a Hugging Face folder's: --ctx
  uint64_t memoryBudget = 0;  // --memory, bytes per rank; 0: none
  bool threaded = true;       // MLIR's own threads (off when compiles already run side by side)
  // Set: compile this model, already read (explore's shallow copies), instead of `model`'s file.
  std::shared_ptr<const ModelFile> loaded;
};

// `dtc compile MODEL [flags]` from argv (argv[1] is the subcommand, the model comes after).
StatusOr<CompileRequest> parseCompileArgs(int argc, char** argv);

// The same from a list of flags, the model first (what follows `dtc compile`).
StatusOr<CompileRequest> parseCompileArgs(const std::vector<std::string>& args);

// Reads the model and compiles it (for --recompute auto, choosing the recomputation and saying
// what each stage got on stdout); a plan over --memory is an error. Returns the plan file's
// bytes.
StatusOr<std::vector<uint8_t>> compilePlan(const CompileRequest& request);

// dtc compile's help for the options with a flag of their own, from the options model
// (driver/PipelineOptions.def): each flag, its values, what it sets and its default.
std::string compileOptionsHelp();

// "model.dtm: node 'fc0'" for importer locations, the file alone for file locations.
std::string describe(mlir::Location loc);

// The value the command line resolves itself before the pipeline sees an option: --recompute
// auto (the least recomputation that fits --memory); "" for the others.
llvm::StringRef resolvedByDriver(llvm::StringRef option);

}  // namespace dtc
