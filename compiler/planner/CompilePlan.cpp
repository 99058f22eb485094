// A compile request carried out: the model read, what it trains said, recomputation chosen to
// fit --memory where asked, the plan compiled and checked against the budget.
#include <optional>
#include <string>

#include "llvm/Support/Error.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"

#include "planfile/plan.h"
#include "planner/CompileRequest.h"
#include "planner/MemoryFit.h"
#include "source/ModelSource.h"

namespace dtc {

std::string describe(mlir::Location loc) {
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(loc)) {
    std::string child = describe(name.getChildLoc());
    return (child.empty() ? "" : child + ": ") + "node '" + name.getName().str() + "'";
  }
  if (auto file = mlir::dyn_cast<mlir::FileLineColLoc>(loc)) return file.getFilename().str();
  if (auto fused = mlir::dyn_cast<mlir::FusedLoc>(loc))
    if (!fused.getLocations().empty()) return describe(fused.getLocations().front());
  return "";
}

namespace {

// "dtc: m.onnx: trains 6 tensors (13002 values); keeps as buffers (not trained): scale".
void describeTraining(const ModelFile& model) {
  size_t trained = 0;
  uint64_t values = 0;
  std::vector<std::string> buffers;
  if (const auto* inits = model.model().graph()->initializers())
    for (const model::Initializer* init : *inits) {
      if (init->constant()) continue;
      if (!init->trainable()) {
        buffers.push_back(init->info()->name()->str());
        continue;
      }
      ++trained;
      uint64_t n = 1;
      if (init->info()->shape())
        for (int64_t d : *init->info()->shape()) n *= static_cast<uint64_t>(d);
      values += n;
    }
  llvm::outs() << "dtc: " << model.name() << ": trains " << trained << " tensors (" << values
               << " values)";
  if (!buffers.empty()) {
    llvm::outs() << "; keeps as buffers (not trained):";
    for (size_t i = 0; i < buffers.size() && i < 8; ++i)
      llvm::outs() << (i ? ", " : " ") << buffers[i];
    if (buffers.size() > 8) llvm::outs() << " and " << buffers.size() - 8 << " more";
  }
  llvm::outs() << "; --buffer GLOB keeps a tensor untrained\n";
}

}  // namespace

StatusOr<std::vector<uint8_t>> compilePlan(const CompileRequest& request) {
  CompileOptions options = request.options;
  std::string built;
  // Explore's copies are compiled in place: copying one would copy its initializers' data.
  std::optional<ModelFile> read;
  const ModelFile* model = request.loaded.get();
  if (!model) {
    llvm::Expected<ModelFile> file =
        readModelSource(request.model, request.onnx, request.folder, &built);
    if (!file) return Status::InvalidInput(llvm::toString(file.takeError()));
    read.emplace(std::move(*file));
    model = &*read;
  }
  // An ONNX export does not say which of its tensors are parameters: say what will train, and
  // what else its translation decided. A folder's model: what its config built, and the window
  // it trains on.
  if (!request.loaded && !options.trial && isOnnxFile(request.model)) describeTraining(*model);
  if (!built.empty() && !options.trial) {
    if (hf::isModelFolder(request.model)) {
      llvm::outs() << "dtc: " << request.model << ": " << built
                   << " (--ctx sets the training window)\n";
    } else {
      llvm::SmallVector<llvm::StringRef> lines;
      llvm::StringRef(built).split(lines, '\n');
      for (llvm::StringRef line : lines) llvm::outs() << "dtc: " << line << "\n";
    }
  }
  mlir::MLIRContext ctx(request.threaded ? mlir::MLIRContext::Threading::ENABLED
                                         : mlir::MLIRContext::Threading::DISABLED);
  std::string firstError;
  std::vector<std::string> remarks;  // what the passes chose, said after the final compile
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic& diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Remark) remarks.push_back(diag.str());
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error && firstError.empty()) {
      std::string where = describe(diag.getLocation());
      firstError = (where.empty() ? "" : where + ": ") + diag.str();
    }
    return mlir::success();
  });
  auto compileWith = [&](const std::string& recompute) -> StatusOr<std::vector<uint8_t>> {
    options.memory.recompute = recompute;
    remarks.clear();
    std::vector<uint8_t> bytes;
    if (mlir::failed(compileModel(ctx, *model, options, bytes)))
      return Status::InvalidInput(firstError.empty() ? "compilation failed" : firstError);
    return bytes;
  };
  if (options.memory.recompute == "auto") {
    std::string chosenReport;
    options.trial = true;
    DTC_ASSIGN_OR_RETURN(std::string chosen,
                         chooseRecompute(compileWith, request.memoryBudget, chosenReport));
    llvm::outs() << chosenReport << "\n";
    options.memory.recompute = chosen;
    options.trial = false;
  }
  DTC_ASSIGN_OR_RETURN(std::vector<uint8_t> plan, compileWith(options.memory.recompute));
  if (!options.trial)
    for (const std::string& remark : remarks) llvm::outs() << "dtc: " << remark << "\n";
  if (request.memoryBudget) {
    DTC_ASSIGN_OR_RETURN(Plan loaded, Plan::fromFileBytes(plan, "the compiled plan"));
    if (Status fits = checkFits(loaded, request.memoryBudget); !fits.ok())
      return Status::InvalidInput("dtc compile: " + fits.message());
  }
  return plan;
}

}  // namespace dtc
