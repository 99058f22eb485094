#include "data/init.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace dtc::data {
namespace {

// Golden values from an independent Python implementation of init.h's formula
// (run with /usr/bin/python3):
//
//   import math, numpy as np
//   M, G = (1 << 64) - 1, 0x9E3779B97F4A7C15
//   def fnv(s):
//       h = 0xcbf29ce484222325
//       for b in s.encode(): h = ((h ^ b) * 0x100000001b3) & M
//       return h
//   def u(key, k):
//       s = (key + k * G + G) & M          # splitmix64 adds G before mixing
//       z = ((s ^ (s >> 30)) * 0xBF58476D1CE4E5B9) & M
//       z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
//       return ((z ^ (z >> 31)) >> 40) / 16777216.0
//   key = 7 ^ fnv("fc0.weight")
//   print([float(np.float32(-0.5 + 0.75 * u(key, i))) for i in range(4)])
//   print([float(np.float32(1.0 + 0.5 * math.sqrt(-2 * math.log(1 - u(key, 2 * i)))
//                           * math.cos(2 * math.pi * u(key, 2 * i + 1)))) for i in range(4)])
TEST(Init, MatchesThePythonReimplementation) {
  std::vector<float> u(4), n(4);
  fillInit(InitKind::kUniform, -0.5, 0.25, 7, "fc0.weight", u.data(), 4);
  fillInit(InitKind::kNormal, 1.0, 0.5, 7, "fc0.weight", n.data(), 4);
  EXPECT_EQ(u, (std::vector<float>{-0.3838226795196533f, 0.08510136604309082f,
                                   0.058558136224746704f, -0.314388632774353f}));
  std::vector<float> expected = {1.0545992851257324f, 1.0130730867385864f, 1.127923846244812f,
                                 0.7553384304046631f};
  // libm's log and cos may differ from Python's by an ulp before rounding to float.
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(n[i], expected[i], 1e-6) << i;
}

TEST(Init, UniformIsBoundedDeterministicAndKeyedByNameAndSeed) {
  const size_t n = 100000;
  std::vector<float> a(n), b(n), c(n), d(n);
  fillInit(InitKind::kUniform, -0.5, 0.25, 3, "fc0.weight", a.data(), n);
  fillInit(InitKind::kUniform, -0.5, 0.25, 3, "fc0.weight", b.data(), n);
  fillInit(InitKind::kUniform, -0.5, 0.25, 3, "fc1.weight", c.data(), n);
  fillInit(InitKind::kUniform, -0.5, 0.25, 4, "fc0.weight", d.data(), n);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  double mean = 0, sq = 0;
  for (float v : a) {
    ASSERT_GE(v, -0.5f);
    ASSERT_LT(v, 0.25f);
    mean += v;
  }
  mean /= n;
  for (float v : a) sq += (v - mean) * (v - mean);
  EXPECT_NEAR(mean, -0.125, 0.003);
  EXPECT_NEAR(std::sqrt(sq / n), 0.75 / std::sqrt(12.0), 0.002);
}

TEST(Init, NormalHasItsMeanAndStd) {
  const size_t n = 100000;
  std::vector<float> a(n);
  fillInit(InitKind::kNormal, 1.0, 0.02, 0, "w", a.data(), n);
  double mean = 0, sq = 0;
  for (float v : a) {
    ASSERT_TRUE(std::isfinite(v));
    mean += v;
  }
  mean /= n;
  for (float v : a) sq += (v - mean) * (v - mean);
  EXPECT_NEAR(mean, 1.0, 0.0005);
  EXPECT_NEAR(std::sqrt(sq / n), 0.02, 0.0005);
  // Tails are there, but not absurd.
  auto [lo, hi] = std::minmax_element(a.begin(), a.end());
  EXPECT_LT(*lo, 1.0 - 3 * 0.02);
  EXPECT_GT(*hi, 1.0 + 3 * 0.02);
  EXPECT_GT(*lo, 1.0 - 7 * 0.02);
  EXPECT_LT(*hi, 1.0 + 7 * 0.02);
}

TEST(Init, ZerosAndOnes) {
  std::vector<float> z(5, 7.0f), o(5);
  fillInit(InitKind::kZeros, 3, 4, 1, "b", z.data(), 5);
  fillInit(InitKind::kOnes, 3, 4, 1, "g", o.data(), 5);
  EXPECT_EQ(z, std::vector<float>(5, 0.0f));
  EXPECT_EQ(o, std::vector<float>(5, 1.0f));
}

TEST(Init, PrefixesAgree) {
  // Element i depends only on i: a shard of a tensor can be filled on its own.
  std::vector<float> whole(64), part(16);
  fillInit(InitKind::kNormal, 0, 1, 5, "w", whole.data(), whole.size());
  fillInit(InitKind::kNormal, 0, 1, 5, "w", part.data(), part.size());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin()));
}

}  // namespace
}  // namespace dtc::data
