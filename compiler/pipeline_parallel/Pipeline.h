// Pipeline parallelism: the configuration the passes share, and the micro-batch schedules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/STLFunctionalExtras.h"
#include "mlir/IR/BuiltinOps.h"

namespace dtc::pipeline {

// A pass of one micro-batch through one chunk: the forward, the whole backward, or the
// backward's two halves under a zero-bubble schedule (input gradient B, weight gradients W).
enum class Pass { kForward, kBackward, kInputGrad, kWeightGrad };

// One unit of a device's schedule: one pass of one micro-batch through one model chunk.
struct Unit {
  int64_t chunk = 0;
  int64_t microBatch = 0;
  Pass pass = Pass::kForward;
  bool backward() const { return pass != Pass::kForward; }
  // Whether the unit sends what the next chunk (forward) or the one before (backward) waits for.
  bool feedsNeighbour() const { return pass != Pass::kWeightGrad; }
  // Whether the unit ends the micro-batch's work on the chunk (its activations all freed).
  bool finishes() const { return pass == Pass::kBackward || pass == Pass::kWeightGrad; }
};

struct PipelineConfig {
  int64_t stages = 1;             // devices along the pipeline axis (p)
  int64_t virtualStages = 1;      // model chunks per device (v): interleaved 1F1B, zb-v
  int64_t microBatches = 1;       // m
  std::string schedule = "1f1b";  // gpipe | 1f1b | interleaved | zb-h1 | zb-v
  std::string axis = "pp";
  // Zero-bubble schedules: each chunk's F, B and W seconds for one micro-batch (3 per chunk, in
  // chunk order), on which the orders are list-scheduled; empty: passes of equal time.
  std::vector<double> passSeconds;

  // Model chunks in all. Chunk c runs on device c mod p (Megatron's interleaving), except under
  // zb-v, whose chunks go down and up the devices in V's: device d holds chunks d and 2p−1−d
  // (and, with 4 chunks a device, 2p+d and 4p−1−d), so the first and the last chunk share
  // device 0 and each turn stays on one device.
  int64_t chunks() const { return stages * virtualStages; }
  int64_t deviceOf(int64_t chunk) const {
    const int64_t leg = chunk / stages, at = chunk % stages;
    return schedule == "zb-v" && leg % 2 == 1 ? stages - 1 - at : at;
  }
  // Zero-bubble schedules run each backward as two passes: the input gradient (B), which the
  // chunk before waits for, and the weight gradients (W), which nobody waits for.
  bool splitsBackward() const { return schedule == "zb-h1" || schedule == "zb-v"; }
  // The chunks device `device` holds, first to last.
  std::vector<int64_t> chunksOf(int64_t device) const;
  // The seconds of `unit` by passSeconds (1 a pass without them; a whole backward is B + W).
  double seconds(const Unit& unit) const;
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

// Where a pass (F, B or W) sits in PipelineConfig::passSeconds' three of a chunk.
int passSlot(Pass pass);

// The order in which each device runs its units in a training step: GPipe (every forward,
// then every backward), 1F1B (p−d−1 warm-up forwards on device d, then one forward and one
// backward in turn, so at most p−d micro-batches are in flight), interleaved 1F1B (Megatron's
// order over v chunks; m must be a multiple of p), or a zero-bubble order (ZeroBubble.h), which
// is built for all devices together.
std::vector<std::vector<Unit>> trainSchedules(const PipelineConfig& config);

// Runs every device's order with each unit as soon as its device is free and its input has
// arrived: a forward's from the chunk before, a backward's or an input gradient's from the
// chunk after, `transfer` after it ended there when that chunk is on another device. Each
// device's end and its time waiting; `stuck` when the orders wait for each other.
struct OrdersRun {
  std::vector<double> end, idle;
  bool stuck = false;
};
OrdersRun runOrders(const PipelineConfig& config, const std::vector<std::vector<Unit>>& orders,
                    llvm::function_ref<double(const Unit&)> seconds, double transfer = 0);

}  // namespace dtc::pipeline
