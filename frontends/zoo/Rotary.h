// Rotary position embeddings as transformers computes their tables (modeling_rope_utils.py):
// the inverse frequency of each channel pair under each of its `rope_type`s, and the factor the
// cosines and sines are scaled by.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtc::zoo {

struct RopeScaling {
  // default, linear, dynamic, yarn, longrope or llama3 (config.json's rope_scaling.rope_type).
  std::string type = "default";
  double factor = 1.0;
  // llama3: the wavelengths between original/high and original/low are smoothed.
  double lowFreqFactor = 1.0, highFreqFactor = 4.0;
  int64_t originalMaxPositions = 0;  // llama3 (required), longrope (optional)
  // yarn, longrope: what the cosines and sines are scaled by (< 0: from the factor).
  double attentionFactor = -1.0;
  double betaFast = 32.0, betaSlow = 1.0;       // yarn's correction range
  std::vector<double> longFactor, shortFactor;  // longrope: one per channel pair
};

// "" when `scaling` holds what its type needs (a factor >= 1 where it takes one, longrope's
// per-pair factors for `dim`), else the reason.
std::string validateRope(const RopeScaling& scaling, int64_t dim);

// The inverse frequencies of the dim/2 channel pairs: θ^(-2i/dim) under `scaling`, for a model
// of `maxPositions` positions (max_position_embeddings). "dynamic" scales only positions past
// that, which a training window never reaches: it is the default there.
std::vector<double> ropeInverseFrequencies(const RopeScaling& scaling, double theta, int64_t dim,
                                           int64_t maxPositions);

// The factor transformers multiplies cos and sin by (1 but for yarn and longrope).
double ropeAttentionFactor(const RopeScaling& scaling, int64_t maxPositions);

// cos and sin tables [positions, dim]: angle t·f for pair i in channels i and i + dim/2
// (rotate_half's layout), as float32 rounds them (the angle a float product, as transformers'
// float32 matmul of frequencies and positions), times the attention factor.
void ropeTables(const std::vector<double>& inverseFrequencies, int64_t positions, double factor,
                std::vector<float>& cosines, std::vector<float>& sines);

}  // namespace dtc::zoo
