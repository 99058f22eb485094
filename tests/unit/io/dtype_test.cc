#include "support/dtype.h"
#include "support/finite_copy.h"
#include "support/thread_pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace dtc {
namespace {

// The reference: every element tested on its own.
template <typename T>
int64_t slowFirstNonFinite(const std::vector<T>& v) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(static_cast<double>(v[i]))) return static_cast<int64_t>(i);
  return -1;
}

const uint8_t* bytes(const void* p) { return static_cast<const uint8_t*>(p); }

TEST(FirstNonFinite, FindsTheFirstInfOrNanAtEveryPlaceAndLength) {
  const float specials[] = {std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  // Lengths around the scan's blocks of 1024, hits in a block, at its edges and in the tail.
  for (int64_t n : {0, 1, 7, 1023, 1024, 1025, 3000, 4096}) {
    std::vector<float> v(static_cast<size_t>(n), 1.5f);
    if (n > 0) v.back() = std::numeric_limits<float>::max();  // finite, exponent not all ones
    EXPECT_EQ(firstNonFinite(bytes(v.data()), n, DType::kF32), -1) << n;
    for (int64_t at : {int64_t{0}, n / 2, n - 1, int64_t{1023}, int64_t{1024}}) {
      if (at < 0 || at >= n) continue;
      for (float special : specials) {
        std::vector<float> w = v;
        w[static_cast<size_t>(at)] = special;
        if (at + 1 < n) w.back() = special;  // a later hit does not hide the first
        EXPECT_EQ(firstNonFinite(bytes(w.data()), n, DType::kF32), slowFirstNonFinite(w))
            << n << " at " << at;
      }
    }
  }
}

TEST(FirstNonFinite, ReadsHalfPrecisionExponents) {
  std::vector<uint16_t> h(2050, 0x3C00);  // 1.0 in float16; 0x3F80 would be 1.0 in bfloat16
  h[5] = 0x7BFF;                          // float16's largest finite
  EXPECT_EQ(firstNonFinite(bytes(h.data()), 2050, DType::kF16), -1);
  h[2049] = 0xFC00;  // -inf
  EXPECT_EQ(firstNonFinite(bytes(h.data()), 2050, DType::kF16), 2049);
  h[1500] = 0x7E00;  // NaN
  EXPECT_EQ(firstNonFinite(bytes(h.data()), 2050, DType::kF16), 1500);
  // 0x7C00 is a finite bfloat16 (about 2.6e36); its inf is 0x7F80.
  std::vector<uint16_t> b(2050, 0x7C00);
  EXPECT_EQ(firstNonFinite(bytes(b.data()), 2050, DType::kBF16), -1);
  b[1024] = 0xFF80;
  EXPECT_EQ(firstNonFinite(bytes(b.data()), 2050, DType::kBF16), 1024);
}

TEST(FirstNonFinite, IntegersAreAlwaysFinite) {
  const std::vector<int32_t> i(100, -1);  // all bits set
  EXPECT_EQ(firstNonFinite(bytes(i.data()), 100, DType::kI32), -1);
  EXPECT_EQ(firstNonFinite(bytes(i.data()), 50, DType::kI64), -1);
}

TEST(CopyCheckingFinite, CopiesEveryByteAndFindsInfOrNanInAnyBlock) {
  // Past the 64 KiB blocks checked while in cache, and past one thread's 4 MiB share.
  const int64_t n = (int64_t{5} << 20) / 4 + 3;
  std::vector<float> from(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) from[static_cast<size_t>(i)] = static_cast<float>(i % 977) - 400;
  ThreadPool pool(2);
  for (bool onPool : {false, true}) {
    auto check = [&](const float* src, float* dst) {
      const auto* from8 = reinterpret_cast<const uint8_t*>(src);
      auto* to8 = reinterpret_cast<uint8_t*>(dst);
      return onPool ? copyCheckingFinite(pool, from8, to8, n, DType::kF32)
                    : copyCheckingFinite(from8, to8, n, DType::kF32);
    };
    std::vector<float> to(static_cast<size_t>(n), -1.0f);
    EXPECT_TRUE(check(from.data(), to.data())) << onPool;
    EXPECT_EQ(to, from) << onPool;
    for (int64_t at : {int64_t{0}, int64_t{16383}, int64_t{16384}, n / 2, n - 1}) {
      std::vector<float> bad = from;
      bad[static_cast<size_t>(at)] = std::numeric_limits<float>::infinity();
      EXPECT_FALSE(check(bad.data(), to.data())) << onPool << " at " << at;
      EXPECT_FALSE(check(nullptr, bad.data())) << onPool << " in place, at " << at;
    }
    EXPECT_TRUE(check(nullptr, from.data())) << onPool;
  }
}

// The streamed copy's edges: every destination alignment an element allows, lengths around its
// 64-byte blocks, a hit in the head, the body and the tail, for each type.
TEST(CopyCheckingFinite, EveryAlignmentLengthAndType) {
  struct Case {
    DType dtype;
    std::vector<uint8_t> special;  // one element's bytes: inf or NaN (empty: integers)
  };
  const std::vector<Case> cases = {{DType::kF32, {0x00, 0x00, 0x80, 0xFF}},  // -inf
                                   {DType::kF16, {0x00, 0x7E}},              // NaN
                                   {DType::kBF16, {0x80, 0x7F}},             // inf
                                   {DType::kI32, {}},
                                   {DType::kI64, {}}};
  for (const Case& c : cases) {
    const auto size = static_cast<int64_t>(dtypeSize(c.dtype));
    for (int64_t n : {0, 1, 3, 15, 16, 17, 40, 97, 1000}) {
      std::vector<uint8_t> from(static_cast<size_t>(n * size + 64));
      for (size_t i = 0; i < from.size(); ++i) from[i] = static_cast<uint8_t>(i * 37 % 61);
      for (int64_t shift = 0; shift < 16; shift += size) {
        std::vector<uint8_t> to(from.size() + 32, 0xAB);
        // `to` at every offset from a 16-byte boundary that keeps its elements aligned.
        const auto base = reinterpret_cast<uintptr_t>(to.data());
        uint8_t* dst = to.data() + ((16 - base % 16) % 16) + shift;
        EXPECT_TRUE(copyCheckingFinite(from.data() + 8, dst, n, c.dtype)) << n << " " << shift;
        EXPECT_EQ(std::memcmp(dst, from.data() + 8, static_cast<size_t>(n * size)), 0)
            << n << " " << shift;
        if (c.special.empty() || n == 0) continue;
        for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
          std::vector<uint8_t> bad = from;
          std::memcpy(bad.data() + 8 + at * size, c.special.data(), c.special.size());
          EXPECT_FALSE(copyCheckingFinite(bad.data() + 8, dst, n, c.dtype))
              << dtypeName(c.dtype) << " n " << n << " shift " << shift << " at " << at;
        }
      }
    }
  }
}

TEST(FirstNonFinite, FindsFloat8NanAndInfinity) {
  // e4m3fn has no infinity: only its NaN (every bit but the sign set) is not finite; 0x7E is 448.
  std::vector<uint8_t> e4m3(3000, 0x7E);
  e4m3[5] = 0x3C;
  EXPECT_EQ(firstNonFinite(e4m3.data(), 3000, DType::kF8E4M3), -1);
  e4m3[2100] = 0xFF;
  EXPECT_EQ(firstNonFinite(e4m3.data(), 3000, DType::kF8E4M3), 2100);
  // e5m2: 0x7B is 57344, 0x7C infinity, 0x7D.. NaN.
  std::vector<uint8_t> e5m2(3000, 0xFB);
  EXPECT_EQ(firstNonFinite(e5m2.data(), 3000, DType::kF8E5M2), -1);
  e5m2[1500] = 0x7D;
  e5m2[2999] = 0x7C;
  EXPECT_EQ(firstNonFinite(e5m2.data(), 3000, DType::kF8E5M2), 1500);
  EXPECT_EQ(dtypeSize(DType::kF8E4M3), 1u);
  EXPECT_EQ(dtypeName(DType::kF8E5M2), "float8_e5m2");
}

}  // namespace
}  // namespace dtc
