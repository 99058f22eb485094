// A BatchNorm2d case run through the fused training kernels, forward and backward: the inputs
// (seeded) and the results, for the tests that hold those results against the definition and
// against the synchronised pieces.
#pragma once

#include <vector>

#include "cpu/kernels/conv_kernels.h"
#include "test_util.h"

namespace dtc::cpu::testing {

struct BatchNormCase {
  int64_t n, c, s;
  float eps = 1e-5f, momentum = 0.1f;
  std::vector<float> x, dy, weight, bias, runningMean, runningVar;
  std::vector<float> y, mean, rstd, newRunningMean, newRunningVar, dx, dweight, dbias;

  BatchNormCase(int64_t n_, int64_t c_, int64_t s_, uint32_t seed, ThreadPool& pool)
      : n(n_),
        c(c_),
        s(s_),
        x(randomFloats(n * c * s, seed, -2.0f, 3.0f)),
        dy(randomFloats(n * c * s, seed + 1)),
        weight(randomFloats(c, seed + 2, 0.5f, 1.5f)),
        bias(randomFloats(c, seed + 3)),
        runningMean(randomFloats(c, seed + 4)),
        runningVar(randomFloats(c, seed + 5, 0.5f, 2.0f)),
        y(n * c * s),
        mean(c),
        rstd(c),
        newRunningMean(c),
        newRunningVar(c),
        dx(n * c * s),
        dweight(c),
        dbias(c) {
    batchNormTrain(x.data(), weight.data(), bias.data(), runningMean.data(), runningVar.data(),
                   y.data(), mean.data(), rstd.data(), newRunningMean.data(), newRunningVar.data(),
                   n, c, s, eps, momentum, pool);
    batchNormTrainGrad(dy.data(), x.data(), weight.data(), mean.data(), rstd.data(), dx.data(),
                       dweight.data(), dbias.data(), n, c, s, pool);
  }
};

}  // namespace dtc::cpu::testing
