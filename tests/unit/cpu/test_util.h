// Helpers shared by the CPU kernel tests: seeded random data, tolerance checks and the pool
// sizes every kernel is run under (1 = all inline, 3 = more workers than this box has cores).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cpu/kernels/kernels.h"

namespace dtc::cpu::testing {

inline std::vector<float> randomFloats(int64_t n, uint32_t seed, float lo = -1.0f,
                                       float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// |got − want| ≤ rtol·scale + atol, where scale defaults to |want|. Reports the first few
// mismatches only, so a broken kernel does not flood the log.
inline void expectClose(const std::vector<float>& got, const std::vector<double>& want, double rtol,
                        double atol, const std::string& what,
                        const std::vector<double>* scale = nullptr) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 5; ++i) {
    const double s = scale ? (*scale)[i] : std::abs(want[i]);
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= rtol * s + atol)) {
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << want[i]
                    << " (err " << err << ")";
      ++failures;
    }
  }
}

inline void expectClose(float got, double want, double rtol, double atol, const std::string& what) {
  EXPECT_LE(std::abs(static_cast<double>(got) - want), rtol * std::abs(want) + atol)
      << what << ": got " << got << " want " << want;
}

// Fixture base: parameterised over the pool's thread count.
class PoolTest : public ::testing::TestWithParam<int> {
 protected:
  ThreadPool pool_{GetParam()};
};

inline std::string threadsName(const ::testing::TestParamInfo<int>& info) {
  return "threads" + std::to_string(info.param);
}

}  // namespace dtc::cpu::testing

// Runs a PoolTest-derived suite with a 1-thread and a 3-thread pool.
#define DTC_INSTANTIATE_POOL_TEST(Suite) \
  INSTANTIATE_TEST_SUITE_P(Pools, Suite, ::testing::Values(1, 3), dtc::cpu::testing::threadsName)
