// FP8 training's kernels through the CPU backend (the exact emulation of exec/fp8_contracts.h)
// against references written out here: per-tensor quantization (the amax step, torchao's scale,
// the codes of support/float8.h, which its own test holds to ml_dtypes) with its transposed copy,
// from float32 and bfloat16, of a matrix and of a [B, T, C] tensor; an amax given from elsewhere
// (as an all-reduce MAX over a split tensor's ranks gives it); the scaled GEMM in double from the
// decoded codes, to f32 and bf16, over one contracted dimension and over two; and the contracts'
// refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "step_runner.h"
#include "support/float8.h"
#include "support/half.h"
#include "support/thread_pool.h"

namespace dtc::cpu {
namespace {

using testing::operand;
using testing::Operand;
using testing::runStep;

uint8_t code(float v, DType t) {
  return t == DType::kF8E4M3 ? f32ToFloat8<E4M3>(v) : f32ToFloat8<E5M2>(v);
}
float value(uint8_t c, DType t) {
  return t == DType::kF8E4M3 ? float8ToF32<E4M3>(c) : float8ToF32<E5M2>(c);
}

std::vector<float> uniform(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Quantized {
  std::vector<uint8_t> q, qt;
  float scaleInv = 0;
};

// The reference: amax by hand, scale = fmax / amax in double rounded to f32, each x·scale (f32)
// rounded to the format.
Quantized referenceQuantize(const std::vector<float>& x, int64_t rows, int64_t cols, DType t) {
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  const double fmax = t == DType::kF8E4M3 ? 448.0 : 57344.0;
  const float scale = static_cast<float>(fmax / std::max<double>(amax, 1e-12));
  Quantized r;
  r.q.resize(x.size());
  r.qt.resize(x.size());
  for (int64_t i = 0; i < rows * cols; ++i) {
    r.q[i] = code(x[i] * scale, t);
    r.qt[(i % cols) * rows + i / cols] = r.q[i];
  }
  r.scaleInv = 1.0f / scale;
  return r;
}

std::vector<uint8_t> bytesOf(const Operand& o) { return o.bytes; }

float floatOf(const Operand& o) {
  float v = 0;
  std::memcpy(&v, o.bytes.data(), sizeof v);
  return v;
}

// fp8_amax, then fp8_quantize on its amax: outs (q, scale_inv[, q_t]).
Status quantizeSteps(std::vector<Operand>& x, std::vector<Operand>& outs, ThreadPool& pool) {
  std::vector<Operand> amax = {operand(DType::kF32, {1})};
  DTC_RETURN_IF_ERROR(runStep(Kernel::fp8_amax, x, amax, {}, pool));
  std::vector<Operand> ins = {x[0], amax[0]};
  return runStep(Kernel::fp8_quantize, ins, outs, {}, pool);
}

TEST(Fp8Steps, QuantizeMatchesTheReference) {
  ThreadPool pool(2);
  const int64_t rows = 37, cols = 24;  // odd rows: no block of the work divides them
  for (DType format : {DType::kF8E4M3, DType::kF8E5M2})
    for (DType input : {DType::kF32, DType::kBF16}) {
      std::vector<float> x = uniform(rows * cols, -3.0f, 5.0f, 7);
      std::vector<uint16_t> words;
      if (input == DType::kBF16)
        for (float& v : x) {
          words.push_back(f32ToBf16(v));
          v = bf16ToF32(words.back());
        }
      std::vector<Operand> ins = {input == DType::kF32
                                      ? operand(input, {rows, cols}, x.data())
                                      : operand(input, {rows, cols}, words.data())};
      std::vector<Operand> outs = {operand(format, {rows, cols}), operand(DType::kF32, {1}),
                                   operand(format, {cols, rows})};
      ASSERT_TRUE(quantizeSteps(ins, outs, pool).ok());
      const Quantized want = referenceQuantize(x, rows, cols, format);
      EXPECT_EQ(bytesOf(outs[0]), want.q) << dtypeName(format) << " from " << dtypeName(input);
      EXPECT_EQ(bytesOf(outs[2]), want.qt);
      float scaleInv = 0;
      std::memcpy(&scaleInv, outs[1].bytes.data(), sizeof scaleInv);
      EXPECT_EQ(scaleInv, want.scaleInv);
      // The largest magnitude lands on the format's largest code.
      uint8_t top = 0;
      for (uint8_t c : want.q) top = std::max<uint8_t>(top, c & 0x7f);
      EXPECT_EQ(top, format == DType::kF8E4M3 ? 0x7e : 0x7b);
    }
}

TEST(Fp8Steps, QuantizeOfZerosHasAFiniteScale) {
  ThreadPool pool(1);
  std::vector<Operand> ins = {operand(DType::kF32, {4, 8})};
  std::vector<Operand> outs = {operand(DType::kF8E4M3, {4, 8}), operand(DType::kF32, {1})};
  ASSERT_TRUE(quantizeSteps(ins, outs, pool).ok());
  EXPECT_EQ(floatOf(outs[1]), 1.0f / static_cast<float>(448.0 / 1e-12));
  EXPECT_EQ(bytesOf(outs[0]), std::vector<uint8_t>(32, 0));
}

// x [B, T, C]: q keeps its shape, q_t is [C, B, T] (memory [C, B·T]), and an amax from elsewhere
// (a larger one, as a split tensor's other ranks may hold) sets the scale, not x's own.
TEST(Fp8Steps, QuantizeOfABatchOnAGivenAmax) {
  ThreadPool pool(2);
  const int64_t b = 3, t = 5, c = 16;
  const std::vector<float> x = uniform(b * t * c, -2.0f, 2.0f, 11);
  const float given = 7.5f;
  std::vector<Operand> ins = {operand(DType::kF32, {b, t, c}, x.data()),
                              operand(DType::kF32, {1}, &given)};
  std::vector<Operand> outs = {operand(DType::kF8E5M2, {b, t, c}), operand(DType::kF32, {1}),
                               operand(DType::kF8E5M2, {c, b, t})};
  ASSERT_TRUE(runStep(Kernel::fp8_quantize, ins, outs, {}, pool).ok());
  const float scale = static_cast<float>(57344.0 / given);
  for (int64_t i = 0; i < b * t * c; ++i) {
    const uint8_t want = code(x[i] * scale, DType::kF8E5M2);
    ASSERT_EQ(outs[0].bytes[i], want) << i;
    ASSERT_EQ(outs[2].bytes[(i % c) * b * t + i / c], want) << i;
  }
  EXPECT_EQ(floatOf(outs[1]), 1.0f / scale);
  std::vector<Operand> amax = {operand(DType::kF32, {1})};
  std::vector<Operand> xs = {ins[0]};
  ASSERT_TRUE(runStep(Kernel::fp8_amax, xs, amax, {}, pool).ok());
  float want = 0;
  for (float v : x) want = std::max(want, std::fabs(v));
  EXPECT_EQ(floatOf(amax[0]), want);
}

// Random finite codes of a format.
std::vector<uint8_t> randomCodes(size_t n, DType t, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& c : v) {
    do c = static_cast<uint8_t>(rng() & 0xff);
    while (!std::isfinite(value(c, t)));
  }
  return v;
}

TEST(Fp8Steps, GemmMatchesTheReference) {
  ThreadPool pool(2);
  const int64_t m = 19, n = 16, k = 48;
  for (auto [ta, tb] :
       {std::pair{DType::kF8E4M3, DType::kF8E4M3}, std::pair{DType::kF8E5M2, DType::kF8E4M3},
        std::pair{DType::kF8E4M3, DType::kF8E5M2}})
    for (DType outType : {DType::kF32, DType::kBF16}) {
      const std::vector<uint8_t> a = randomCodes(m * k, ta, 1), b = randomCodes(n * k, tb, 2);
      const float sa = 0.013f, sb = 2.5e-4f;
      std::vector<Operand> ins = {operand(ta, {m, k}, a.data()), operand(tb, {n, k}, b.data()),
                                  operand(DType::kF32, {1}, &sa), operand(DType::kF32, {1}, &sb)};
      std::vector<Operand> outs = {operand(outType, {m, n})};
      ASSERT_TRUE(runStep(Kernel::fp8_gemm, ins, outs, {}, pool).ok());
      double worst = 0, scale = 0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < k; ++p)
            sum += static_cast<double>(value(a[i * k + p], ta)) * value(b[j * k + p], tb);
          const double want = sum * static_cast<double>(sa * sb);
          float got = 0;
          if (outType == DType::kF32) {
            std::memcpy(&got, outs[0].bytes.data() + 4 * (i * n + j), 4);
          } else {
            uint16_t w = 0;
            std::memcpy(&w, outs[0].bytes.data() + 2 * (i * n + j), 2);
            got = bf16ToF32(w);
          }
          worst = std::max(worst, std::fabs(got - want));
          scale = std::max(scale, std::fabs(want));
        }
      // f32 sums of exact products; a bf16 result is that rounded once more.
      EXPECT_LE(worst, (outType == DType::kF32 ? 1e-5 : 8e-3) * scale)
          << dtypeName(ta) << " x " << dtypeName(tb) << " -> " << dtypeName(outType);
    }
}

// load_bf16: a float32 x rounded to bf16 as it is loaded gives the amax and codes of the bf16
// copy a cast would have made.
TEST(Fp8Steps, LoadingThroughBf16IsTheCastsCopy) {
  ThreadPool pool(2);
  const int64_t rows = 9, cols = 32;
  const std::vector<float> x = uniform(rows * cols, -3.0f, 3.0f, 5);
  std::vector<uint16_t> words;
  for (float v : x) words.push_back(f32ToBf16(v));
  std::vector<Operand> wide = {operand(DType::kF32, {rows, cols}, x.data())},
                       narrow = {operand(DType::kBF16, {rows, cols}, words.data())};
  std::vector<Operand> wideAmax = {operand(DType::kF32, {1})},
                       narrowAmax = {operand(DType::kF32, {1})};
  ASSERT_TRUE(runStep(Kernel::fp8_amax, wide, wideAmax, {{"load_bf16", 1}}, pool).ok());
  ASSERT_TRUE(runStep(Kernel::fp8_amax, narrow, narrowAmax, {}, pool).ok());
  EXPECT_EQ(floatOf(wideAmax[0]), floatOf(narrowAmax[0]));
  std::vector<Operand> wideIns = {wide[0], wideAmax[0]}, narrowIns = {narrow[0], narrowAmax[0]};
  std::vector<Operand> wideOut = {operand(DType::kF8E4M3, {rows, cols}), operand(DType::kF32, {1}),
                                  operand(DType::kF8E4M3, {cols, rows})};
  std::vector<Operand> narrowOut = wideOut;
  ASSERT_TRUE(runStep(Kernel::fp8_quantize, wideIns, wideOut, {{"load_bf16", 1}}, pool).ok());
  ASSERT_TRUE(runStep(Kernel::fp8_quantize, narrowIns, narrowOut, {}, pool).ok());
  for (size_t i = 0; i < wideOut.size(); ++i) EXPECT_EQ(bytesOf(wideOut[i]), bytesOf(narrowOut[i]));
  // Without it the f32 values give other codes: the rounding is what the attribute adds.
  std::vector<Operand> plain = wideOut;
  ASSERT_TRUE(runStep(Kernel::fp8_quantize, wideIns, plain, {}, pool).ok());
  EXPECT_NE(bytesOf(plain[0]), bytesOf(narrowOut[0]));
  Status s = runStep(Kernel::fp8_amax, narrow, narrowAmax, {{"load_bf16", 1}}, pool);
  EXPECT_NE(s.message().find("load_bf16 reads a float32 x"), std::string::npos) << s.message();
}

// A NaN anywhere makes the amax NaN, wherever it sits (as CUDA's integer maximum of the bits
// has it): the chunks' and the elements' order cannot hide it.
TEST(Fp8Steps, AmaxKeepsANaN) {
  ThreadPool pool(2);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t at : {int64_t(0), int64_t(5), int64_t(20000), int64_t(40000 - 1)}) {
    std::vector<float> x = uniform(40000, -1.0f, 1.0f, 3);
    x[static_cast<size_t>(at)] = nan;
    std::vector<Operand> ins = {operand(DType::kF32, {40000}, x.data())},
                         out = {operand(DType::kF32, {1})};
    ASSERT_TRUE(runStep(Kernel::fp8_amax, ins, out, {}, pool).ok());
    EXPECT_TRUE(std::isnan(floatOf(out[0]))) << "NaN at " << at << " gave " << floatOf(out[0]);
  }
  const float history[3] = {2.0f, nan, 5.0f}, one = 1.0f;
  std::vector<Operand> ins = {operand(DType::kF32, {3}, history)},
                       out = {operand(DType::kF32, {1})};
  ASSERT_TRUE(runStep(Kernel::fp8_history_amax, ins, out, {}, pool, {{"fmax", 448.0}}).ok());
  EXPECT_TRUE(std::isnan(floatOf(out[0])));
  std::vector<Operand> push = {operand(DType::kF32, {3}, history), operand(DType::kF32, {1}, &nan),
                               operand(DType::kF32, {1}, &one)};
  std::vector<Operand> pushed = {operand(DType::kF32, {3})};
  ASSERT_TRUE(runStep(Kernel::fp8_history_push, push, pushed, {}, pool).ok());
  float first = 0;
  std::memcpy(&first, pushed[0].bytes.data(), sizeof first);
  EXPECT_TRUE(std::isnan(first));
}

// Delayed scaling: the codes on a history's amax (scale 1 before any is recorded), x's own amax
// recorded from the same pass, and the history pushed with the largest of a step's amaxes.
TEST(Fp8Steps, DelayedScalingSteps) {
  ThreadPool pool(2);
  const float zeros[4] = {0, 0, 0, 0}, history[4] = {3.0f, 0.5f, 7.0f, 1.0f};
  for (auto [h, want] : {std::pair{zeros, 448.0f}, std::pair{history, 7.0f}}) {
    std::vector<Operand> ins = {operand(DType::kF32, {4}, h)}, out = {operand(DType::kF32, {1})};
    ASSERT_TRUE(runStep(Kernel::fp8_history_amax, ins, out, {}, pool, {{"fmax", 448.0}}).ok());
    EXPECT_EQ(floatOf(out[0]), want);
  }
  const std::vector<float> x = uniform(6 * 16, -4.0f, 4.0f, 9);
  const float used = 7.0f;
  std::vector<Operand> ins = {operand(DType::kF32, {6, 16}, x.data()),
                              operand(DType::kF32, {1}, &used)};
  std::vector<Operand> recorded = {operand(DType::kF8E4M3, {6, 16}), operand(DType::kF32, {1}),
                                   operand(DType::kF32, {1}), operand(DType::kF8E4M3, {16, 6})};
  ASSERT_TRUE(runStep(Kernel::fp8_quantize_recorded, ins, recorded, {}, pool).ok());
  std::vector<Operand> plain = {operand(DType::kF8E4M3, {6, 16}), operand(DType::kF32, {1}),
                                operand(DType::kF8E4M3, {16, 6})};
  ASSERT_TRUE(runStep(Kernel::fp8_quantize, ins, plain, {}, pool).ok());
  EXPECT_EQ(bytesOf(recorded[0]), bytesOf(plain[0]));
  EXPECT_EQ(bytesOf(recorded[3]), bytesOf(plain[2]));
  EXPECT_EQ(floatOf(recorded[1]), floatOf(plain[1]));
  float own = 0;
  for (float v : x) own = std::max(own, std::fabs(v));
  EXPECT_EQ(floatOf(recorded[2]), own);
  const float a = 2.0f, b = 9.0f;
  std::vector<Operand> push = {operand(DType::kF32, {4}, history), operand(DType::kF32, {1}, &a),
                               operand(DType::kF32, {1}, &b)};
  std::vector<Operand> pushed = {operand(DType::kF32, {4})};
  ASSERT_TRUE(runStep(Kernel::fp8_history_push, push, pushed, {}, pool).ok());
  const float want[4] = {9.0f, 3.0f, 0.5f, 7.0f};
  EXPECT_EQ(std::memcmp(pushed[0].bytes.data(), want, sizeof want), 0);
}

// FP8 codes transposed as bytes (the transposed copy made after an FP8 all-gather).
TEST(Fp8Steps, TransposeMovesCodes) {
  ThreadPool pool(1);
  std::vector<uint8_t> codes(2 * 3 * 4);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 7 + 1);
  std::vector<Operand> ins = {operand(DType::kF8E4M3, {2, 3, 4}, codes.data())};
  std::vector<Operand> outs = {operand(DType::kF8E4M3, {4, 2, 3})};
  ASSERT_TRUE(runStep(Kernel::transpose, ins, outs, {}, pool, {}, {{"perm", {2, 0, 1}}}).ok());
  for (int64_t c = 0; c < 4; ++c)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 3; ++t)
        ASSERT_EQ(outs[0].bytes[(c * 2 + b) * 3 + t], codes[(b * 3 + t) * 4 + c]);
  outs = {operand(DType::kF8E5M2, {4, 2, 3})};
  Status s = runStep(Kernel::transpose, ins, outs, {}, pool, {}, {{"perm", {2, 0, 1}}});
  EXPECT_NE(s.message().find("output must be the input's"), std::string::npos) << s.message();
}

// A weight gradient's form: a [N, B, T] and b [K, B, T] contracted over their last two
// dimensions give [N, K], as the matrices [N, B·T] and [K, B·T] do.
TEST(Fp8Steps, GemmOverTwoContractedDimensions) {
  ThreadPool pool(2);
  const int64_t n = 16, k = 32, b = 3, t = 7;
  const std::vector<uint8_t> a = randomCodes(n * b * t, DType::kF8E5M2, 3),
                             w = randomCodes(k * b * t, DType::kF8E4M3, 4);
  const float sa = 0.5f, sb = 0.25f;
  std::vector<Operand> ins = {operand(DType::kF8E5M2, {n, b, t}, a.data()),
                              operand(DType::kF8E4M3, {k, b, t}, w.data()),
                              operand(DType::kF32, {1}, &sa), operand(DType::kF32, {1}, &sb)};
  std::vector<Operand> three = {operand(DType::kF32, {n, k})};
  ASSERT_TRUE(runStep(Kernel::fp8_gemm, ins, three, {{"contract_dims", 2}}, pool).ok());
  std::vector<Operand> flat = {operand(DType::kF8E5M2, {n, b * t}, a.data()),
                               operand(DType::kF8E4M3, {k, b * t}, w.data()), ins[2], ins[3]};
  std::vector<Operand> two = {operand(DType::kF32, {n, k})};
  ASSERT_TRUE(runStep(Kernel::fp8_gemm, flat, two, {}, pool).ok());
  EXPECT_EQ(bytesOf(three[0]), bytesOf(two[0]));
  Status s = runStep(Kernel::fp8_gemm, ins, three, {{"contract_dims", 1}}, pool);
  EXPECT_NE(s.message().find("out must be [16,3,32,3]"), std::string::npos) << s.message();
  s = runStep(Kernel::fp8_gemm, ins, three, {{"contract_dims", 3}}, pool);
  EXPECT_NE(s.message().find("a leading dimension"), std::string::npos) << s.message();
}

TEST(Fp8Steps, ContractsRefuseWhatNoKernelRuns) {
  ThreadPool pool(1);
  const float one = 1.0f;
  std::vector<Operand> ins = {operand(DType::kF8E5M2, {4, 16}), operand(DType::kF8E5M2, {8, 16}),
                              operand(DType::kF32, {1}, &one), operand(DType::kF32, {1}, &one)};
  std::vector<Operand> outs = {operand(DType::kF32, {4, 8})};
  Status s = runStep(Kernel::fp8_gemm, ins, outs, {}, pool);
  EXPECT_NE(s.message().find("cannot both be float8_e5m2"), std::string::npos) << s.message();
  ins[1] = operand(DType::kF8E4M3, {8, 12});
  s = runStep(Kernel::fp8_gemm, ins, outs, {}, pool);
  EXPECT_NE(s.message().find("must share their last 1"), std::string::npos) << s.message();

  const float amax = 2.0f;
  std::vector<Operand> x = {operand(DType::kF32, {4, 8}), operand(DType::kF32, {1}, &amax)};
  std::vector<Operand> q = {operand(DType::kF8E4M3, {4, 8}), operand(DType::kF32, {1}),
                            operand(DType::kF8E4M3, {4, 8})};
  s = runStep(Kernel::fp8_quantize, x, q, {}, pool);
  EXPECT_NE(s.message().find("q_t must be float8_e4m3fn [8,4]"), std::string::npos) << s.message();
  q = {operand(DType::kBF16, {4, 8}), operand(DType::kF32, {1})};
  s = runStep(Kernel::fp8_quantize, x, q, {}, pool);
  EXPECT_NE(s.message().find("q must be float8_e4m3fn or float8_e5m2"), std::string::npos)
      << s.message();
  x.pop_back();
  q = {operand(DType::kF8E4M3, {4, 8}), operand(DType::kF32, {1})};
  s = runStep(Kernel::fp8_quantize, x, q, {}, pool);
  EXPECT_NE(s.message().find("expects 2 inputs (x, amax)"), std::string::npos) << s.message();
  std::vector<Operand> wide = {operand(DType::kF32, {2})};
  s = runStep(Kernel::fp8_amax, x, wide, {}, pool);
  EXPECT_NE(s.message().find("amax must be one float32"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace dtc::cpu
