// Property test of the pipeline schedules' orders over many p and m: every device runs each of
// its units exactly once, in an order whose dependencies (forward from the chunk before,
// backward from the chunk after, W after its B) let every device finish; and, over equal
// passes, the zero-bubble orders' bubble and activations against 1F1B's: ZB-H1's bubble a third
// of 1F1B's with at most p micro-batches on any device (1F1B's most), ZB-V's at most a sixth
// with at most 2p half-size chunk-micro-batches, and with two V's a device a twelfth.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "pipeline_parallel/Pipeline.h"

namespace dtc::pipeline {
namespace {

struct OrderRun {
  double span = 0, idle = 0;
  int64_t mostHeld = 0;  // the most chunk-micro-batches a device holds between F and its end
};

// Runs the orders as soon as each unit's input is there; a unit takes `unit` (a forward and
// each half of a split backward; an unsplit backward two). Fails the test on a stall.
OrderRun runOrders(const PipelineConfig& c, double unit) {
  const int64_t p = c.stages, chunks = c.chunks();
  const std::vector<std::vector<Unit>> orders = trainSchedules(c);
  std::map<std::tuple<int64_t, int64_t, Pass>, double> end;
  std::vector<size_t> next(p, 0);
  std::vector<double> free(p, 0), busy(p, 0);
  OrderRun run;
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t d = 0; d < p; ++d)
      while (next[d] < orders[d].size()) {
        const Unit& u = orders[d][next[d]];
        EXPECT_EQ(c.deviceOf(u.chunk), d);
        std::tuple<int64_t, int64_t, Pass> input;
        bool needs = true;
        const Pass back = c.splitsBackward() ? Pass::kInputGrad : Pass::kBackward;
        if (u.pass == Pass::kForward) {
          needs = u.chunk > 0;
          input = {u.chunk - 1, u.microBatch, Pass::kForward};
        } else if (u.pass == Pass::kWeightGrad) {
          input = {u.chunk, u.microBatch, Pass::kInputGrad};
        } else if (u.chunk + 1 < chunks) {
          input = {u.chunk + 1, u.microBatch, back};
        } else {
          input = {u.chunk, u.microBatch, Pass::kForward};
        }
        if (needs && !end.count(input)) break;
        const double start = std::max(free[d], needs ? end[input] : 0.0);
        const double took = u.pass == Pass::kBackward ? 2 * unit : unit;
        EXPECT_TRUE(
            end.emplace(std::make_tuple(u.chunk, u.microBatch, u.pass), start + took).second)
            << "a unit runs twice";
        free[d] = start + took;
        busy[d] += took;
        ++next[d];
        progress = true;
      }
  }
  for (int64_t d = 0; d < p; ++d)
    EXPECT_EQ(next[d], orders[d].size())
        << c.schedule << " p=" << p << " m=" << c.microBatches << ": device " << d << " stalls";
  run.span = *std::max_element(free.begin(), free.end());
  for (int64_t d = 0; d < p; ++d) {
    run.idle += run.span - busy[d];
    int64_t held = 0;
    for (const Unit& u : orders[d]) {
      held += u.pass == Pass::kForward ? 1 : u.finishes() ? -1 : 0;
      run.mostHeld = std::max(run.mostHeld, held);
    }
  }
  // Every unit of every chunk and micro-batch, once.
  const size_t passes = c.splitsBackward() ? 3 : 2;
  EXPECT_EQ(end.size(), static_cast<size_t>(chunks * c.microBatches) * passes);
  return run;
}

PipelineConfig config(const char* schedule, int64_t p, int64_t m, int64_t v = 1) {
  PipelineConfig c;
  c.schedule = schedule;
  c.stages = p;
  c.microBatches = m;
  c.virtualStages = v;
  return c;
}

TEST(PipelineSchedules, EveryOrderRunsEveryUnitOnce) {
  for (int64_t p = 1; p <= 8; ++p)
    for (int64_t m = 1; m <= 3 * p + 1; ++m) {
      runOrders(config("gpipe", p, m), 1);
      runOrders(config("1f1b", p, m), 1);
      if (m % p == 0) runOrders(config("interleaved", p, m, 2), 0.5);
      runOrders(config("zb-h1", p, m), 1);
      runOrders(config("zb-v", p, m, 2), 0.5);
      runOrders(config("zb-v", p, m, 4), 0.25);
    }
}

TEST(PipelineSchedules, ZeroBubbleAgainstOneFOneB) {
  for (int64_t p = 2; p <= 8; ++p)
    for (int64_t m = p; m <= 4 * p; m += p) {
      const OrderRun oneFOneB = runOrders(config("1f1b", p, m), 1);
      const OrderRun h1 = runOrders(config("zb-h1", p, m), 1);
      const OrderRun v = runOrders(config("zb-v", p, m, 2), 0.5);
      EXPECT_NEAR(h1.idle, oneFOneB.idle / 3, 1e-9) << "p=" << p << " m=" << m;
      EXPECT_LE(h1.mostHeld, oneFOneB.mostHeld);
      EXPECT_LE(v.idle, oneFOneB.idle / 6 + 1e-9) << "p=" << p << " m=" << m;
      EXPECT_LE(v.mostHeld, 2 * oneFOneB.mostHeld);
      EXPECT_LT(v.span, h1.span);
      // Two V's a device: half the bubble again, a third of interleaving's over as many chunks.
      const OrderRun v4 = runOrders(config("zb-v", p, m, 4), 0.25);
      const OrderRun interleaved = runOrders(config("interleaved", p, m, 4), 0.25);
      EXPECT_LE(v4.idle, oneFOneB.idle / 12 + 1e-9) << "p=" << p << " m=" << m;
      EXPECT_LE(v4.idle, interleaved.idle / 3 + 1e-9) << "p=" << p << " m=" << m;
      EXPECT_LE(v4.mostHeld, 4 * oneFOneB.mostHeld);
    }
}

// The V puts chunk c and chunk 2p−1−c on one device: the first and the last on device 0; two
// V's, down, up, down and up again.
TEST(PipelineSchedules, VPlacement) {
  auto devices = [](const PipelineConfig& c) {
    std::vector<int64_t> out;
    for (int64_t ch = 0; ch < c.chunks(); ++ch) out.push_back(c.deviceOf(ch));
    return out;
  };
  EXPECT_EQ(devices(config("zb-v", 4, 8, 2)), (std::vector<int64_t>{0, 1, 2, 3, 3, 2, 1, 0}));
  EXPECT_EQ(devices(config("zb-v", 2, 8, 4)), (std::vector<int64_t>{0, 1, 1, 0, 0, 1, 1, 0}));
}

}  // namespace
}  // namespace dtc::pipeline
