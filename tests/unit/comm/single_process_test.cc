// The one-process communicator's point to point: a group of one sends to itself, and a receive
// takes the earliest message with its tag, whatever came in between.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "comm/communicator.h"

namespace dtc::comm {
namespace {

TEST(SingleProcess, SendsToItselfByTag) {
  auto c = createSingleProcess();
  int64_t a[2] = {int64_t(1) << 40, -3}, b[2] = {7, 8}, c2[2] = {9, 10};
  ASSERT_TRUE(c->send(a, sizeof a, 0, 1).ok());
  ASSERT_TRUE(c->send(b, sizeof b, 0, 2).ok());
  ASSERT_TRUE(c->send(c2, sizeof c2, 0, 1).ok());
  a[0] = 0;  // copied at send
  int64_t got[2];
  ASSERT_TRUE(c->recv(got, sizeof got, 0, 2).ok());
  EXPECT_EQ(got[0], 7);
  ASSERT_TRUE(c->recv(got, sizeof got, 0, 1).ok());
  EXPECT_EQ(got[0], int64_t(1) << 40);
  EXPECT_EQ(got[1], -3);
  ASSERT_TRUE(c->recv(got, sizeof got, 0, 1).ok());
  EXPECT_EQ(got[0], 9);
  EXPECT_TRUE(c->completeSends().ok());
}

TEST(SingleProcess, PointToPointErrors) {
  auto c = createSingleProcess();
  float x[1] = {1};
  EXPECT_FALSE(c->send(x, sizeof x, 1, 0).ok());                          // no rank 1
  EXPECT_FALSE(c->send(x, sizeof x, 0, Communicator::kMaxTag + 1).ok());  // tag out of range
  EXPECT_FALSE(c->recv(x, sizeof x, 0, 0).ok());                          // nothing sent
  ASSERT_TRUE(c->send(x, sizeof x, 0, 0).ok());
  float two[2];
  EXPECT_FALSE(c->recv(two, sizeof two, 0, 0).ok());  // sizes differ
}

}  // namespace
}  // namespace dtc::comm
