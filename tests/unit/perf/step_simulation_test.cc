#include "perf/step_simulation.h"

#include <gtest/gtest.h>

namespace dtc::perf {
namespace {

Task compute(double seconds, std::vector<size_t> after = {}) {
  Task t;
  t.seconds = seconds;
  t.after = std::move(after);
  return t;
}

Task send(MessageKey key, double seconds, double delivery) {
  Task t;
  t.kind = TaskKind::kSend;
  t.seconds = seconds;
  t.sends = key;
  t.delivery = delivery;
  return t;
}

Task recv(MessageKey key, Stream stream = Stream::kCompute) {
  Task t;
  t.kind = TaskKind::kRecv;
  t.stream = stream;
  t.receives = key;
  return t;
}

TEST(StepSimulation, ReceiverWaitsForTheTransferAsBubble) {
  // Stage 0 computes 1 s and sends (copy 0.25 s, 0.5 s on the wire); stage 1 receives, computes.
  const Simulation sim =
      simulateStep({{compute(1), send({0, 1, 7}, 0.25, 0.5)}, {recv({0, 1, 7}), compute(1, {0})}});
  ASSERT_FALSE(sim.stuck);
  EXPECT_DOUBLE_EQ(sim.devices[0].end(), 1.25);
  const DeviceRun& d1 = sim.devices[1];
  EXPECT_DOUBLE_EQ(d1.tasks[0].free, 0);
  EXPECT_DOUBLE_EQ(d1.tasks[0].end, 1.75);
  EXPECT_DOUBLE_EQ(d1.bubble, 1.75);
  EXPECT_DOUBLE_EQ(d1.exposed, 0);
  EXPECT_DOUBLE_EQ(d1.end(), 2.75);
}

TEST(StepSimulation, OverlappedCollectiveIsExposedOnlyWhereComputeWaitsForIt) {
  // A 2 s reduction on the communication stream beside 1 s of compute; the update reads it.
  Task reduce = compute(2, {0});
  reduce.kind = TaskKind::kCollective;
  reduce.stream = Stream::kCommunication;
  const Simulation sim = simulateStep({{compute(1), reduce, compute(1), compute(0.5, {1})}});
  const DeviceRun& d = sim.devices[0];
  EXPECT_DOUBLE_EQ(d.tasks[1].start, 1);
  EXPECT_DOUBLE_EQ(d.tasks[2].end, 2);    // the independent compute overlaps the reduction
  EXPECT_DOUBLE_EQ(d.tasks[3].start, 3);  // the update waits for it
  EXPECT_DOUBLE_EQ(d.exposed, 1);
  EXPECT_DOUBLE_EQ(d.end(), 3.5);
  EXPECT_DOUBLE_EQ(d.tasks[3].computeClock, 3.5);
}

TEST(StepSimulation, BlockingCollectiveCountsItsOwnTime) {
  Task reduce = compute(2, {0});
  reduce.kind = TaskKind::kCollective;
  reduce.exposed = 2;
  const Simulation sim = simulateStep({{compute(1), reduce}});
  EXPECT_DOUBLE_EQ(sim.devices[0].exposed, 2);
  EXPECT_DOUBLE_EQ(sim.devices[0].end(), 3);
}

TEST(StepSimulation, ReleaseFreesTheSenderBeforeTheMessageArrives) {
  Task s = send({0, 1, 0}, 2, 0);
  s.release = 0.5;
  const Simulation sim = simulateStep({{s, compute(1)}, {recv({0, 1, 0})}});
  EXPECT_DOUBLE_EQ(sim.devices[0].end(), 1.5);
  EXPECT_DOUBLE_EQ(sim.devices[1].end(), 2);
}

TEST(StepSimulation, MessagesOfOneKeyArriveInOrder) {
  const Simulation sim = simulateStep(
      {{send({0, 1, 0}, 1, 0), send({0, 1, 0}, 1, 0)}, {recv({0, 1, 0}), recv({0, 1, 0})}});
  EXPECT_DOUBLE_EQ(sim.devices[1].tasks[0].end, 1);
  EXPECT_DOUBLE_EQ(sim.devices[1].tasks[1].end, 2);
}

TEST(StepSimulation, NoStreamTaskIsReadyWithItsInputs) {
  Task deferred;
  deferred.kind = TaskKind::kCollective;
  deferred.stream = Stream::kNone;
  deferred.seconds = 5;
  deferred.after = {0};
  const Simulation sim = simulateStep({{compute(1), deferred, compute(1, {1})}});
  EXPECT_DOUBLE_EQ(sim.devices[0].tasks[1].end, 1);
  EXPECT_DOUBLE_EQ(sim.devices[0].end(), 2);
}

TEST(StepSimulation, DeadlockNamesTheFirstStuckReceive) {
  const Simulation sim = simulateStep({{compute(1), recv({1, 0, 3}), send({0, 1, 4}, 1, 0)},
                                       {recv({0, 1, 4}), send({1, 0, 3}, 1, 0)}});
  ASSERT_TRUE(sim.stuck);
  EXPECT_EQ(sim.stuck->first, 0u);
  EXPECT_EQ(sim.stuck->second, 1u);
}

TEST(StepSimulation, GpipeBubbleMatchesItsFormula) {
  // p stages, m micro-batches of unit forward and backward, free transfers: the step is
  // 2(m + p - 1) and each stage idles 2(p - 1) of it, waiting or done early.
  const int p = 4, m = 8;
  std::vector<std::vector<Task>> programs(p);
  for (int s = 0; s < p; ++s) {
    for (int mb = 0; mb < m; ++mb) {
      Task f = compute(1);
      if (s > 0) f.receives = MessageKey{s - 1, mb, 0};
      if (s + 1 < p) f.sends = MessageKey{s, mb, 0};
      programs[s].push_back(f);
    }
    for (int mb = 0; mb < m; ++mb) {
      Task b = compute(1);
      if (s + 1 < p) b.receives = MessageKey{s + 1, mb, 1};
      if (s > 0) b.sends = MessageKey{s, mb, 1};
      programs[s].push_back(b);
    }
  }
  const Simulation sim = simulateStep(programs);
  ASSERT_FALSE(sim.stuck);
  const double step = sim.devices[0].end();
  EXPECT_DOUBLE_EQ(step, 2.0 * (m + p - 1));
  for (const DeviceRun& d : sim.devices) EXPECT_DOUBLE_EQ(d.bubble + step - d.end(), 2.0 * (p - 1));
}

}  // namespace
}  // namespace dtc::perf
