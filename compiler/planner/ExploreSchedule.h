// Explore's run of a pipeline schedule on per-chunk prices: each unit as soon as its device is
// free and its input has arrived (a transfer after the unit before it on its neighbour ended),
// in the schedule's order (pipeline::trainSchedules, run by pipeline::runOrders). It prices
// every pipeline candidate of an estimated exploration, so it runs on arrays indexed by chunk
// and micro-batch, not on the general step simulator's messages.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline_parallel/Pipeline.h"
#include "support/status.h"

namespace dtc {

// Seconds of one chunk's pass for one micro-batch: on the compute stream (`total`, the waits
// for collectives included) and in kernels.
struct PassPrice {
  double total = 0, kernels = 0;
};

// Per stage: where its units end, its idle time and kernel time, and the peak of the activations
// kept for backward units to come.
struct ScheduleRun {
  std::vector<double> end, idle, kernels;
  std::vector<uint64_t> stashPeak;
};

// A zero-bubble schedule's backward is two units: the input gradient, as long as the forward
// (its GEMMs mirror the forward's; none on the first chunk, whose input gradient nobody waits
// for), and the weight gradients, the rest; the activations stay until the weight gradients are
// done, and the order is list-scheduled on these prices, as the compiler's on its own.
StatusOr<ScheduleRun> runSchedule(const pipeline::PipelineConfig& config,
                                  const std::vector<PassPrice>& forward,
                                  const std::vector<PassPrice>& backward,
                                  const std::vector<uint64_t>& kept, double transfer);

}  // namespace dtc
