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

#include "flatbuffers/ModelFile.h"
#include "flatbuffers/ModelImporter.h"

namespace {

// A violated property of the importer: abort, so the fuzzer records the input.
void require(bool property) {
  if (!property) __builtin_trap();
}

}  // namespace

// LLVM's allocator headers poison bump-allocator slabs when inlined into instrumented code, and
// libMLIR (not instrumented) hands out memory from the same slabs without unpoisoning it: reads
// of MLIR attributes would be reported as use-after-poison.
extern "C" const char* __asan_default_options() { return "allow_user_poisoning=0"; }

// Inputs that imported (replay_main.cc checks that every seed does).
extern "C" {
size_t dtcFuzzAccepted = 0;
}

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
