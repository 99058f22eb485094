#include "planner/ExploreSchedule.h"

#include <algorithm>

namespace dtc {

StatusOr<ScheduleRun> runSchedule(const pipeline::PipelineConfig& given,
                                  const std::vector<PassPrice>& forward,
                                  const std::vector<PassPrice>& backward,
                                  const std::vector<uint64_t>& kept, double transfer) {
  using pipeline::Pass;
  const int64_t stages = given.stages, chunks = given.chunks(), m = given.microBatches;
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
  std::vector<int64_t> device(chunks);
  for (int64_t ch = 0; ch < chunks; ++ch) device[ch] = config.deviceOf(ch);
  auto delivery = [&](int64_t from, int64_t to) {
    return device[from] == device[to] ? 0.0 : transfer;
  };
  // When a chunk's output for a micro-batch reaches the chunk after it (forward) or before it
  // (backward); negative until sent.
  auto at = [m](int64_t chunk, int64_t mb) { return static_cast<size_t>(chunk * m + mb); };
  std::vector<double> forwardArrives(chunks * m, -1), backwardArrives(chunks * m, -1);
  ScheduleRun run;
  run.end.assign(stages, 0);
  run.idle.assign(stages, 0);
  run.kernels.assign(stages, 0);
  run.stashPeak.assign(stages, 0);
  std::vector<size_t> next(stages, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < stages; ++s)
      for (; next[s] < order[s].size(); ++next[s]) {
        const pipeline::Unit& u = order[s][next[s]];
        const bool back = u.backward(), feeds = u.feedsNeighbour();
        double ready = 0;
        if (feeds && !back && u.chunk > 0) ready = forwardArrives[at(u.chunk - 1, u.microBatch)];
        if (feeds && back && u.chunk + 1 < chunks)
          ready = backwardArrives[at(u.chunk + 1, u.microBatch)];
        if (ready < 0) break;
        const PassPrice p = price(u.chunk, u.pass);
        const double start = std::max(run.end[s], ready);
        run.idle[s] += start - run.end[s];
        run.end[s] = start + p.total;
        run.kernels[s] += p.kernels;
        if (feeds && !back && u.chunk + 1 < chunks)
          forwardArrives[at(u.chunk, u.microBatch)] = run.end[s] + delivery(u.chunk, u.chunk + 1);
        if (feeds && back && u.chunk > 0)
          backwardArrives[at(u.chunk, u.microBatch)] = run.end[s] + delivery(u.chunk, u.chunk - 1);
        progress = true;
      }
  }
  for (int64_t s = 0; s < stages; ++s) {
    if (next[s] < order[s].size())
      return Status::Internal("the schedule's units wait for each other (estimate)");
    uint64_t stash = 0;
    for (const pipeline::Unit& u : order[s]) {
      if (u.pass == Pass::kForward) stash += kept[u.chunk];
      if (u.finishes()) stash -= kept[u.chunk];
      run.stashPeak[s] = std::max(run.stashPeak[s], stash);
    }
  }
  return run;
}

}  // namespace dtc
