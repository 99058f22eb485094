// Copying state out (a checkpoint's snapshot) and checking that it is finite in one pass over
// the memory, on every thread of a pool: the check reads each chunk while the copy has just put
// it in cache, instead of streaming the whole state through memory a second time.
#pragma once

#include <cstdint>

#include "support/dtype.h"
#include "support/thread_pool.h"

namespace dtc {

// Copies `n` elements of `dtype` from `from` to `to` (from == nullptr: checks `to` in place) and
// returns whether every one is finite. The ranges must not overlap.
bool copyCheckingFinite(ThreadPool& pool, const uint8_t* from, uint8_t* to, int64_t n, DType dtype);
// The same on the calling thread alone.
bool copyCheckingFinite(const uint8_t* from, uint8_t* to, int64_t n, DType dtype);

}  // namespace dtc
