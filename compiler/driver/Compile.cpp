#include "driver/Compile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "driver/TrainingPipeline.h"
#include "graph/IR/GraphOps.h"
#include "lowering/PlanWriter.h"
#include "model/ModelImporter.h"
#include "pipeline_parallel/Simulate.h"
#include "planfile/function_names.h"

using namespace mlir;

namespace dtc {

void registerDialects(MLIRContext& ctx) {
  ctx.loadDialect<func::FuncDialect, graph::GraphDialect, dist::DistDialect, plan::PlanDialect>();
}

namespace {

// The IR before the training passes, as MLIR's IR printing writes the IR after each.
OpPrintingFlags dumpFlags() {
  // Locations inline (no #loc aliases): a line names the model node it comes from.
  return OpPrintingFlags().enableDebugInfo(true, /*prettyForm=*/false).useLocalScope();
}

// Writes the module after every pass to DIR/NN-<pass>.mlir through MLIR's IR printing
// instrumentation; files parse back into dtc-opt. A file that cannot be written fails the compile
// after the pass manager has run (the instrumentation cannot fail a pass).
class NumberedFileIRPrinter : public PassManager::IRPrinterConfig {
 public:
  NumberedFileIRPrinter(std::string dir, std::string* error)
      : IRPrinterConfig(/*printModuleScope=*/false, /*printAfterOnlyOnChange=*/false,
                        /*printAfterOnlyOnFailure=*/false, dumpFlags()),
        dir_(std::move(dir)),
        error_(error) {}

  void printAfterIfEnabled(Pass* pass, Operation*, PrintCallbackFn print) override {
    llvm::SmallString<256> path(dir_);
    llvm::sys::path::append(path,
                            llvm::formatv("{0:02}-{1}.mlir", ++index_, pass->getArgument()).str());
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec) {
      if (error_->empty()) *error_ = "cannot write " + path.str().str() + ": " + ec.message();
      return;
    }
    print(os);
  }

 private:
  std::string dir_;
  std::string* error_;
  int index_ = 0;
};

// Creates DIR and writes what the passes start from (00-import.mlir) and the pipeline that
// reproduces the compile with dtc-opt (pipeline.txt), before any pass runs.
LogicalResult startIrDump(ModuleOp module, const std::string& dir,
                          const TrainingPipelineOptions& pipeline) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return module.emitError("cannot create --dump-ir directory ") << dir << ": " << ec.message();
  auto write = [&](StringRef name, llvm::function_ref<void(raw_ostream&)> fill) -> LogicalResult {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec) return module.emitError("cannot write ") << path << ": " << ec.message();
    fill(os);
    return success();
  };
  if (failed(write("00-import.mlir", [&](raw_ostream& os) { module.print(os, dumpFlags()); })))
    return failure();
  return write("pipeline.txt", [&](raw_ostream& os) {
    os << "builtin.module(dtc-training-pipeline";
    pipeline.print(os);
    os << ")\n";
  });
}

// The predicted bubble next to the textbook (p−1)/(v·m), and the timeline as a Chrome trace.
// (dtc-pipeline-schedule simulated the programs and recorded the bubble; the timeline itself is
// rebuilt only when a trace is asked for.)
LogicalResult reportSchedule(ModuleOp module, const CompileOptions& options) {
  std::optional<pipeline::PipelineConfig> config = pipeline::getPipeline(module);
  auto bubble = module->getAttrOfType<DictionaryAttr>(dist::kPipelineBubbleAttr);
  auto number = [&](StringRef key) { return bubble.getAs<FloatAttr>(key).getValueAsDouble(); };
  double formula =
      double(config->stages - 1) / double(config->virtualStages * config->microBatches);
  llvm::outs() << llvm::format(
      "pipeline %s: predicted bubble %.1f%% of the step (idle/busy %.3f; (p-1)/(v*m) = %.3f)\n",
      config->summary().c_str(), 100 * number("fraction"), number("ratio"), formula);
  if (options.scheduleTracePath.empty()) return success();
  FailureOr<pipeline::Timeline> timeline =
      pipeline::simulate(pipeline::stagePrograms(module, fn::kTrainStep));
  if (failed(timeline)) return failure();
  std::string json = pipeline::traceJson(module, *timeline);
  if (llvm::Error e = writeFileAtomically(
          options.scheduleTracePath, reinterpret_cast<const uint8_t*>(json.data()), json.size()))
    return module.emitError("cannot write ")
           << options.scheduleTracePath << ": " << llvm::toString(std::move(e));
  return success();
}

Real toPipeline(double value) { return Real{value}; }
template <typename T>
const T& toPipeline(const T& value) {
  return value;
}

void toPipelineOptions(const CompileOptions& options, TrainingPipelineOptions& pipeline) {
#define DTC_OPTION(Kind, field, name, flag, initial, min, max, help) \
  pipeline.field = toPipeline(options.DTC_GROUP.field);
#define DTC_LIST_OPTION(field, name, help) pipeline.field = options.DTC_GROUP.field;
#include "driver/PipelineOptions.def"
}

}  // namespace

LogicalResult compileModel(MLIRContext& ctx, const ModelFile& model, const CompileOptions& options,
                           std::vector<uint8_t>& plan) {
  registerDialects(ctx);
  // M micro-batches of batch/M samples: the pipeline accumulates them into the step.
  int64_t batch = options.batchSize;
  if (options.pipeline.microBatches != 1) {
    if (options.pipeline.microBatches < 1 || batch % options.pipeline.microBatches != 0)
      return emitError(UnknownLoc::get(&ctx), "--microbatches ")
             << options.pipeline.microBatches << " does not divide the batch of " << batch;
    batch /= options.pipeline.microBatches;
  }
  OwningOpRef<ModuleOp> module = importModel(ctx, model, ImportOptions{batch});
  if (!module) return failure();
  (*module)->setAttr(attr::kDevice, StringAttr::get(&ctx, options.device));

  TrainingPipelineOptions pipeline;
  toPipelineOptions(options, pipeline);
  PassManager pm(&ctx);
  auto emit = [&](const llvm::Twine& message) { return emitError(UnknownLoc::get(&ctx), message); };
  if (failed(buildTrainingPipeline(pm, pipeline, emit))) return failure();
  std::string dumpError;
  if (!options.dumpIrDir.empty()) {
    if (failed(startIrDump(*module, options.dumpIrDir, pipeline))) return failure();
    pm.enableIRPrinting(std::make_unique<NumberedFileIRPrinter>(options.dumpIrDir, &dumpError));
  }
  if (options.passTiming) pm.enableTiming();
  // A trial (one of dtc explore's candidates) verifies the result once instead of after every
  // pass: a real compile runs the same passes and verifies each, and a candidate is predicted
  // from its finished program only.
  if (options.trial) pm.enableVerifier(false);
  if (failed(pm.run(*module))) return failure();
  if (options.trial && failed(verify(*module))) return failure();
  if (!dumpError.empty()) return emit(dumpError);
  if (options.pipeline.pipelineStages > 0 && !options.trial &&
      failed(reportSchedule(*module, options)))
    return failure();
  if (auto whole = (*module)->getAttrOfType<ArrayAttr>(dist::kZeroWholeAttr);
      whole && !options.trial) {
    // ZeRO-3 shards what divides; say what does not, rather than hold it silently.
    llvm::outs() << "ZeRO-3: " << whole.size()
                 << " trainable parameter(s) stay whole on every rank (no dimension divides "
                    "over dp):";
    for (auto [i, name] : llvm::enumerate(whole.getAsRange<StringAttr>())) {
      if (i == 5) {
        llvm::outs() << " …";
        break;
      }
      llvm::outs() << (i ? ", " : " ") << name.getValue();
    }
    llvm::outs() << "\n";
    (*module)->removeAttr(dist::kZeroWholeAttr);
  }
  return writePlan(*module, &model, plan, /*values=*/!options.trial);
}

}  // namespace dtc
