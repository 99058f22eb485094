#include "cpu/kernels/fast_math.h"

namespace dtc::cpu {

DTC_VECTOR_CLONES void expShifted(const float* x, float scale, float shift, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = fastExp(scale * x[i] - shift);
}

double sumExpShifted(const float* x, int64_t n, float shift) {
  constexpr int64_t kChunk = 256;
  float e[kChunk];
  double s = 0;
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t m = n - begin < kChunk ? n - begin : kChunk;
    expShifted(x + begin, 1.0f, shift, e, m);
    for (int64_t i = 0; i < m; ++i) s += e[i];
  }
  return s;
}

}  // namespace dtc::cpu
