// Transformer kernels against naive double-precision references, with 1- and 3-thread pools.
// (Their gradients are also checked by finite differences through the whole stack in
// tests/unit/gradcheck.)
#include <cmath>

#include "cpu/transformer_kernels.h"
#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::expectClose;
using testing::PoolTest;
using testing::randomFloats;

class TransformerKernels : public PoolTest {};

TEST_P(TransformerKernels, BatchMatmulMatchesPerBatchProducts) {
  const int64_t batch = 3, m = 5, n = 7, k = 9;
  for (bool tA : {false, true})
    for (bool tB : {false, true}) {
      auto a = randomFloats(batch * m * k, 1), b = randomFloats(batch * k * n, 2);
      std::vector<float> c(batch * m * n);
      batchMatmul(a.data(), b.data(), c.data(), batch, m, n, k, tA, tB, pool_);
      std::vector<double> want(c.size(), 0.0);
      for (int64_t p = 0; p < batch; ++p)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j)
            for (int64_t q = 0; q < k; ++q) {
              double x = tA ? a[p * m * k + q * m + i] : a[p * m * k + i * k + q];
              double y = tB ? b[p * k * n + j * k + q] : b[p * k * n + q * n + j];
              want[p * m * n + i * n + j] += x * y;
            }
      expectClose(c, want, 1e-5, 1e-5, "batchMatmul");
    }
}

TEST_P(TransformerKernels, TransposeRoundTripsAndMatchesIndexing) {
  const Shape shape = {2, 3, 5, 4};
  const std::vector<int64_t> perm = {0, 2, 1, 3}, inverse = {0, 2, 1, 3};
  auto x = randomFloats(numElements(shape), 3);
  std::vector<float> y(x.size()), back(x.size());
  transpose(x.data(), shape, perm, y.data(), pool_);
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 5; ++c)
        for (int64_t d = 0; d < 4; ++d)
          ASSERT_EQ(y[((a * 5 + c) * 3 + b) * 4 + d], x[((a * 3 + b) * 5 + c) * 4 + d]);
  transpose(y.data(), {2, 5, 3, 4}, inverse, back.data(), pool_);
  EXPECT_EQ(back, x);
  // A permutation that moves the last dimension (strided inner copies).
  std::vector<float> z(x.size());
  transpose(x.data(), shape, {3, 1, 2, 0}, z.data(), pool_);
  EXPECT_EQ(z[((1 * 3 + 2) * 5 + 4) * 2 + 1], x[((1 * 3 + 2) * 5 + 4) * 4 + 1]);
}

TEST_P(TransformerKernels, SplitThenConcatIsIdentity) {
  for (int64_t axis : {0, 1, 2}) {
    const Shape shape = {6, 9, 12};
    auto x = randomFloats(numElements(shape), 4);
    Shape piece = shape;
    piece[axis] /= 3;
    std::vector<std::vector<float>> parts(3, std::vector<float>(numElements(piece)));
    split(x.data(), shape, axis, {parts[0].data(), parts[1].data(), parts[2].data()}, pool_);
    // Piece 1's first element is x at index piece[axis] along `axis`.
    int64_t stride = 1;
    for (size_t d = axis + 1; d < shape.size(); ++d) stride *= shape[d];
    EXPECT_EQ(parts[1][0], x[piece[axis] * stride]);
    std::vector<float> back(x.size());
    concat({parts[0].data(), parts[1].data(), parts[2].data()}, shape, axis, back.data(), pool_);
    EXPECT_EQ(back, x) << "axis " << axis;
  }
}

TEST_P(TransformerKernels, CausalSoftmaxIsMaskedAndNormalised) {
  const int64_t batch = 3, t = 7;
  const float scale = 0.6f;
  auto x = randomFloats(batch * t * t, 5, -4.0f, 4.0f);
  std::vector<float> y(x.size());
  causalSoftmax(x.data(), y.data(), batch, t, scale, pool_);
  std::vector<double> want(x.size(), 0.0);
  for (int64_t r = 0; r < batch * t; ++r) {
    int64_t i = r % t;
    double sum = 0;
    for (int64_t j = 0; j <= i; ++j) sum += std::exp(scale * x[r * t + j]);
    for (int64_t j = 0; j <= i; ++j) want[r * t + j] = std::exp(scale * x[r * t + j]) / sum;
  }
  expectClose(y, want, 1e-5, 1e-7, "causalSoftmax");
  for (int64_t r = 0; r < batch * t; ++r)
    for (int64_t j = r % t + 1; j < t; ++j) ASSERT_EQ(y[r * t + j], 0.0f);
  // In place gives the same result.
  std::vector<float> inPlace = x;
  causalSoftmax(inPlace.data(), inPlace.data(), batch, t, scale, pool_);
  EXPECT_EQ(inPlace, y);
}

TEST_P(TransformerKernels, LayerNormMatchesReferenceAndGradIsDeterministic) {
  const int64_t rows = 200, c = 33;
  auto x = randomFloats(rows * c, 6, -3.0f, 3.0f), w = randomFloats(c, 7), b = randomFloats(c, 8);
  std::vector<float> y(x.size()), mean(rows), rstd(rows);
  layerNorm(x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), rows, c, 1e-5f, pool_);
  std::vector<double> want(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < c; ++j) mu += x[r * c + j] / double(c);
    for (int64_t j = 0; j < c; ++j) var += (x[r * c + j] - mu) * (x[r * c + j] - mu) / c;
    for (int64_t j = 0; j < c; ++j)
      want[r * c + j] = (x[r * c + j] - mu) / std::sqrt(var + 1e-5) * w[j] + b[j];
  }
  expectClose(y, want, 1e-5, 1e-5, "layerNorm");
  auto dy = randomFloats(rows * c, 9);
  std::vector<float> dx(x.size()), dw(c), db(c);
  layerNormGrad(dy.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(), dw.data(),
                db.data(), rows, c, pool_);
  std::vector<double> wantDb(c, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c; ++j) wantDb[j] += dy[r * c + j];
  expectClose(db, wantDb, 1e-5, 1e-5, "layerNormGrad db");
  for (int threads : {1, 2, 4}) {
    ThreadPool other(threads);
    std::vector<float> dx2(x.size()), dw2(c), db2(c);
    layerNormGrad(dy.data(), x.data(), w.data(), mean.data(), rstd.data(), dx2.data(), dw2.data(),
                  db2.data(), rows, c, other);
    EXPECT_EQ(dw2, dw);
    EXPECT_EQ(db2, db);
    EXPECT_EQ(dx2, dx);
  }
}

TEST_P(TransformerKernels, EmbeddingLooksUpAndScatterAdds) {
  const int64_t vocab = 11, dim = 70, n = 40;
  auto table = randomFloats(vocab * dim, 10);
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = (i * 7) % vocab;  // repeats
  std::vector<float> out(n * dim);
  ASSERT_TRUE(embedding(table.data(), ids.data(), out.data(), n, vocab, dim, pool_));
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i * dim + 3], table[ids[i] * dim + 3]);
  auto dy = randomFloats(n * dim, 11);
  std::vector<float> dt(vocab * dim);
  embeddingGrad(dy.data(), ids.data(), dt.data(), n, vocab, dim, pool_);
  std::vector<double> want(vocab * dim, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < dim; ++j) want[ids[i] * dim + j] += dy[i * dim + j];
  expectClose(dt, want, 1e-5, 1e-6, "embeddingGrad");
  ThreadPool four(4);
  std::vector<float> dt4(dt.size());
  embeddingGrad(dy.data(), ids.data(), dt4.data(), n, vocab, dim, four);
  EXPECT_EQ(dt4, dt);
  ids[5] = vocab;
  EXPECT_FALSE(embedding(table.data(), ids.data(), out.data(), n, vocab, dim, pool_));
  ids[5] = -1;
  EXPECT_FALSE(embedding(table.data(), ids.data(), out.data(), n, vocab, dim, pool_));
}

DTC_INSTANTIATE_POOL_TEST(TransformerKernels);

}  // namespace
}  // namespace dtc::cpu
