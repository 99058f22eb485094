// A roofline estimate of each op's time, for cutting pipeline stages and predicting schedules.
// The absolute numbers describe a nominal device (below); only their ratios steer decisions.
#pragma once

#include "mlir/IR/Operation.h"

namespace dtc::pipeline {

struct DeviceModel {
  double flopsPerSecond = 1e11;      // sustained FP32 rate
  double bytesPerSecond = 2e10;      // memory bandwidth
  double linkBytesPerSecond = 1e10;  // stage-to-stage link
  double linkLatencySeconds = 5e-6;
};

// Bytes of a tensor value (0 for anything else).
double valueBytes(mlir::Value v);
double opFlops(mlir::Operation* op);
// Bytes of every operand and result.
double opBytes(mlir::Operation* op);
// max(FLOPs / rate, bytes / bandwidth); a send costs its copy, a recv nothing (it waits).
double opSeconds(mlir::Operation* op, const DeviceModel& device = {});
// Time for `bytes` to cross the stage-to-stage link.
double transferSeconds(double bytes, const DeviceModel& device = {});

}  // namespace dtc::pipeline
