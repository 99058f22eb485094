// runtime/support/float8.h against ml_dtypes (float8_cases.inc, from gen_float8_cases.py): the
// saturating, round-to-nearest-even conversion of float32 to e4m3fn and e5m2, and every code's
// value.
#include "support/float8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace dtc {
namespace {

struct Float8Case {
  uint32_t bits;
  uint8_t e4m3, e5m2;
};
struct Float8Value {
  uint8_t code;
  uint32_t e4m3, e5m2;
};

#include "float8_cases.inc"

TEST(Float8, RoundsAndSaturatesAsTheReference) {
  int checked = 0;
  for (const Float8Case& c : kFloat8Cases) {
    const float x = bitsToF32(c.bits);
    EXPECT_EQ(f32ToFloat8<E4M3>(x), c.e4m3) << "e4m3fn of " << x;
    EXPECT_EQ(f32ToFloat8<E5M2>(x), c.e5m2) << "e5m2 of " << x;
    ++checked;
  }
  EXPECT_GT(checked, 3000);
}

TEST(Float8, EveryCodeHasTheReferenceValue) {
  for (const Float8Value& v : kFloat8Values) {
    for (auto [got, want] : {std::pair{float8ToF32<E4M3>(v.code), bitsToF32(v.e4m3)},
                             std::pair{float8ToF32<E5M2>(v.code), bitsToF32(v.e5m2)}}) {
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << "code " << int(v.code);
      } else {
        EXPECT_EQ(f32ToBits(got), f32ToBits(want)) << "code " << int(v.code);
      }
    }
  }
}

TEST(Float8, EveryFiniteCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    const float e4 = float8ToF32<E4M3>(code), e5 = float8ToF32<E5M2>(code);
    if (std::isfinite(e4)) {
      EXPECT_EQ(f32ToFloat8<E4M3>(e4), code) << c;
    }
    if (std::isfinite(e5)) {
      EXPECT_EQ(f32ToFloat8<E5M2>(e5), code) << c;
    }
  }
}

TEST(Float8, NanStaysNanAndInfinitySaturates) {
  EXPECT_TRUE(std::isnan(float8ToF32<E4M3>(f32ToFloat8<E4M3>(NAN))));
  EXPECT_TRUE(std::isnan(float8ToF32<E5M2>(f32ToFloat8<E5M2>(NAN))));
  EXPECT_EQ(float8ToF32<E4M3>(f32ToFloat8<E4M3>(INFINITY)), kE4M3Max);
  EXPECT_EQ(float8ToF32<E5M2>(f32ToFloat8<E5M2>(-INFINITY)), -kE5M2Max);
}

}  // namespace
}  // namespace dtc
