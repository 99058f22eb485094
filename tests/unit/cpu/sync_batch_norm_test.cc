// Synchronised BatchNorm pieces against the fused kernels: a batch cut into device slices,
// whose per-channel sums are added between the steps (what the all-reduces do), must give the
// fused kernels' results on the whole batch.
#include "batch_norm_case.h"
#include "cpu/kernels/conv_kernels.h"
#include "test_util.h"

namespace dtc::cpu::testing {
namespace {

class SyncBatchNormTest : public PoolTest {};

TEST_P(SyncBatchNormTest, SlicesWithSummedStatisticsMatchTheWholeBatch) {
  const BatchNormCase bn(6, 3, 5, 1, pool_);
  const int64_t n = bn.n, c = bn.c, s = bn.s, parts = 3, slice = n / parts, count = n * s;
  const float eps = bn.eps, momentum = bn.momentum;
  const auto &x = bn.x, &dy = bn.dy, &w = bn.weight, &b = bn.bias, &rm = bn.runningMean,
             &rv = bn.runningVar;
  const auto &y = bn.y, &mean = bn.mean, &rstd = bn.rstd, &nrm = bn.newRunningMean,
             &nrv = bn.newRunningVar, &dx = bn.dx, &dw = bn.dweight, &db = bn.dbias;

  auto part = [&](const std::vector<float>& v, int64_t p) { return v.data() + p * slice * c * s; };
  auto allReduce = [&](auto&& local) {  // Σ over the slices of a per-channel result
    std::vector<float> total(c, 0.0f), one(c);
    for (int64_t p = 0; p < parts; ++p) {
      local(p, one.data());
      for (int64_t ch = 0; ch < c; ++ch) total[ch] += one[ch];
    }
    return total;
  };
  auto sum =
      allReduce([&](int64_t p, float* out) { batchNormSum(part(x, p), out, slice, c, s, pool_); });
  auto squares = allReduce([&](int64_t p, float* out) {
    batchNormCenteredSquares(part(x, p), sum.data(), out, slice, c, s, count, pool_);
  });
  std::vector<float> y2(n * c * s), mean2(c), rstd2(c), nrm2(c), nrv2(c), dx2(n * c * s);
  for (int64_t p = 0; p < parts; ++p)
    batchNormNormalize(part(x, p), sum.data(), squares.data(), w.data(), b.data(), rm.data(),
                       rv.data(), y2.data() + p * slice * c * s, mean2.data(), rstd2.data(),
                       nrm2.data(), nrv2.data(), slice, c, s, count, eps, momentum, pool_);
  std::vector<float> db2(c, 0.0f), dw2(c, 0.0f), dbp(c), dwp(c);
  for (int64_t p = 0; p < parts; ++p) {
    batchNormGradSums(part(dy, p), part(x, p), mean2.data(), rstd2.data(), dbp.data(), dwp.data(),
                      slice, c, s, pool_);
    for (int64_t ch = 0; ch < c; ++ch) db2[ch] += dbp[ch], dw2[ch] += dwp[ch];
  }
  for (int64_t p = 0; p < parts; ++p)
    batchNormGradInput(part(dy, p), part(x, p), w.data(), mean2.data(), rstd2.data(), db2.data(),
                       dw2.data(), dx2.data() + p * slice * c * s, slice, c, s, count, pool_);

  for (int64_t i = 0; i < n * c * s; ++i) {
    expectClose(y2[i], y[i], 1e-5, 1e-6, "y " + std::to_string(i));
    expectClose(dx2[i], dx[i], 1e-4, 1e-6, "dx " + std::to_string(i));
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    expectClose(mean2[ch], mean[ch], 1e-5, 1e-6, "mean");
    expectClose(rstd2[ch], rstd[ch], 1e-5, 1e-6, "rstd");
    expectClose(nrm2[ch], nrm[ch], 1e-5, 1e-6, "running mean");
    expectClose(nrv2[ch], nrv[ch], 1e-5, 1e-6, "running var");
    expectClose(db2[ch], db[ch], 1e-5, 1e-6, "dbias");
    expectClose(dw2[ch], dw[ch], 1e-5, 1e-6, "dweight");
  }
}

DTC_INSTANTIATE_POOL_TEST(SyncBatchNormTest);

}  // namespace
}  // namespace dtc::cpu::testing
