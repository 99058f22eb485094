// Pipeline parallelism: the configuration the passes share, and the micro-batch schedules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"

namespace dtc::pipeline {

struct PipelineConfig {
  int64_t stages = 1;             // devices along the pipeline axis (p)
  int64_t virtualStages = 1;      // model chunks per device (v): interleaved 1F1B
  int64_t microBatches = 1;       // m
  std::string schedule = "1f1b";  // gpipe | 1f1b | interleaved
  std::string axis = "pp";

  // Model chunks in all; chunk c runs on device c mod p (Megatron's interleaving).
  int64_t chunks() const { return stages * virtualStages; }
  int64_t deviceOf(int64_t chunk) const { return chunk % stages; }
  std::string summary() const;
};

std::optional<PipelineConfig> getPipeline(mlir::ModuleOp module);
void setPipeline(mlir::ModuleOp module, const PipelineConfig& config);

// An op's pipeline stage (dist.stage), or -1; its micro-batch (dist.micro_batch), or 0.
int64_t stageOf(mlir::Operation* op);
int64_t microBatchOf(mlir::Operation* op);
// Gives `to` the schedule's marks of `from` (stage, micro-batch, backward), those it has: where
// and when a pipeline runs it.
void copyPlacement(mlir::Operation* from, mlir::Operation* to);

// One unit of a device's schedule: the forward or backward pass of one micro-batch through one
// model chunk.
struct Unit {
  int64_t chunk = 0;
  int64_t microBatch = 0;
  bool backward = false;
};

// The order in which `device` runs its units in a training step: GPipe (every forward, then
// every backward), 1F1B (p−d−1 warm-up forwards, then one forward and one backward in turn, so
// at most p−d micro-batches are in flight) or interleaved 1F1B (Megatron's order over v chunks;
// m must be a multiple of p).
std::vector<Unit> trainSchedule(const PipelineConfig& config, int64_t device);

}  // namespace dtc::pipeline
