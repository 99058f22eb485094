// The mixture-of-experts kernels (moe_route, moe_dispatch, moe_combine and their gradients) and
// logsumexp against straightforward references: capacity drops, normalised weights or not, one
// and two choices, tied scores; the gradients of the router's normalisation and of logsumexp
// against finite differences of the forward kernels; a routing plan outside the buffers refused
// by the kernels and, through the CPU backend's binders, with the step's error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cpu/kernels/moe_kernels.h"
#include "exec/kernel_contract.h"
#include "exec/step.h"
#include "ops/kernel_registry.h"
#include "plan_generated.h"
#include "step_runner.h"
#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::expectClose;
using testing::operand;
using testing::Operand;
using testing::PoolTest;
using testing::randomFloats;
using testing::runStep;

struct Plan {
  std::vector<int64_t> expert, slot;
  std::vector<float> weight, load;
};

// Each token's K best experts by a sort (score descending, then index), weights in double; slots
// by the spec's priority order: j outer, tokens inner, a counter per (group, expert).
Plan referenceRoute(const std::vector<float>& scores, const MoeShape& m, bool normalize) {
  const int64_t tokens = m.groups * m.tokens, e = m.experts, k = m.topK;
  Plan p{std::vector<int64_t>(tokens * k), std::vector<int64_t>(tokens * k),
         std::vector<float>(tokens * k), std::vector<float>(tokens * e, 0.0f)};
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = scores.data() + t * e;
    std::vector<int64_t> order(e);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    double total = 0;
    for (int64_t j = 0; j < k; ++j) total += row[order[j]];
    for (int64_t j = 0; j < k; ++j) {
      p.expert[t * k + j] = order[j];
      p.weight[t * k + j] = static_cast<float>(normalize ? row[order[j]] / total : row[order[j]]);
      p.load[t * e + order[j]] = 1.0f;
    }
  }
  for (int64_t g = 0; g < m.groups; ++g) {
    std::vector<int64_t> count(e, 0);
    for (int64_t j = 0; j < k; ++j)
      for (int64_t s = 0; s < m.tokens; ++s) {
        const int64_t i = (g * m.tokens + s) * k + j, c = count[p.expert[i]]++;
        p.slot[i] = c < m.capacity ? c : -1;
      }
  }
  return p;
}

Plan route(const std::vector<float>& scores, const MoeShape& m, bool normalize, ThreadPool& pool) {
  const int64_t tokens = m.groups * m.tokens;
  Plan p{std::vector<int64_t>(tokens * m.topK, -7), std::vector<int64_t>(tokens * m.topK, -7),
         std::vector<float>(tokens * m.topK, -7.0f), std::vector<float>(tokens * m.experts, -7.0f)};
  moeRoute(scores.data(), p.expert.data(), p.slot.data(), p.weight.data(), p.load.data(), m,
           normalize, pool);
  return p;
}

std::vector<double> wide(const std::vector<float>& v) { return {v.begin(), v.end()}; }

int64_t dropped(const Plan& p) { return std::count(p.slot.begin(), p.slot.end(), -1); }

struct RouteCase {
  MoeShape m;
  bool normalize;
};

std::string caseName(const RouteCase& c) {
  const MoeShape& m = c.m;
  return "G " + std::to_string(m.groups) + " S " + std::to_string(m.tokens) + " E " +
         std::to_string(m.experts) + " K " + std::to_string(m.topK) + " C " +
         std::to_string(m.capacity) + " D " + std::to_string(m.width) +
         (c.normalize ? " normalized" : "");
}

// Capacity drops (C below S·K/E), none (C large), K = 1 and K = 2, K = E, one expert.
const RouteCase kCases[] = {
    {{1, 1, 1, 1, 1, 3}, false},   {{2, 7, 4, 2, 2, 5}, true},   {{2, 7, 4, 2, 2, 5}, false},
    {{3, 16, 8, 1, 3, 17}, false}, {{3, 16, 8, 1, 3, 17}, true}, {{2, 5, 6, 2, 100, 8}, true},
    {{1, 9, 3, 3, 4, 2}, true},    {{4, 33, 8, 2, 5, 64}, true}, {{2, 0, 4, 2, 1, 3}, true}};

class MoeTest : public PoolTest {};

TEST_P(MoeTest, RouteMatchesReference) {
  uint32_t seed = 900;
  int64_t drops = 0;
  for (const RouteCase& c : kCases) {
    const MoeShape& m = c.m;
    const auto scores = randomFloats(m.groups * m.tokens * m.experts, seed++, 0.01f, 1.0f);
    const Plan want = referenceRoute(scores, m, c.normalize);
    const Plan got = route(scores, m, c.normalize, pool_);
    EXPECT_EQ(got.expert, want.expert) << caseName(c);
    EXPECT_EQ(got.slot, want.slot) << caseName(c);
    EXPECT_EQ(got.load, want.load) << caseName(c);
    expectClose(got.weight, wide(want.weight), 1e-6, 1e-7, "weight " + caseName(c));
    drops += dropped(got);
  }
  EXPECT_GT(drops, 0);  // the capacities were low enough to drop choices
}

// Ties go to the lower expert; a group's first choices take slots before any second choice.
TEST_P(MoeTest, RouteByHand) {
  const MoeShape m{1, 3, 3, 2, 2, 0};
  const std::vector<float> scores = {0.1f, 0.6f, 0.3f, 0.5f, 0.5f, 0.0f, 0.2f, 0.3f, 0.5f};
  const Plan got = route(scores, m, true, pool_);
  EXPECT_EQ(got.expert, (std::vector<int64_t>{1, 2, 0, 1, 2, 1}));
  EXPECT_EQ(got.slot, (std::vector<int64_t>{0, 1, 0, 1, 0, -1}));
  EXPECT_EQ(got.load, (std::vector<float>{0, 1, 1, 1, 1, 0, 0, 1, 1}));
  expectClose(got.weight, {0.6 / 0.9, 0.3 / 0.9, 0.5, 0.5, 0.5 / 0.8, 0.3 / 0.8}, 1e-6, 0,
              "weight");
  const Plan raw = route(scores, m, false, pool_);
  EXPECT_EQ(raw.expert, got.expert);
  EXPECT_EQ(raw.weight, (std::vector<float>{0.6f, 0.3f, 0.5f, 0.5f, 0.5f, 0.3f}));
}

TEST_P(MoeTest, RouteBreaksTiesByIndex) {
  // Every token the same row, ties among the best and among the rest: all send their choices to
  // the same experts, so the capacity drops the later tokens.
  const MoeShape m{2, 6, 5, 2, 4, 0};
  std::vector<float> scores;
  for (int64_t t = 0; t < m.groups * m.tokens; ++t)
    for (float v : {0.2f, 0.5f, 0.2f, 0.5f, 0.1f}) scores.push_back(v);
  const Plan want = referenceRoute(scores, m, false), got = route(scores, m, false, pool_);
  EXPECT_EQ(got.expert, want.expert);
  EXPECT_EQ(got.slot, want.slot);
  EXPECT_EQ(got.expert[0], 1);
  EXPECT_EQ(got.expert[1], 3);
  EXPECT_EQ(got.slot[4 * 2], -1);  // the fifth token's first choice is past capacity 4
  // A NaN score ranks last.
  std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN(), 0.1f, 0.3f};
  const Plan n = route(nan, {1, 1, 3, 2, 1, 0}, false, pool_);
  EXPECT_EQ(n.expert, (std::vector<int64_t>{2, 1}));
}

// dscores from the formula in double: without normalisation dweight at the chosen experts.
std::vector<double> referenceRouteGrad(const std::vector<float>& dweight,
                                       const std::vector<float>& scores, const Plan& p,
                                       const MoeShape& m, bool normalize) {
  const int64_t e = m.experts, k = m.topK;
  std::vector<double> want(scores.size(), 0.0);
  for (int64_t t = 0; t < m.groups * m.tokens; ++t) {
    double z = 0, dot = 0;
    for (int64_t j = 0; j < k; ++j) z += scores[t * e + p.expert[t * k + j]];
    for (int64_t j = 0; j < k; ++j)
      dot += dweight[t * k + j] * (scores[t * e + p.expert[t * k + j]] / z);
    for (int64_t j = 0; j < k; ++j)
      want[t * e + p.expert[t * k + j]] +=
          normalize ? (dweight[t * k + j] - dot) / z : dweight[t * k + j];
  }
  return want;
}

TEST_P(MoeTest, RouteGradMatchesReference) {
  uint32_t seed = 1000;
  for (const RouteCase& c : kCases) {
    const MoeShape& m = c.m;
    const auto scores = randomFloats(m.groups * m.tokens * m.experts, seed++, 0.01f, 1.0f);
    const auto dweight = randomFloats(m.groups * m.tokens * m.topK, seed++);
    const Plan p = route(scores, m, c.normalize, pool_);
    std::vector<float> got(scores.size(), -7.0f);
    ASSERT_TRUE(moeRouteGrad(dweight.data(), scores.data(), p.expert.data(), got.data(), m,
                             c.normalize, pool_));
    expectClose(got, referenceRouteGrad(dweight, scores, p, m, c.normalize), 1e-5, 1e-6,
                "dscores " + caseName(c));
  }
}

// L = Σ dweight·weight(scores) through the forward kernel; scores spaced wider than the step so
// no perturbation changes the choice.
TEST_P(MoeTest, RouteGradMatchesFiniteDifferences) {
  for (int64_t k : {1, 2, 3}) {
    const MoeShape m{2, 3, 5, k, 2, 0};
    const int64_t n = m.groups * m.tokens * m.experts;
    std::vector<float> scores(n);
    std::mt19937 gen(77 + k);
    for (int64_t t = 0; t < m.groups * m.tokens; ++t) {
      std::vector<float> row = {0.15f, 0.3f, 0.45f, 0.6f, 0.75f};
      std::shuffle(row.begin(), row.end(), gen);
      std::copy(row.begin(), row.end(), scores.begin() + t * m.experts);
    }
    const auto dweight = randomFloats(m.groups * m.tokens * k, 300 + k);
    auto loss = [&](const std::vector<float>& s) {
      const Plan p = route(s, m, true, pool_);
      double l = 0;
      for (size_t i = 0; i < p.weight.size(); ++i)
        l += static_cast<double>(dweight[i]) * p.weight[i];
      return l;
    };
    const Plan p = route(scores, m, true, pool_);
    std::vector<float> got(n);
    ASSERT_TRUE(
        moeRouteGrad(dweight.data(), scores.data(), p.expert.data(), got.data(), m, true, pool_));
    const float h = 1e-2f;
    std::vector<double> numeric(n);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float> up = scores, down = scores;
      up[i] += h;
      down[i] -= h;
      numeric[i] = (loss(up) - loss(down)) / (static_cast<double>(up[i]) - down[i]);
    }
    expectClose(got, numeric, 1e-3, 2e-4, "finite differences, K " + std::to_string(k));
  }
}

// A buffer [E, G, C, D] from the plan in double: row (e, g, slot) holds token (g, s).
std::vector<double> referenceDispatch(const std::vector<float>& x, const Plan& p,
                                      const MoeShape& m) {
  std::vector<double> want(m.experts * m.groups * m.capacity * m.width, 0.0);
  for (int64_t t = 0; t < m.groups * m.tokens; ++t)
    for (int64_t j = 0; j < m.topK; ++j) {
      const int64_t i = t * m.topK + j;
      if (p.slot[i] < 0) continue;
      for (int64_t c = 0; c < m.width; ++c)
        want[moe::bufferRow(m, p.expert[i], t / m.tokens, p.slot[i]) + c] = x[t * m.width + c];
    }
  return want;
}

// Σ_j weight_j · buffer row of choice j per token (weight null: 1).
std::vector<double> referenceGather(const std::vector<float>& buffer, const Plan& p,
                                    const float* weight, const MoeShape& m) {
  std::vector<double> want(m.groups * m.tokens * m.width, 0.0);
  for (int64_t t = 0; t < m.groups * m.tokens; ++t)
    for (int64_t j = 0; j < m.topK; ++j) {
      const int64_t i = t * m.topK + j;
      if (p.slot[i] < 0) continue;
      const int64_t row = moe::bufferRow(m, p.expert[i], t / m.tokens, p.slot[i]);
      for (int64_t c = 0; c < m.width; ++c)
        want[t * m.width + c] += (weight ? weight[i] : 1.0) * buffer[row + c];
    }
  return want;
}

TEST_P(MoeTest, DispatchAndCombineMatchReferences) {
  uint32_t seed = 1100;
  for (const RouteCase& c : kCases) {
    const MoeShape& m = c.m;
    const int64_t tokens = m.groups * m.tokens, bufferSize = m.experts * m.groups * m.capacity;
    const auto scores = randomFloats(tokens * m.experts, seed++, 0.01f, 1.0f);
    const Plan p = route(scores, m, c.normalize, pool_);
    const auto x = randomFloats(tokens * m.width, seed++);
    const auto buffer = randomFloats(bufferSize * m.width, seed++);
    const auto dy = randomFloats(tokens * m.width, seed++);
    const std::string name = caseName(c);

    std::vector<float> dispatched(bufferSize * m.width, -7.0f);
    ASSERT_TRUE(moeDispatch(x.data(), p.expert.data(), p.slot.data(), dispatched.data(), m, pool_));
    expectClose(dispatched, referenceDispatch(x, p, m), 0, 0, "dispatch " + name);

    std::vector<float> dx(tokens * m.width, -7.0f);
    ASSERT_TRUE(
        moeDispatchGrad(buffer.data(), p.expert.data(), p.slot.data(), dx.data(), m, pool_));
    expectClose(dx, referenceGather(buffer, p, nullptr, m), 1e-6, 1e-7, "dispatch_grad " + name);

    std::vector<float> y(tokens * m.width, -7.0f);
    ASSERT_TRUE(moeCombine(buffer.data(), p.expert.data(), p.slot.data(), p.weight.data(), y.data(),
                           m, pool_));
    expectClose(y, referenceGather(buffer, p, p.weight.data(), m), 1e-6, 1e-7, "combine " + name);

    // dbuffer = weight·dy at each kept choice's row; dweight = that row · dy.
    std::vector<float> dbuffer(bufferSize * m.width, -7.0f), dweight(tokens * m.topK, -7.0f);
    ASSERT_TRUE(moeCombineGrad(dy.data(), buffer.data(), p.expert.data(), p.slot.data(),
                               p.weight.data(), dbuffer.data(), dweight.data(), m, pool_));
    std::vector<double> wantBuffer(dbuffer.size(), 0.0), wantWeight(dweight.size(), 0.0);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < m.topK; ++j) {
        const int64_t i = t * m.topK + j;
        if (p.slot[i] < 0) continue;
        const int64_t row = moe::bufferRow(m, p.expert[i], t / m.tokens, p.slot[i]);
        for (int64_t k = 0; k < m.width; ++k) {
          wantBuffer[row + k] = p.weight[i] * dy[t * m.width + k];
          wantWeight[i] += static_cast<double>(buffer[row + k]) * dy[t * m.width + k];
        }
      }
    expectClose(dbuffer, wantBuffer, 1e-6, 0, "combine_grad dbuffer " + name);
    expectClose(dweight, wantWeight, 1e-6, 1e-6, "combine_grad dweight " + name);
  }
}

// Every choice of a token dropped: its output is 0.
TEST_P(MoeTest, CombineOfDroppedTokensIsZero) {
  const MoeShape m{1, 2, 2, 1, 1, 3};
  const Plan p{{0, 0}, {0, -1}, {0.5f, 2.0f}, {}};
  const std::vector<float> buffer = {1, 2, 3, 4, 5, 6};
  std::vector<float> y(6, -7.0f);
  ASSERT_TRUE(moeCombine(buffer.data(), p.expert.data(), p.slot.data(), p.weight.data(), y.data(),
                         m, pool_));
  EXPECT_EQ(y, (std::vector<float>{0.5f, 1.0f, 1.5f, 0, 0, 0}));
}

// Outside [0, E) or [-1, C): refused before anything is written.
TEST_P(MoeTest, PlanOutsideTheBuffersIsRefused) {
  const MoeShape m{1, 2, 3, 1, 2, 2};
  const std::vector<float> x(4, 1.0f), weight(2, 1.0f), scores(6, 0.5f);
  for (auto [e, s] : {std::pair<int64_t, int64_t>{3, 0}, {-1, 0}, {0, 2}, {0, -2}}) {
    const std::vector<int64_t> expert = {0, e}, slot = {0, s};
    std::vector<float> buffer(3 * 2 * 2, -7.0f), dx(4, -7.0f), dbuffer(12, -7.0f), dw(2, -7.0f);
    const std::string what = "expert " + std::to_string(e) + " slot " + std::to_string(s);
    EXPECT_FALSE(moeDispatch(x.data(), expert.data(), slot.data(), buffer.data(), m, pool_))
        << what;
    EXPECT_FALSE(moeDispatchGrad(buffer.data(), expert.data(), slot.data(), dx.data(), m, pool_));
    EXPECT_FALSE(
        moeCombine(buffer.data(), expert.data(), slot.data(), weight.data(), dx.data(), m, pool_));
    EXPECT_FALSE(moeCombineGrad(x.data(), buffer.data(), expert.data(), slot.data(), weight.data(),
                                dbuffer.data(), dw.data(), m, pool_));
    EXPECT_EQ(buffer, std::vector<float>(12, -7.0f)) << what;
    EXPECT_EQ(dx, std::vector<float>(4, -7.0f)) << what;
    EXPECT_EQ(dbuffer, std::vector<float>(12, -7.0f)) << what;
    std::vector<float> dscores(6, -7.0f);
    EXPECT_EQ(
        moeRouteGrad(weight.data(), scores.data(), expert.data(), dscores.data(), m, false, pool_),
        e >= 0 && e < 3)
        << what;
  }
}

std::vector<double> referenceLogSumExp(const std::vector<float>& x, int64_t rows, int64_t n) {
  std::vector<double> want(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double most = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; ++j) most = std::max<double>(most, x[r * n + j]);
    for (int64_t j = 0; j < n; ++j) sum += std::exp(x[r * n + j] - most);
    want[r] = most + std::log(sum);
  }
  return want;
}

TEST_P(MoeTest, LogSumExpMatchesReference) {
  uint32_t seed = 1200;
  for (auto [rows, n, lo, hi] : {std::tuple<int64_t, int64_t, float, float>{1, 1, -1, 1},
                                 {7, 5, -3, 3},
                                 {33, 1000, -10, 10},
                                 {4, 300, 80, 100},  // exp would overflow unshifted
                                 {3, 16, -100, -80},
                                 {0, 8, -1, 1}}) {
    const auto x = randomFloats(rows * n, seed++, lo, hi);
    std::vector<float> y(rows, -7.0f);
    logSumExp(x.data(), y.data(), rows, n, pool_);
    const std::string what = "logsumexp [" + std::to_string(rows) + "," + std::to_string(n) + "]";
    expectClose(y, referenceLogSumExp(x, rows, n), 1e-6, 1e-6, what);

    const auto dy = randomFloats(rows, seed++);
    std::vector<float> dx(rows * n, -7.0f);
    logSumExpGrad(dy.data(), x.data(), y.data(), dx.data(), rows, n, pool_);
    std::vector<double> want(dx.size());
    const auto lse = referenceLogSumExp(x, rows, n);
    for (int64_t i = 0; i < rows * n; ++i) want[i] = dy[i / n] * std::exp(x[i] - lse[i / n]);
    expectClose(dx, want, 1e-5, 1e-7, what + " grad");
  }
  // torch.logsumexp at the edges: a row of -inf is -inf, a row holding +inf is +inf.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {-inf, -inf, 1.0f, inf};
  std::vector<float> y(2);
  logSumExp(x.data(), y.data(), 2, 2, pool_);
  EXPECT_EQ(y[0], -inf);
  EXPECT_EQ(y[1], inf);
}

TEST_P(MoeTest, LogSumExpGradMatchesFiniteDifferences) {
  const int64_t rows = 3, n = 6;
  const auto x = randomFloats(rows * n, 1300, -2, 2), dy = randomFloats(rows, 1301);
  auto loss = [&](const std::vector<float>& at) {
    std::vector<float> y(rows);
    logSumExp(at.data(), y.data(), rows, n, pool_);
    double l = 0;
    for (int64_t r = 0; r < rows; ++r) l += static_cast<double>(dy[r]) * y[r];
    return l;
  };
  std::vector<float> y(rows), dx(rows * n);
  logSumExp(x.data(), y.data(), rows, n, pool_);
  logSumExpGrad(dy.data(), x.data(), y.data(), dx.data(), rows, n, pool_);
  std::vector<double> numeric(rows * n);
  for (int64_t i = 0; i < rows * n; ++i) {
    std::vector<float> up = x, down = x;
    up[i] += 1e-2f;
    down[i] -= 1e-2f;
    numeric[i] = (loss(up) - loss(down)) / (static_cast<double>(up[i]) - down[i]);
  }
  expectClose(dx, numeric, 1e-3, 2e-4, "logsumexp_grad finite differences");
}

DTC_INSTANTIATE_POOL_TEST(MoeTest);

// ---- Through the CPU backend: the contracts and the step's error.

TEST(MoeSteps, RouteThroughTheBackend) {
  ThreadPool pool(2);
  const float scores[] = {0.1f, 0.6f, 0.3f, 0.5f, 0.5f, 0.0f, 0.2f, 0.3f, 0.5f};
  std::vector<Operand> ins = {operand(DType::kF32, {1, 3, 3}, scores)};
  std::vector<Operand> outs = {operand(DType::kI64, {1, 3, 2}), operand(DType::kI64, {1, 3, 2}),
                               operand(DType::kF32, {1, 3, 2}), operand(DType::kF32, {1, 3, 3})};
  ASSERT_TRUE(
      runStep(Kernel::moe_route, ins, outs, {{"top_k", 2}, {"capacity", 2}, {"normalize", 1}}, pool)
          .ok());
  const int64_t* slot = reinterpret_cast<const int64_t*>(outs[1].bytes.data());
  EXPECT_EQ(std::vector<int64_t>(slot, slot + 6), (std::vector<int64_t>{0, 1, 0, 1, 0, -1}));

  Status s = runStep(Kernel::moe_route, ins, outs, {{"top_k", 4}, {"capacity", 2}}, pool);
  EXPECT_NE(s.message().find("top_k 4 is outside [1, 3]"), std::string::npos) << s.message();
  s = runStep(Kernel::moe_route, ins, outs, {{"top_k", 2}}, pool);
  EXPECT_NE(s.message().find("capacity 0 must be >= 1"), std::string::npos) << s.message();
  outs[0] = operand(DType::kF32, {1, 3, 2});
  s = runStep(Kernel::moe_route, ins, outs, {{"top_k", 2}, {"capacity", 2}}, pool);
  EXPECT_NE(s.message().find("expert and slot must be int64"), std::string::npos) << s.message();
}

TEST(MoeSteps, CorruptPlanFailsTheStep) {
  ThreadPool pool(2);
  const int64_t expert[] = {0, 5}, slot[] = {0, 0};
  std::vector<Operand> ins = {operand(DType::kF32, {1, 2, 4}),
                              operand(DType::kI64, {1, 2, 1}, expert),
                              operand(DType::kI64, {1, 2, 1}, slot)};
  std::vector<Operand> outs = {operand(DType::kF32, {3, 1, 2, 4})};
  const Status s = runStep(Kernel::moe_dispatch, ins, outs, {}, pool);
  EXPECT_EQ(s.message(),
            "moe_dispatch at router: a routing plan names an expert outside [0, 3) "
            "or a slot outside [-1, 2)");
  // A buffer that does not match the tokens is the contract's to refuse.
  outs[0] = operand(DType::kF32, {3, 1, 2, 5});
  const Status shape = runStep(Kernel::moe_dispatch, ins, outs, {}, pool);
  EXPECT_NE(shape.message().find("x [1,2,4] does not match [G, S, D] = [1,2,5]"), std::string::npos)
      << shape.message();
}

TEST(MoeSteps, LogSumExpContract) {
  ThreadPool pool(1);
  const float x[] = {0.0f, 0.0f, 1.0f, 1.0f};
  std::vector<Operand> ins = {operand(DType::kF32, {2, 2}, x)};
  std::vector<Operand> outs = {operand(DType::kF32, {2})};
  ASSERT_TRUE(runStep(Kernel::logsumexp, ins, outs, {}, pool).ok());
  const float* y = reinterpret_cast<const float*>(outs[0].bytes.data());
  EXPECT_FLOAT_EQ(y[0], std::log(2.0f));
  EXPECT_FLOAT_EQ(y[1], 1.0f + std::log(2.0f));
  outs[0] = operand(DType::kF32, {2, 1});
  EXPECT_FALSE(runStep(Kernel::logsumexp, ins, outs, {}, pool).ok());
}

}  // namespace
}  // namespace dtc::cpu
