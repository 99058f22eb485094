#include "io/crc32.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace dtc::io {
namespace {

std::vector<uint8_t> randomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(n);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

// The standard check value: CRC-32 of "123456789" (zlib's and Python's zlib.crc32).
TEST(Crc32, KnownValue) {
  const char digits[] = "123456789";
  EXPECT_EQ(crc32(0, digits, 9), 0xCBF43926u);
  EXPECT_EQ(crc32(0, digits, 0), 0u);
  EXPECT_EQ(crc32(0x1234u, digits, 0), 0x1234u);
}

// Whichever computes it (ISA-L where installed), every length and alignment and every way of
// chaining gives zlib's value.
TEST(Crc32, AgreesWithZlibAtEveryLengthOffsetAndSplit) {
  const std::vector<uint8_t> bytes = randomBytes(1 << 20, 7);
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t offset = rng() % 64;
    const size_t length = trial < 100 ? static_cast<size_t>(trial) : rng() % (bytes.size() - 64);
    const uint8_t* p = bytes.data() + offset;
    const uint32_t expected = referenceCrc32(0, p, length);
    ASSERT_EQ(crc32(0, p, length), expected) << "offset " << offset << " length " << length;
    const size_t split = length ? rng() % length : 0;
    ASSERT_EQ(crc32(crc32(0, p, split), p + split, length - split), expected);
    ASSERT_EQ(crc32Combine(crc32(0, p, split), crc32(0, p + split, length - split), length - split),
              expected);
  }
  std::printf("crc32 computed by %s\n", fastCrc32() ? "ISA-L" : "zlib");
}

}  // namespace
}  // namespace dtc::io
