#include "support/finite_copy.h"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace dtc {
namespace {

constexpr int64_t kThreadGrainBytes = int64_t{4} << 20;  // a thread's share at least
constexpr int64_t kCachedBytes = int64_t{64} << 10;      // copied, then checked while in cache

}  // namespace

bool copyCheckingFinite(const uint8_t* from, uint8_t* to, int64_t n, DType dtype) {
  const int64_t size = static_cast<int64_t>(dtypeSize(dtype));
  if (n <= 0 || size == 0) return true;
  const int64_t cached = kCachedBytes / size;
  for (int64_t at = 0; at < n; at += cached) {
    const int64_t count = std::min(cached, n - at);
    uint8_t* chunk = to + at * size;
    if (from) std::memcpy(chunk, from + at * size, static_cast<size_t>(count * size));
    if (firstNonFinite(chunk, count, dtype) >= 0) return false;
  }
  return true;
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
