#include "driver/Compile.h"

#include <cstdio>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "Passes.h"
#include "flatbuffers/ModelImporter.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphOps.h"
#include "lowering/PlanWriter.h"

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

}  // namespace

LogicalResult compileModel(MLIRContext& ctx, const ModelFile& model, const CompileOptions& options,
                           std::vector<uint8_t>& plan) {
  registerDialects(ctx);
  OwningOpRef<ModuleOp> module = importModel(ctx, model, ImportOptions{options.batchSize});
  if (!module) return failure();
  if (failed(dumpModule(*module, options.dumpIrDir, 0, "import"))) return failure();

  OptimizerOptions optim;
  optim.optimizer = options.optimizer;
  optim.lr = options.lr;
  optim.momentum = options.momentum;
  optim.weightDecay = options.weightDecay;
  optim.beta1 = options.beta1;
  optim.beta2 = options.beta2;
  optim.eps = options.eps;

  // One pass per pass manager, so the IR can be written after each for users exploring it.
  std::vector<std::unique_ptr<Pass>> pipeline;
  pipeline.push_back(createAutodiff());
  if (options.accumulate != 1) pipeline.push_back(createAccumulate(AccumulateOptions{options.accumulate}));
  pipeline.push_back(createOptimizer(optim));
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
    pipeline.push_back(createBucketAllReduce(BucketAllReduceOptions{options.bucketMb}));
  }
  if (options.zeroStage != 0 && options.dataParallel == 0)
    return emitError(UnknownLoc::get(&ctx), "ZeRO needs a data-parallel mesh (--mesh dp=N)");
  pipeline.push_back(createPlanMemory());
  int index = 1;
  for (auto& pass : pipeline) {
    std::string name = pass->getArgument().str();
    PassManager pm(&ctx);
    pm.addPass(std::move(pass));
    if (failed(pm.run(*module))) return failure();
    if (failed(dumpModule(*module, options.dumpIrDir, index++, name))) return failure();
  }
  return writePlan(*module, &model, plan);
}

}  // namespace dtc
