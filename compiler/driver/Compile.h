// The dtc pipeline: model file -> graph dialect -> training step -> memory plan -> plan bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LLVM.h"

#include "driver/PipelineOptions.h"
#include "model/ModelFile.h"

namespace dtc {

// The C++ type of each kind of pipeline option (driver/PipelineOptions.def).
using OptionString = std::string;
using OptionReal = double;
using OptionInt = int64_t;
using OptionBool = bool;

struct CompileOptions {
  // What the training pipeline reads, declared in driver/PipelineOptions.def, by group: recipe
  // (torch.optim's optimizer and schedule, clipping), numerics (precision, loss scaling),
  // kernels (fusions), parallel (the mesh and its splits), memory (ZeRO, recomputation,
  // buckets), pipeline (micro-batches and stages); with their defaults.
#define DTC_GROUP_BEGIN(member, Type, help) struct Type {
#define DTC_GROUP_END(member) \
  }                           \
  member;
#define DTC_OPTION(Kind, field, name, flag, initial, min, max, help) Option##Kind field = initial;
#define DTC_LIST_OPTION(field, name, help) std::vector<std::string> field;
#include "driver/PipelineOptions.def"
  // What the driver alone reads.
  int64_t batchSize = 0;
  std::string dumpIrDir;          // non-empty: write the IR after every pass as NN-<pass>.mlir
  std::string device = "cpu";     // the backend the plan is for: cpu or cuda
  bool trial = false;             // a compile to measure (--recompute auto): no report, no trace
  bool passTiming = false;        // MLIR's report of each pass's time, on stderr
  std::string scheduleTracePath;  // pipelines: where to write the predicted timeline
};

// Registers the dialects dtc uses on `ctx`.
void registerDialects(mlir::MLIRContext& ctx);

// Runs the whole pipeline. Errors are emitted on ctx's diagnostic engine.
mlir::LogicalResult compileModel(mlir::MLIRContext& ctx, const ModelFile& model,
                                 const CompileOptions& options, std::vector<uint8_t>& plan);

}  // namespace dtc
