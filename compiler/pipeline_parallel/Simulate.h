// Runs the per-stage programs of a pipelined function through the step simulator
// (perf/step_simulation.h) priced on the cost model's roofline: the predicted timeline (for
// --schedule-trace and the bubble), a deadlock check, and per-stage statistics.
#pragma once

#include <string>
#include <vector>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include "pipeline_parallel/CostModel.h"
#include "pipeline_parallel/Pipeline.h"

namespace dtc::pipeline {

// A stretch of one device's program: consecutive ops of one kind and unit.
struct Box {
  std::string name;           // "F3 c1" (forward of micro-batch 3 through chunk 1), "recv", ...
  std::string kind;           // forward | backward | send | recv | other
  double start = 0, end = 0;  // seconds from the step's start
};

struct Timeline {
  std::vector<std::vector<Box>> devices;
  std::vector<double> busy;  // seconds each device computes (sends included, waits not)
  double makespan = 0;
  // Idle time over busy time, summed over devices: (p−1)/(v·m) for balanced stages.
  double bubbleRatio() const;
  // Idle time as a fraction of the step.
  double bubbleFraction() const;
};

// Fails (with an error on the stuck receive) if the programs deadlock.
mlir::FailureOr<Timeline> simulate(llvm::ArrayRef<mlir::func::FuncOp> programs,
                                   const DeviceModel& device = {});

// The stage programs of `function` (fn::kTrainStep) in a scheduled module, by stage.
llvm::SmallVector<mlir::func::FuncOp> stagePrograms(mlir::ModuleOp module,
                                                    llvm::StringRef function);

// Records on the module (dist.pipeline_bubble) the step's bubble, and (dist.pipeline_stages) per
// stage: activation bytes one micro-batch
// keeps for its backward pass, the most micro-batches in flight under the schedule, the
// resulting peak, and the predicted busy and idle time. `original` is the unsplit step.
void recordStageStats(mlir::ModuleOp module, mlir::func::FuncOp original,
                      const PipelineConfig& config, const Timeline& timeline);

// Chrome trace JSON: one row per rank of the mesh (ranks of a stage share its timeline).
std::string traceJson(mlir::ModuleOp module, const Timeline& timeline);

}  // namespace dtc::pipeline
