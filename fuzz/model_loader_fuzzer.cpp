// ModelFile::fromBytes and the importer on arbitrary bytes: an error, or a module that passes
// the MLIR verifier. Whatever the model says, import reports problems as diagnostics: no
// crash, no fatal error inside an op builder, no unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include "importer_fuzz_support.h"
#include "model/ModelFile.h"
#include "model/ModelImporter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  llvm::Expected<dtc::ModelFile> file =
      dtc::ModelFile::fromBytes(std::vector<uint8_t>(data, data + size), "fuzz.dtm");
  if (!file) {
    llvm::consumeError(file.takeError());
    return 0;
  }
  // A fresh context per input: types and attributes interned for one model never pile up.
  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
  int errors = 0;
  ctx.getDiagEngine().registerHandler([&](mlir::Diagnostic& diag) {
    errors += diag.getSeverity() == mlir::DiagnosticSeverity::Error;
    return mlir::success();
  });
  dtc::ImportOptions options;
  options.batchSize = 8;
  mlir::OwningOpRef<mlir::ModuleOp> module = dtc::importModel(ctx, *file, options);
  if (!module) {
    require(errors > 0);
    return 0;
  }
  require(errors == 0 && mlir::succeeded(mlir::verify(*module)));
  ++dtcFuzzAccepted;
  // What `dtc compile --dump-ir` writes first.
  llvm::raw_null_ostream os;
  module->print(os);
  return 0;
}
