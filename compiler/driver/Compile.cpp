#include "driver/Compile.h"

#include <cstdio>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "Passes.h"
#include "flatbuffers/ModelImporter.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphOps.h"
#include "lowering/PlanWriter.h"
#include "pipeline/Simulate.h"

using namespace mlir;

namespace dtc {

void registerDialects(MLIRContext& ctx) {
  ctx.loadDialect<func::FuncDialect, graph::GraphDialect, dist::DistDialect>();
}

namespace {

LogicalResult dumpModule(ModuleOp module, const std::string& dir, int index,
                         const std::string& name) {
  if (dir.empty()) return success();
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return module.emitError("cannot create --dump-ir directory ") << dir << ": " << ec.message();
  char file[256];
  std::snprintf(file, sizeof file, "%02d-%s.mlir", index, name.c_str());
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, file);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) return module.emitError("cannot write ") << path << ": " << ec.message();
  module.print(os, OpPrintingFlags().enableDebugInfo(true, /*prettyForm=*/true));
  return success();
}

// The predicted bubble next to the textbook (p−1)/(v·m), and the timeline as a Chrome trace.
// (dtc-pipeline-schedule simulated the programs and recorded the bubble; the timeline itself is
// rebuilt only when a trace is asked for.)
LogicalResult reportSchedule(ModuleOp module, const CompileOptions& options) {
  std::optional<pipeline::PipelineConfig> config = pipeline::getPipeline(module);
  auto bubble = module->getAttrOfType<DictionaryAttr>(dist::kPipelineBubbleAttr);
  auto number = [&](StringRef key) { return bubble.getAs<FloatAttr>(key).getValueAsDouble(); };
  double formula = double(config->stages - 1) / double(config->virtualStages * config->microBatches);
  llvm::outs() << llvm::format(
      "pipeline %s: predicted bubble %.1f%% of the step (idle/busy %.3f; (p-1)/(v*m) = %.3f)\n",
      config->summary().c_str(), 100 * number("fraction"), number("ratio"), formula);
  if (options.scheduleTracePath.empty()) return success();
  FailureOr<pipeline::Timeline> timeline =
      pipeline::simulate(pipeline::stagePrograms(module, "train_step"));
  if (failed(timeline)) return failure();
  std::string json = pipeline::traceJson(module, *timeline);
  if (llvm::Error e = writeFileAtomically(options.scheduleTracePath,
                                           reinterpret_cast<const uint8_t*>(json.data()), json.size()))
    return module.emitError("cannot write ") << options.scheduleTracePath << ": "
                                             << llvm::toString(std::move(e));
  return success();
}

}  // namespace

LogicalResult compileModel(MLIRContext& ctx, const ModelFile& model, const CompileOptions& options,
                           std::vector<uint8_t>& plan) {
  registerDialects(ctx);
  // M micro-batches of batch/M samples, accumulated: the step sees the whole batch.
  int64_t batch = options.batchSize, accumulate = options.accumulate;
  if (options.microBatches != 1) {
    if (options.microBatches < 1 || batch % options.microBatches != 0)
      return emitError(UnknownLoc::get(&ctx), "--microbatches ")
             << options.microBatches << " does not divide the batch of " << batch;
    if (accumulate != 1)
      return emitError(UnknownLoc::get(&ctx), "--microbatches and --accumulate both split the "
                                              "step; give one");
    batch /= options.microBatches;
    accumulate = options.microBatches;
  }
  OwningOpRef<ModuleOp> module = importModel(ctx, model, ImportOptions{batch});
  if (!module) return failure();
  (*module)->setAttr(attr::kDevice, StringAttr::get(&ctx, options.device));
  if (failed(dumpModule(*module, options.dumpIrDir, 0, "import"))) return failure();

  OptimizerOptions optim;
  optim.optimizer = options.optimizer;
  optim.lr = options.lr;
  optim.momentum = options.momentum;
  optim.weightDecay = options.weightDecay;
  optim.beta1 = options.beta1;
  optim.beta2 = options.beta2;
  optim.eps = options.eps;
  optim.noDecay.assign(options.noDecay.begin(), options.noDecay.end());
  optim.lrSchedule = options.lrSchedule;
  optim.warmupSteps = options.warmupSteps;
  optim.decaySteps = options.decaySteps;
  optim.minLr = options.minLr;

  // One pass per pass manager, so the IR can be written after each for users exploring it.
  std::vector<std::unique_ptr<Pass>> pipeline;
  if (options.fusedAttention) pipeline.push_back(createFuseAttention());
  if (options.precision != "fp32")
    pipeline.push_back(createMixedPrecision(MixedPrecisionOptions{options.precision}));
  if (options.pipelineStages > 0)
    pipeline.push_back(createPipelineStages(PipelineStagesOptions{
        options.pipelineStages, options.virtualStages, options.microBatches, options.schedule,
        options.stageCuts}));
  pipeline.push_back(createAutodiff());
  if (accumulate != 1) pipeline.push_back(createAccumulate(AccumulateOptions{accumulate}));
  pipeline.push_back(createOptimizer(optim));
  if (options.precision == "fp16")
    pipeline.push_back(createLossScaling(LossScalingOptions{options.lossScale}));
  pipeline.push_back(createEvalFunction());
  if (!options.mesh.empty()) {
    pipeline.push_back(createUserShardings(UserShardingsOptions{
        options.mesh, options.shard, options.megatron, options.sequenceParallel ? "tp" : ""}));
    if (options.vocabParallel) pipeline.push_back(createVocabParallel(VocabParallelOptions{"tp"}));
    pipeline.push_back(createSyncBatchNorm());
    if (options.dataParallel > 0)
      pipeline.push_back(
          createDataParallel(DataParallelOptions{options.dataParallel, options.zeroStage}));
    pipeline.push_back(createShardingPropagation());
    pipeline.push_back(createPartition());
    if (options.pipelineStages > 0) pipeline.push_back(createPipelineSchedule());
    pipeline.push_back(createBucketAllReduce(BucketAllReduceOptions{options.bucketMb}));
  }
  // On the programs devices run: the reductions follow the partitioning.
  if (options.clipGradNorm > 0 || options.reportGradNorm)
    pipeline.push_back(createClipGradNorm(ClipGradNormOptions{options.clipGradNorm}));
  if (options.zeroStage != 0 && options.dataParallel == 0)
    return emitError(UnknownLoc::get(&ctx), "ZeRO needs a data-parallel mesh (--mesh dp=N)");
  if (options.fuseEpilogues) pipeline.push_back(createFuseEpilogues());
  if (options.precision != "fp32" && options.foldCasts) pipeline.push_back(createFoldCasts());
  pipeline.push_back(createPlanMemory());
  int index = 1;
  for (auto& pass : pipeline) {
    std::string name = pass->getArgument().str();
    PassManager pm(&ctx);
    pm.addPass(std::move(pass));
    if (failed(pm.run(*module))) return failure();
    if (failed(dumpModule(*module, options.dumpIrDir, index++, name))) return failure();
  }
  if (options.pipelineStages > 0 && failed(reportSchedule(*module, options))) return failure();
  return writePlan(*module, &model, plan);
}

}  // namespace dtc
