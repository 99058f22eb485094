#include "support/finite_copy.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace dtc {
namespace {

constexpr int64_t kThreadGrainBytes = int64_t{4} << 20;  // a thread's share at least
constexpr int64_t kCachedBytes = int64_t{64} << 10;      // copied, then checked while in cache

// Copies, then checks the copy while it is in cache.
bool copyThenCheck(const uint8_t* from, uint8_t* to, int64_t n, DType dtype) {
  const int64_t size = static_cast<int64_t>(dtypeSize(dtype));
  const int64_t cached = kCachedBytes / size;
  for (int64_t at = 0; at < n; at += cached) {
    const int64_t count = std::min(cached, n - at);
    uint8_t* chunk = to + at * size;
    if (from) std::memcpy(chunk, from + at * size, static_cast<size_t>(count * size));
    if (firstNonFinite(chunk, count, dtype) >= 0) return false;
  }
  return true;
}

#if defined(__SSE2__)
// Checks each 16 bytes as they pass through registers and stores them past the cache: the copy
// neither reads the destination in first nor evicts the training step's data for it, and it
// reads the source once where a copy followed by a check reads it twice.
// `to` must be 16-byte aligned; `bytes` a multiple of 64.
template <int kLaneBits>
bool streamCheckingFinite(const uint8_t* from, uint8_t* to, int64_t bytes, uint32_t exponent) {
  const __m128i e = kLaneBits == 32 ? _mm_set1_epi32(static_cast<int>(exponent))
                                    : _mm_set1_epi16(static_cast<int16_t>(exponent));
  auto allOnes = [&](__m128i v) {
    const __m128i masked = _mm_and_si128(v, e);
    return kLaneBits == 32 ? _mm_cmpeq_epi32(masked, e) : _mm_cmpeq_epi16(masked, e);
  };
  __m128i hits = _mm_setzero_si128();
  for (int64_t i = 0; i < bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + 48));
    if (exponent != 0)
      hits = _mm_or_si128(hits, _mm_or_si128(_mm_or_si128(allOnes(a), allOnes(b)),
                                             _mm_or_si128(allOnes(c), allOnes(d))));
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 48), d);
  }
  // Streaming stores are weakly ordered: whoever learns that the copy is done sees its bytes.
  _mm_sfence();
  return _mm_movemask_epi8(hits) == 0;
}
#endif

}  // namespace

bool copyCheckingFinite(const uint8_t* from, uint8_t* to, int64_t n, DType dtype) {
  const int64_t size = static_cast<int64_t>(dtypeSize(dtype));
  if (n <= 0 || size == 0) return true;
#if defined(__SSE2__)
  const auto address = reinterpret_cast<uintptr_t>(to);
  if (from && address % static_cast<uintptr_t>(size) == 0) {
    // The elements before `to`'s first 16-byte boundary and after the last whole 64 bytes are
    // copied and checked as before; the body in between is streamed.
    const int64_t head =
        std::min<int64_t>(n, static_cast<int64_t>((16 - address % 16) % 16) / size);
    const int64_t body = (n - head) * size / 64 * 64;
    const int64_t tail = head + body / size;
    const uint32_t exponent = nonFiniteExponent(dtype);  // integers: 0, nothing to check
    if (!copyThenCheck(from, to, head, dtype)) return false;
    if (body > 0) {
      const uint8_t* src = from + head * size;
      uint8_t* dst = to + head * size;
      const bool finite = size == 4   ? streamCheckingFinite<32>(src, dst, body, exponent)
                          : size == 2 ? streamCheckingFinite<16>(src, dst, body, exponent)
                                      : copyThenCheck(src, dst, body / size, dtype);
      if (!finite) return false;
    }
    return copyThenCheck(from + tail * size, to + tail * size, n - tail, dtype);
  }
#endif
  return copyThenCheck(from, to, n, dtype);
}

bool copyCheckingFinite(ThreadPool& pool, const uint8_t* from, uint8_t* to, int64_t n,
                        DType dtype) {
  const int64_t size = static_cast<int64_t>(dtypeSize(dtype));
  if (n <= 0 || size == 0) return true;
  const int64_t cached = kCachedBytes / size;
  std::atomic<bool> finite{true};
  pool.parallelFor(n, kThreadGrainBytes / size, [&](int64_t begin, int64_t end) {
    for (int64_t at = begin; at < end && finite.load(std::memory_order_relaxed); at += cached) {
      const int64_t count = std::min(cached, end - at);
      if (!copyCheckingFinite(from ? from + at * size : nullptr, to + at * size, count, dtype))
        finite = false;
    }
  });
  return finite.load();
}

}  // namespace dtc
