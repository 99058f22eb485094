// The comm stream's hazard bookkeeping (exec/stream_hazards.h): which pending collectives a step
// waits for, by the bytes its operands occupy.
#include "exec/stream_hazards.h"

#include <gtest/gtest.h>

#include <vector>

#include "plan_generated.h"

namespace dtc {
namespace {

using Tickets = std::vector<StreamHazards::Ticket>;

ByteRange r(uintptr_t begin, uintptr_t end) { return {begin, end}; }

TEST(ByteRangeTest, OverlapIsHalfOpen) {
  EXPECT_TRUE(r(0, 10).overlaps(r(9, 20)));
  EXPECT_FALSE(r(0, 10).overlaps(r(10, 20)));  // touching is not overlapping
  EXPECT_FALSE(r(10, 20).overlaps(r(0, 10)));
  EXPECT_TRUE(r(0, 100).overlaps(r(40, 50)));  // containment, both ways
  EXPECT_TRUE(r(40, 50).overlaps(r(0, 100)));
  // An empty range overlaps nothing, even inside another.
  EXPECT_FALSE(r(5, 5).overlaps(r(0, 10)));
  EXPECT_FALSE(r(0, 10).overlaps(r(5, 5)));
}

TEST(StreamHazardsTest, NothingPendingNothingToWait) {
  StreamHazards h;
  EXPECT_TRUE(h.empty());
  EXPECT_TRUE(h.mustWait({r(0, 1 << 20)}).empty());
  EXPECT_TRUE(h.drain().empty());
}

TEST(StreamHazardsTest, WaitsOnlyForOverlappingAndRemovesThem) {
  StreamHazards h;
  h.add({r(0, 100)}, 1);    // a bucket all-reduce over [0, 100)
  h.add({r(200, 300)}, 2);  // another over [200, 300)
  EXPECT_EQ(h.size(), 2u);
  // Compute elsewhere runs beside both.
  EXPECT_TRUE(h.mustWait({r(100, 200), r(300, 400)}).empty());
  EXPECT_EQ(h.size(), 2u);
  // Reading the second bucket's result waits for it alone.
  EXPECT_EQ(h.mustWait({r(250, 260)}), Tickets{2});
  EXPECT_EQ(h.size(), 1u);
  // Already waited for: a second reader does not wait again.
  EXPECT_TRUE(h.mustWait({r(250, 260)}).empty());
  EXPECT_EQ(h.drain(), Tickets{1});
  EXPECT_TRUE(h.empty());
}

TEST(StreamHazardsTest, AnyOperandAnyRangeOfAnEntry) {
  StreamHazards h;
  // A collective with several operands (a bucket's inputs and outputs).
  h.add({r(0, 10), r(50, 60), r(90, 95)}, 7);
  // A step whose third operand reuses bytes of the entry's second range (the arena's reuse).
  EXPECT_EQ(h.mustWait({r(20, 30), r(40, 45), r(59, 70)}), Tickets{7});
  EXPECT_TRUE(h.empty());
}

TEST(StreamHazardsTest, SeveralOverlapsReturnInTheOrderAdded) {
  StreamHazards h;
  h.add({r(0, 10)}, 3);
  h.add({r(10, 20)}, 1);
  h.add({r(20, 30)}, 2);
  h.add({r(30, 40)}, 0);
  EXPECT_EQ(h.mustWait({r(5, 25)}), (Tickets{3, 1, 2}));
  EXPECT_EQ(h.drain(), Tickets{0});
}

TEST(StreamHazardsTest, EmptyRangesNeverWait) {
  StreamHazards h;
  h.add({r(8, 8)}, 1);  // a collective on zero elements
  h.add({r(0, 16)}, 2);
  EXPECT_TRUE(h.mustWait({r(8, 8)}).empty());  // a step on zero elements
  EXPECT_EQ(h.mustWait({r(0, 100)}), Tickets{2});
  // Nothing of its own to overlap, the empty entry still joins at the end.
  EXPECT_EQ(h.drain(), Tickets{1});
}

TEST(StreamHazardsTest, DrainReturnsAllInOrderAndEmpties) {
  StreamHazards h;
  for (StreamHazards::Ticket t : {4u, 9u, 2u}) h.add({r(t * 100, t * 100 + 10)}, t);
  EXPECT_EQ(h.drain(), (Tickets{4, 9, 2}));
  EXPECT_TRUE(h.empty());
  EXPECT_TRUE(h.drain().empty());
  // Reusable after a drain: the next function's run.
  h.add({r(0, 4)}, 4);
  EXPECT_EQ(h.mustWait({r(3, 4)}), Tickets{4});
}

TEST(StreamHazardsTest, OperandRangesOfAStep) {
  float a[8], b[4];
  int64_t ids[3];
  TensorView x{reinterpret_cast<uint8_t*>(a), DType::kF32, {2, 4}};
  TensorView y{reinterpret_cast<uint8_t*>(b), DType::kF32, {4}};
  TensorView i{reinterpret_cast<uint8_t*>(ids), DType::kI64, {3}};
  TensorView none{reinterpret_cast<uint8_t*>(b), DType::kF32, {0}};  // zero elements: no bytes
  TensorView unbound{nullptr, DType::kF32, {4}};
  const std::vector<ByteRange> ranges = operandRanges({x, i, none}, {y, unbound});
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0].begin, reinterpret_cast<uintptr_t>(a));
  EXPECT_EQ(ranges[0].end - ranges[0].begin, sizeof a);
  EXPECT_EQ(ranges[1].end - ranges[1].begin, sizeof ids);
  EXPECT_EQ(ranges[2].begin, reinterpret_cast<uintptr_t>(b));
  EXPECT_EQ(ranges[2].end - ranges[2].begin, sizeof b);
}

TEST(StreamHazardsTest, StepRangesAddThePlannedScratch) {
  flatbuffers::FlatBufferBuilder b;
  b.Finish(plan::CreateStep(b));
  const plan::Step& step = *flatbuffers::GetRoot<plan::Step>(b.GetBufferPointer());
  float a[4];
  uint8_t scratch[128];
  ThreadPool pool(1);
  StepContext ctx{step, {TensorView{reinterpret_cast<uint8_t*>(a), DType::kF32, {4}}}, {}, pool};
  EXPECT_EQ(stepRanges(ctx).size(), 1u);
  ctx.scratch = scratch;
  ctx.scratchBytes = sizeof scratch;
  const std::vector<ByteRange> ranges = stepRanges(ctx);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[1].begin, reinterpret_cast<uintptr_t>(scratch));
  EXPECT_EQ(ranges[1].end - ranges[1].begin, sizeof scratch);
}

}  // namespace
}  // namespace dtc
