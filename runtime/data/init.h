// Deterministic parameter initialisation from init rules.
#pragma once

#include <cstdint>
#include <string>

namespace dtc::data {

enum class InitKind { kZeros, kOnes, kUniform, kNormal };

// Fills `out[0, n)`. uniform: U[a, b); normal: N(mean a, std b). Counter-based: element i's
// random bits depend only on (seed, name, i), never on the order or process that fills them:
//   key = seed ^ fnv1a64(name);  u_k = top 24 bits of splitmix64(key + k·0x9E3779B97F4A7C15) / 2^24
//   uniform_i = a + (b − a)·u_i;  normal_i = a + b·sqrt(−2 ln(1 − u_2i))·cos(2π u_2i+1)
void fillInit(InitKind kind, double a, double b, uint64_t seed, const std::string& name, float* out,
              int64_t n);

}  // namespace dtc::data
