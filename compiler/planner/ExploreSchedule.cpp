#include "planner/ExploreSchedule.h"

#include <algorithm>

namespace dtc {

StatusOr<ScheduleRun> runSchedule(const pipeline::PipelineConfig& given,
                                  const std::vector<PassPrice>& forward,
                                  const std::vector<PassPrice>& backward,
                                  const std::vector<uint64_t>& kept, double transfer) {
  using pipeline::Pass;
  const int64_t stages = given.stages, chunks = given.chunks();
  auto price = [&](int64_t chunk, Pass pass) {
    const PassPrice& b = backward[chunk];
    const double weights =
        chunk == 0 ? 1.0
                   : std::clamp(1.0 - forward[chunk].total / std::max(b.total, 1e-30), 0.0, 1.0);
    switch (pass) {
      case Pass::kForward: return forward[chunk];
      case Pass::kBackward: return b;
      case Pass::kInputGrad: return PassPrice{b.total * (1 - weights), b.kernels * (1 - weights)};
      case Pass::kWeightGrad: return PassPrice{b.total * weights, b.kernels * weights};
    }
    return b;
  };
  pipeline::PipelineConfig config = given;
  if (config.splitsBackward()) {
    config.passSeconds.clear();
    for (int64_t ch = 0; ch < chunks; ++ch)
      for (Pass pass : {Pass::kForward, Pass::kInputGrad, Pass::kWeightGrad})
        config.passSeconds.push_back(price(ch, pass).total);
  }
  const std::vector<std::vector<pipeline::Unit>> order = pipeline::trainSchedules(config);
  const pipeline::OrdersRun units = pipeline::runOrders(
      config, order, [&](const pipeline::Unit& u) { return price(u.chunk, u.pass).total; },
      transfer);
  if (units.stuck) return Status::Internal("the schedule's units wait for each other (estimate)");
  ScheduleRun run;
  run.end = units.end;
  run.idle = units.idle;
  run.kernels.assign(stages, 0);
  run.stashPeak.assign(stages, 0);
  for (int64_t s = 0; s < stages; ++s) {
    uint64_t stash = 0;
    for (const pipeline::Unit& u : order[s]) {
      run.kernels[s] += price(u.chunk, u.pass).kernels;
      if (u.pass == Pass::kForward) stash += kept[u.chunk];
      if (u.finishes()) stash -= kept[u.chunk];
      run.stashPeak[s] = std::max(run.stashPeak[s], stash);
    }
  }
  return run;
}

}  // namespace dtc
