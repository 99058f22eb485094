// A tensor's dimensions as the backends' kernels take them, row-major (C order), and their
// product: one definition both backends and the backend-neutral layer share.
#pragma once

#include <cstdint>
#include <vector>

namespace dtc {

using Shape = std::vector<int64_t>;

inline int64_t numElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace dtc
