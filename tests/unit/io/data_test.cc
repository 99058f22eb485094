#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <unistd.h>

#include "data/init.h"
#include "data/sampler.h"
#include "io/safetensors.h"

namespace dtc::data {
namespace {

TEST(Sampler, MatchesThePythonReimplementation) {
  // tests/e2e/dtc_harness.py: epoch_permutation(10, 42, 0) and (10, 42, 1).
  EXPECT_EQ(epochPermutation(10, 42, 0), (std::vector<int64_t>{2, 3, 9, 7, 5, 8, 6, 4, 0, 1}));
  EXPECT_EQ(epochPermutation(10, 42, 1), (std::vector<int64_t>{0, 8, 1, 6, 4, 3, 5, 9, 2, 7}));
}

TEST(Sampler, PermutationsArePermutationsAndDiffer) {
  auto a = epochPermutation(1000, 1, 0), b = epochPermutation(1000, 1, 1),
       c = epochPermutation(1000, 2, 0);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a, epochPermutation(1000, 1, 0));
  std::sort(a.begin(), a.end());
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(a[i], i);
}

TEST(Sampler, DropsTheLastPartialBatchAndReshuffles) {
  EpochSampler sampler(10, 4, 42);
  EXPECT_EQ(sampler.batchesPerEpoch(), 2);
  auto epoch0 = epochPermutation(10, 42, 0), epoch1 = epochPermutation(10, 42, 1);
  EXPECT_EQ(sampler.nextBatch(), std::vector<int64_t>(epoch0.begin(), epoch0.begin() + 4));
  EXPECT_EQ(sampler.nextBatch(), std::vector<int64_t>(epoch0.begin() + 4, epoch0.begin() + 8));
  EXPECT_EQ(sampler.nextBatch(), std::vector<int64_t>(epoch1.begin(), epoch1.begin() + 4));
  EXPECT_EQ(sampler.epoch(), 1);
}

TEST(Init, UniformIsBoundedDeterministicAndKeyedByName) {
  std::vector<float> a(100000), b(100000), c(100000);
  fillInit(InitKind::kUniform, -0.5, 0.25, 3, "fc0.weight", a.data(), a.size());
  fillInit(InitKind::kUniform, -0.5, 0.25, 3, "fc0.weight", b.data(), b.size());
  fillInit(InitKind::kUniform, -0.5, 0.25, 3, "fc1.weight", c.data(), c.size());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double mean = 0;
  for (float v : a) {
    EXPECT_GE(v, -0.5f);
    EXPECT_LT(v, 0.25f);
    mean += v / a.size();
  }
  EXPECT_NEAR(mean, -0.125, 0.003);
}

TEST(Init, NormalHasItsMeanAndStd) {
  std::vector<float> a(200000);
  fillInit(InitKind::kNormal, 1.0, 0.02, 0, "w", a.data(), a.size());
  double mean = 0, sq = 0;
  for (float v : a) mean += v / a.size();
  for (float v : a) sq += (v - mean) * (v - mean) / a.size();
  EXPECT_NEAR(mean, 1.0, 0.001);
  EXPECT_NEAR(std::sqrt(sq), 0.02, 0.0005);
}

TEST(Init, PrefixesAgree) {
  // Element i depends only on i: a shard of a tensor can be filled on its own.
  std::vector<float> whole(64), part(16);
  fillInit(InitKind::kNormal, 0, 1, 5, "w", whole.data(), whole.size());
  fillInit(InitKind::kNormal, 0, 1, 5, "w", part.data(), part.size());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin()));
}

TEST(Safetensors, WritesTheDocumentedLayout) {
  std::string path = ::testing::TempDir() + "/st_" + std::to_string(::getpid()) + ".safetensors";
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  std::vector<int64_t> n = {7};
  ASSERT_TRUE(io::writeSafetensors(path,
                                   {{"b.weight", DType::kF32, {2, 3}, w.data(), 24},
                                    {"a.count", DType::kI64, {1}, n.data(), 8}},
                                   {{"format", "pt"}})
                  .ok());
  std::ifstream in(path, std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t len = 0;
  std::memcpy(&len, file.data(), 8);
  ASSERT_EQ(len % 8, 0u);
  std::string header = file.substr(8, len);
  EXPECT_NE(header.find("\"__metadata__\":{\"format\":\"pt\"}"), std::string::npos) << header;
  EXPECT_NE(header.find("\"a.count\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[24,32]}"),
            std::string::npos) << header;
  EXPECT_NE(header.find("\"b.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}"),
            std::string::npos) << header;
  ASSERT_EQ(file.size(), 8 + len + 32);
  EXPECT_EQ(0, std::memcmp(file.data() + 8 + len, w.data(), 24));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace dtc::data
