// Deterministic parameter initialisation from init rules.
#pragma once

#include <cstdint>
#include <string>

namespace dtc::data {

enum class InitKind { kZeros, kOnes, kUniform, kNormal };

// Fills `out[0, n)`. uniform: U[a, b); normal: N(mean a, std b). Counter-based: element i's
// random bits depend only on (seed, name, i), never on the order or process that fills them.
// Exactly (all uint64 arithmetic wraps; G = 0x9E3779B97F4A7C15):
//   key = seed ^ fnv1a64(name)
//     (FNV-1a 64 over the name's bytes: h = 0xcbf29ce484222325; per byte h ^= b, h *=
//     0x100000001b3)
//   state = key + k·G;  u_k = (splitmix64(state) >> 40) / 2^24
//     (splitmix64 adds G before mixing, so u_k mixes key + (k+1)·G; u_k is in [0, 1))
//   uniform_i = a + (b − a)·u_i;  normal_i = a + b·sqrt(−2 ln(1 − u_2i))·cos(2π u_2i+1)
// computed in double and rounded to float (so a uniform value can round up to b when b - a is
// tiny next to |b|). zeros/ones ignore a, b, seed and name.
void fillInit(InitKind kind, double a, double b, uint64_t seed, const std::string& name, float* out,
              int64_t n);

}  // namespace dtc::data
