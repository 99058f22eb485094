// embedding (lookup with range check) and embeddingGrad (scatter-add) against references; the
// gradient must be bit-identical for any thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "cpu/kernels/transformer_kernels.h"
#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::expectClose;
using testing::PoolTest;
using testing::randomFloats;

// n ids in [0, vocab) with many repeats: drawn from the first few ids most of the time, like the
// skewed token frequencies of text.
std::vector<int64_t> randomIds(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> any(0, vocab - 1);
  std::uniform_int_distribution<int64_t> common(0, std::min<int64_t>(vocab, 4) - 1);
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = (gen() % 2) ? common(gen) : any(gen);
  return ids;
}

// dtable = Σ_i onehot(ids[i]) ⊗ dy[i], in double.
std::vector<double> referenceGrad(const std::vector<float>& dy, const std::vector<int64_t>& ids,
                                  int64_t vocab, int64_t dim) {
  std::vector<double> want(vocab * dim, 0.0);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t j = 0; j < dim; ++j) want[ids[i] * dim + j] += dy[i * dim + j];
  return want;
}

struct EmbeddingCase {
  int64_t vocab, dim, n;
};
const EmbeddingCase kCases[] = {{1, 1, 1},       {1, 5, 9},    {11, 70, 40}, {97, 3, 500},
                                {300, 33, 1000}, {5, 257, 64}, {50, 8, 0}};

std::string caseName(const EmbeddingCase& c) {
  return "vocab " + std::to_string(c.vocab) + " dim " + std::to_string(c.dim) + " n " +
         std::to_string(c.n);
}

class EmbeddingTest : public PoolTest {};

TEST_P(EmbeddingTest, LooksUpRows) {
  uint32_t seed = 700;
  for (const auto& c : kCases) {
    const auto table = randomFloats(c.vocab * c.dim, seed++);
    const auto ids = randomIds(c.n, c.vocab, seed++);
    std::vector<float> out(c.n * c.dim, -7.0f);
    ASSERT_TRUE(embedding(table.data(), ids.data(), out.data(), c.n, c.vocab, c.dim, pool_));
    for (int64_t i = 0; i < c.n; ++i)
      for (int64_t j = 0; j < c.dim; ++j)
        ASSERT_EQ(out[i * c.dim + j], table[ids[i] * c.dim + j]) << caseName(c);
  }
}

TEST_P(EmbeddingTest, RejectsOutOfRangeIds) {
  const int64_t vocab = 11, dim = 4, n = 20;
  const auto table = randomFloats(vocab * dim, 710);
  std::vector<float> out(n * dim);
  for (int64_t bad : {int64_t{-1}, vocab, vocab + 100, std::numeric_limits<int64_t>::min(),
                      std::numeric_limits<int64_t>::max()})
    for (int64_t where : {int64_t{0}, int64_t{7}, n - 1}) {
      auto ids = randomIds(n, vocab, 711);
      ids[where] = bad;
      EXPECT_FALSE(embedding(table.data(), ids.data(), out.data(), n, vocab, dim, pool_))
          << "id " << bad << " at " << where;
    }
  // The edges of the range are fine.
  std::vector<int64_t> edges = {0, vocab - 1};
  EXPECT_TRUE(embedding(table.data(), edges.data(), out.data(), 2, vocab, dim, pool_));
}

TEST_P(EmbeddingTest, GradScatterAddsRepeatedIds) {
  uint32_t seed = 720;
  for (const auto& c : kCases) {
    const auto ids = randomIds(c.n, c.vocab, seed++);
    const auto dy = randomFloats(c.n * c.dim, seed++);
    // NaN-filled: the kernel must zero rows no id refers to.
    std::vector<float> dt(c.vocab * c.dim, std::numeric_limits<float>::quiet_NaN());
    embeddingGrad(dy.data(), ids.data(), dt.data(), c.n, c.vocab, c.dim, pool_);
    expectClose(dt, referenceGrad(dy, ids, c.vocab, c.dim), 1e-5, 1e-6, caseName(c));
  }
  // Every position on the same id.
  const int64_t vocab = 3, dim = 17, n = 301;
  const std::vector<int64_t> same(n, 1);
  const auto dy = randomFloats(n * dim, 730);
  std::vector<float> dt(vocab * dim, std::numeric_limits<float>::quiet_NaN());
  embeddingGrad(dy.data(), same.data(), dt.data(), n, vocab, dim, pool_);
  expectClose(dt, referenceGrad(dy, same, vocab, dim), 1e-5, 1e-6, "one id");
}

TEST_P(EmbeddingTest, GradMatchesFiniteDifferences) {
  // L(table) = Σ dy ⊙ embedding(table, ids) is linear in the table, so its central
  // differences (in double) are exactly the scatter-add of dy; this checks the kernel against
  // the definition of the gradient rather than a re-statement of the formula.
  const int64_t vocab = 7, dim = 5, n = 23;
  const auto ids = randomIds(n, vocab, 740);
  const auto dy = randomFloats(n * dim, 741);
  std::vector<double> table(vocab * dim, 0.5);
  auto loss = [&] {
    double l = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < dim; ++j) l += dy[i * dim + j] * table[ids[i] * dim + j];
    return l;
  };
  std::vector<double> fd(table.size());
  const double h = 1e-3;
  for (size_t e = 0; e < table.size(); ++e) {
    const double saved = table[e];
    table[e] = saved + h;
    const double lp = loss();
    table[e] = saved - h;
    const double lm = loss();
    table[e] = saved;
    fd[e] = (lp - lm) / (2 * h);
  }
  std::vector<float> dt(vocab * dim);
  embeddingGrad(dy.data(), ids.data(), dt.data(), n, vocab, dim, pool_);
  expectClose(dt, fd, 1e-5, 1e-6, "finite differences");
}

TEST_P(EmbeddingTest, GradIsBitIdenticalForAnyThreadCount) {
  // Long runs of repeated ids make the summation order matter in fp32.
  const EmbeddingCase cases[] = {{300, 33, 5000}, {50257 / 64, 96, 4096}, {4, 1, 3000}};
  uint32_t seed = 750;
  for (const auto& c : cases) {
    const auto ids = randomIds(c.n, c.vocab, seed++);
    const auto dy = randomFloats(c.n * c.dim, seed++, -10.0f, 10.0f);
    std::vector<float> dt(c.vocab * c.dim);
    embeddingGrad(dy.data(), ids.data(), dt.data(), c.n, c.vocab, c.dim, pool_);
    for (int threads : {1, 2, 3, 4}) {
      ThreadPool other(threads);
      std::vector<float> dt2(dt.size(), -7.0f);
      embeddingGrad(dy.data(), ids.data(), dt2.data(), c.n, c.vocab, c.dim, other);
      EXPECT_EQ(dt2, dt) << caseName(c) << " threads " << threads;
    }
  }
}

DTC_INSTANTIATE_POOL_TEST(EmbeddingTest);

}  // namespace
}  // namespace dtc::cpu
