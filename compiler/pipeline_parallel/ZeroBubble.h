// Zero-bubble pipeline orders (Qi et al., "Zero Bubble Pipeline Parallelism"): each backward is
// split into B, the input gradient the chunk before waits for, and W, the weight gradients
// nobody waits for, and the W passes fill what would be idle.
#pragma once

#include <vector>

#include "pipeline_parallel/Pipeline.h"

namespace dtc::pipeline {

// Every device's order of units under config.schedule:
// - zb-h1: 1F1B's forwards and input gradients, device d running its W passes d micro-batches
//   behind its B passes. Every device then holds at most p micro-batches between F and W, as
//   1F1B's first device does, and the W passes left at the end fill the cool-down's idle time:
//   the bubble of equal F, B and W passes is a third of 1F1B's.
// - zb-v: v chunks per device (v even) down and up the devices in V's
//   (PipelineConfig::deviceOf), ordered by list scheduling on the passes' times
//   (PipelineConfig::passSeconds): a ready B first, then a ready F while the device holds
//   fewer than v·p chunk-micro-batches (1F1B's first device's activations: a chunk is 1/v of a
//   stage), else the oldest pending W. Of four settings (on the rounded times and on the exact
//   ones, with and without a cap of p micro-batches in flight per chunk) the order with the
//   shortest span on the exact times is kept.
std::vector<std::vector<Unit>> zeroBubbleOrders(const PipelineConfig& config);

}  // namespace dtc::pipeline
