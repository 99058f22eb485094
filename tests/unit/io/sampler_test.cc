#include "data/sampler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace dtc::data {
namespace {

// The golden orders come from this independent Python implementation (run with /usr/bin/python3);
// tests/e2e/dtc_harness.py reproduces the same algorithm for the parity tests.
//
//   M, G = (1 << 64) - 1, 0x9E3779B97F4A7C15
//   def mix(s):
//       s = (s + G) & M
//       z = s
//       z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
//       z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
//       return s, z ^ (z >> 31)
//   def perm(n, seed, epoch):
//       _, s = mix((seed ^ (G * (epoch + 1))) & M)  # streamState
//       p = list(range(n))
//       for i in range(n - 1, 0, -1):
//           s, z = mix(s)
//           j = z % (i + 1)
//           p[i], p[j] = p[j], p[i]
//       return p
//   print(perm(10, 42, 0), perm(10, 42, 1), perm(10, 2**64 - 1, 7))
TEST(Sampler, MatchesTheGoldenPythonPermutation) {
  EXPECT_EQ(epochPermutation(10, 42, 0), (std::vector<int64_t>{5, 7, 3, 1, 8, 2, 9, 4, 0, 6}));
  EXPECT_EQ(epochPermutation(10, 42, 1), (std::vector<int64_t>{5, 0, 2, 4, 7, 8, 1, 9, 3, 6}));
  // All-ones seed: the xor and the additions wrap.
  EXPECT_EQ(epochPermutation(10, ~0ull, 7), (std::vector<int64_t>{0, 7, 2, 3, 4, 5, 6, 1, 8, 9}));
}

TEST(Sampler, Splitmix64MatchesTheReferenceSequence) {
  // The first outputs of Vigna's splitmix64.c from state 0.
  uint64_t state = 0;
  EXPECT_EQ(splitmix64(state), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(splitmix64(state), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(state, 2 * 0x9E3779B97F4A7C15ull);
}

TEST(Sampler, PermutationsArePermutationsDeterministicAndDiffer) {
  auto a = epochPermutation(1000, 1, 0), b = epochPermutation(1000, 1, 1),
       c = epochPermutation(1000, 2, 0);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a, epochPermutation(1000, 1, 0));
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(a, identity);
  for (auto* p : {&a, &b, &c}) {
    std::sort(p->begin(), p->end());
    EXPECT_EQ(*p, identity);
  }
  EXPECT_TRUE(epochPermutation(0, 1, 0).empty());
  EXPECT_EQ(epochPermutation(1, 1, 0), std::vector<int64_t>{0});
}

TEST(Sampler, DropsTheLastPartialBatchAndReshuffles) {
  EpochSampler sampler(10, 4, 42);
  EXPECT_EQ(sampler.batchesPerEpoch(), 2);
  auto epoch0 = epochPermutation(10, 42, 0), epoch1 = epochPermutation(10, 42, 1);
  EXPECT_EQ(sampler.nextBatch(), std::vector<int64_t>(epoch0.begin(), epoch0.begin() + 4));
  EXPECT_EQ(sampler.nextBatch(), std::vector<int64_t>(epoch0.begin() + 4, epoch0.begin() + 8));
  EXPECT_EQ(sampler.nextBatch(), std::vector<int64_t>(epoch1.begin(), epoch1.begin() + 4));
}

// A resumed run asks for its first step's batch directly: the same batches, in any order.
TEST(Sampler, BatchOfAStepDependsOnTheStepAlone) {
  EpochSampler sequential(10, 4, 42), direct(10, 4, 42);
  std::vector<std::vector<int64_t>> inOrder;
  for (int step = 0; step < 7; ++step) inOrder.push_back(sequential.nextBatch());
  for (int step : {5, 2, 6, 0, 3}) EXPECT_EQ(direct.batch(step), inOrder[step]) << "step " << step;
}

TEST(Sampler, ExactMultipleUsesEverySample) {
  EpochSampler sampler(8, 4, 5);
  std::vector<int64_t> seen;
  for (int i = 0; i < 2; ++i) {
    const auto& batch = sampler.nextBatch();
    seen.insert(seen.end(), batch.begin(), batch.end());
  }
  EXPECT_EQ(seen, epochPermutation(8, 5, 0));
  auto epoch1 = epochPermutation(8, 5, 1);
  EXPECT_EQ(sampler.nextBatch(), std::vector<int64_t>(epoch1.begin(), epoch1.begin() + 4));
}

TEST(Sampler, GatherRowsCopiesWholeRows) {
  std::vector<int32_t> data(5 * 3);
  std::iota(data.begin(), data.end(), 0);
  std::string path = ::testing::TempDir() + "/gather_" + std::to_string(::getpid()) + ".npy";
  ASSERT_TRUE(io::writeNpy(path, DType::kI32, {5, 3}, data.data()).ok());
  auto array = io::openNpy(path);
  ASSERT_TRUE(array.ok());
  std::vector<int32_t> out(3 * 3, -1);
  gatherRows(*array, {4, 0, 4}, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{12, 13, 14, 0, 1, 2, 12, 13, 14}));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace dtc::data
