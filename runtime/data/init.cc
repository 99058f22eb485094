#include "data/init.h"

#include <cmath>

#include "data/sampler.h"

namespace dtc::data {
namespace {

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

double uniformAt(uint64_t key, uint64_t k) {
  uint64_t state = key + k * 0x9E3779B97F4A7C15ull;
  return static_cast<double>(splitmix64(state) >> 40) * (1.0 / 16777216.0);
}

}  // namespace

void fillInit(InitKind kind, double a, double b, uint64_t seed, const std::string& name, float* out,
              int64_t n) {
  uint64_t key = seed ^ fnv1a64(name);
  for (int64_t i = 0; i < n; ++i) {
    double v = 0;
    switch (kind) {
      case InitKind::kZeros: v = 0; break;
      case InitKind::kOnes: v = 1; break;
      case InitKind::kUniform: v = a + (b - a) * uniformAt(key, i); break;
      case InitKind::kNormal: {
        double u1 = uniformAt(key, 2 * i), u2 = uniformAt(key, 2 * i + 1);
        v = a + b * std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * M_PI * u2);
        break;
      }
    }
    out[i] = static_cast<float>(v);
  }
}

}  // namespace dtc::data
