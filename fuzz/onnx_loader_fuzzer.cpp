// The ONNX reader and translator on arbitrary bytes: an error, or a dtc model file that verifies
// and imports (or reports why it does not) like any other. Whatever the bytes say, no crash, no
// unbounded allocation (folded constants are capped), no hang.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include "model/ModelFile.h"
#include "model/ModelImporter.h"
#include "onnx/OnnxModel.h"
#include "onnx/OnnxTranslator.h"

#include "importer_fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // No directory: a model that refers to external data is an error.
  llvm::Expected<dtc::onnx_import::OnnxModel> model =
      dtc::onnx_import::OnnxModel::fromBytes(data, size, "fuzz.onnx", "");
  if (!model) {
    llvm::consumeError(model.takeError());
    return 0;
  }
  // The model's own loss; a forward-only model scored by MSE against a target it gains.
  dtc::onnx_import::TranslateOptions options;
  options.batch = 2;
  llvm::Expected<std::vector<uint8_t>> bytes = dtc::onnx_import::translateOnnx(*model, options);
  if (!bytes) {
    llvm::consumeError(bytes.takeError());
    options.loss = "mse";
    options.target = "dtc_fuzz_target";
    bytes = dtc::onnx_import::translateOnnx(*model, options);
    if (!bytes) {
      llvm::consumeError(bytes.takeError());
      return 0;
    }
  }
  // What the translation writes is a valid model file.
  llvm::Expected<dtc::ModelFile> file = dtc::ModelFile::fromBytes(std::move(*bytes), "fuzz.onnx");
  require(static_cast<bool>(file));
  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
  int errors = 0;
  ctx.getDiagEngine().registerHandler([&](mlir::Diagnostic& diag) {
    errors += diag.getSeverity() == mlir::DiagnosticSeverity::Error;
    return mlir::success();
  });
  dtc::ImportOptions import;
  import.batchSize = options.batch;
  mlir::OwningOpRef<mlir::ModuleOp> module = dtc::importModel(ctx, *file, import);
  if (!module) {
    require(errors > 0);
    return 0;
  }
  require(errors == 0 && mlir::succeeded(mlir::verify(*module)));
  ++dtcFuzzAccepted;
  return 0;
}
