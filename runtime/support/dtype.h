// Element types the runtime stores. Values match dtc.plan.DType in schema/plan.fbs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace dtc {

// kF8E4M3 and kF8E5M2: FP8's float8_e4m3fn and float8_e5m2 (support/float8.h).
enum class DType : int8_t {
  kF32 = 0,
  kF16 = 1,
  kBF16 = 2,
  kI32 = 3,
  kI64 = 4,
  kF8E4M3 = 5,
  kF8E5M2 = 6
};

inline size_t dtypeSize(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kF8E4M3:
    case DType::kF8E5M2: return 1;
  }
  return 0;
}

// float8_e4m3fn or float8_e5m2: FP8 training's codes.
inline bool float8(DType t) { return t == DType::kF8E4M3 || t == DType::kF8E5M2; }

namespace detail {

// Whether any of kBlock elements at `data` has every bit of `exponent` set. Branch-free over a
// fixed count, so that the compiler vectorizes it: the scan runs at memory speed (a loop that
// stops at the first hit does not vectorize and ran at half of it).
template <typename Bits, int64_t kBlock>
inline bool blockHasAllOnes(const uint8_t* data, Bits exponent) {
  Bits hits = 0;
  for (int64_t i = 0; i < kBlock; ++i) {
    Bits v;
    std::memcpy(&v, data + sizeof(Bits) * i, sizeof(Bits));
    hits |= static_cast<Bits>(static_cast<Bits>(~v & exponent) == 0);
  }
  return hits != 0;
}

template <typename Bits>
inline int64_t firstAllOnes(const uint8_t* data, int64_t n, Bits exponent) {
  constexpr int64_t kBlock = 1024;
  int64_t i = 0;
  while (i + kBlock <= n && !blockHasAllOnes<Bits, kBlock>(data + sizeof(Bits) * i, exponent))
    i += kBlock;
  for (; i < n; ++i) {  // the block that holds the first hit, or the tail
    Bits v;
    std::memcpy(&v, data + sizeof(Bits) * i, sizeof(Bits));
    if ((v & exponent) == exponent) return i;
  }
  return -1;
}

}  // namespace detail

// A float of `t` is inf or NaN when these bits, its exponent, are all set; 0 for integers,
// which are always finite.
inline uint32_t nonFiniteExponent(DType t) {
  switch (t) {
    case DType::kF32: return 0x7F800000u;
    case DType::kF16: return 0x7C00;
    case DType::kBF16: return 0x7F80;
    case DType::kF8E4M3: return 0x7F;  // no infinity: NaN alone, every bit but the sign set
    case DType::kF8E5M2: return 0x7C;
    case DType::kI32:
    case DType::kI64: return 0;
  }
  return 0;
}

// Index of the first inf or NaN among `n` elements of `t` at `data`, or -1.
inline int64_t firstNonFinite(const uint8_t* data, int64_t n, DType t) {
  const uint32_t exponent = nonFiniteExponent(t);
  if (exponent == 0) return -1;
  switch (dtypeSize(t)) {
    case 4: return detail::firstAllOnes<uint32_t>(data, n, exponent);
    case 2: return detail::firstAllOnes<uint16_t>(data, n, static_cast<uint16_t>(exponent));
    default: return detail::firstAllOnes<uint8_t>(data, n, static_cast<uint8_t>(exponent));
  }
}

// The names PyTorch users know ("float32", "int64").
inline std::string dtypeName(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kF8E4M3: return "float8_e4m3fn";
    case DType::kF8E5M2: return "float8_e5m2";
  }
  return "unknown";
}

}  // namespace dtc
